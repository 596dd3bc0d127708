// Command rebuild is the one operator command that restores projections:
//
//	rebuild [rebuild] …  recompute milestones from the workout log for one user,
//	                     a list or every user, resumably, and write what differs
//	rebuild verify …     the same recompute without writing, reporting drift
//	                     (exit 0 clean, 1 drift, 2 error)
//	rebuild replay …     feed the main table's stream to the projector again
//	rebuild redrive …    process again what the projector and the worker set
//	                     aside (parked records locally, dead-letter queues in AWS)
//
// make rebuild, make verify, make replay and make redrive run it. Flags: go
// run ./scripts/rebuild <subcommand> --help. Wiring only; the logic is
// scripts/rebuildkit.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/commitcollect/backend/scripts/rebuildkit/cli"
	"github.com/commitcollect/backend/scripts/rebuildkit/wire"
)

// subcommands maps each subcommand to its entry point.
var subcommands = map[string]func(context.Context, []string, cli.IO, cli.Setup) int{
	"rebuild": cli.RebuildMain, "verify": cli.VerifyMain, "replay": cli.ReplayMain, "redrive": cli.RedriveMain,
}

func main() {
	// Ctrl-C or SIGTERM cancels the run; state and checkpoints are saved first.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	args, run := os.Args[1:], cli.RebuildMain
	if len(args) > 0 {
		if m, ok := subcommands[args[0]]; ok {
			args, run = args[1:], m
		}
	}
	code := run(ctx, args, cli.IO{Out: os.Stdout, Err: os.Stderr}, wire.Setup)
	stop()
	os.Exit(code)
}
