// Command verify recomputes milestones from the workout log without writing and prints every
// drifting value; it exits 1 on drift.
//
// Flags: go run ./scripts/verify --help. Wiring only; the logic is scripts/rebuildkit.
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
	code := cli.VerifyMain(ctx, os.Args[1:], cli.IO{Out: os.Stdout, Err: os.Stderr}, wire.Setup)
	stop()
	os.Exit(code)
}
