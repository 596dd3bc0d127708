// Command redrive processes again the records the projector and the worker set aside (parked
// records locally, dead-letter queues in AWS), idempotently.
//
// Flags: go run ./scripts/redrive --help. Wiring only; the logic is scripts/rebuildkit.
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
	code := cli.RedriveMain(ctx, os.Args[1:], cli.IO{Out: os.Stdout, Err: os.Stderr}, wire.Setup)
	stop()
	os.Exit(code)
}
