// Package rebuildkit is the logic behind the operator commands that prove and
// restore the projections, the subcommands of scripts/rebuild: replay (feed
// the stream to the projector again), rebuild (recompute every milestone
// from the workout log), verify (the same recompute without writing,
// reporting drift) and redrive (process parked or dead-lettered records
// again: package redrive beside it).
//
// It depends on the projector only through the narrow Recompute contract
// declared here; the commands' wiring adapts projections/consumer to it, so
// the commands and the live Lambda run the same code.
//
// The commands themselves (flags, output, exit status, resumption) are
// scripts/rebuildkit/cli.
package rebuildkit
