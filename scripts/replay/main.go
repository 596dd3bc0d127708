// Command replay reads the main table's DynamoDB stream and feeds it to the projector again (in
// process, or the deployed Lambda with --invoke-function); --dry-run prints what would change.
//
// Flags: go run ./scripts/replay --help. Wiring only; the logic is scripts/rebuildkit.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/commitcollect/backend/scripts/rebuildkit/cli"
	"github.com/commitcollect/backend/scripts/rebuildkit/wire"
)

func main() {
	// Ctrl-C or SIGTERM cancels the run; state and checkpoints are saved first.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.ReplayMain(ctx, os.Args[1:], cli.IO{Out: os.Stdout, Err: os.Stderr}, wire.Setup)
	stop()
	os.Exit(code)
}
