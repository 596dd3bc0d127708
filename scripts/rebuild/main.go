// Command rebuild recomputes milestones from the workout log for one user, a list or every user,
// resumably, and writes what differs.
//
// Flags: go run ./scripts/rebuild --help. Wiring only; the logic is scripts/rebuildkit.
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
	code := cli.RebuildMain(ctx, os.Args[1:], cli.IO{Out: os.Stdout, Err: os.Stderr}, wire.Setup)
	stop()
	os.Exit(code)
}
