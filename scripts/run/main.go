// Command run is `make run`: the whole CommitCollect pipeline on this
// machine (scripts/localstack) until Ctrl-C. Wiring only.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/commitcollect/backend/scripts/localstack"
)

func main() {
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: run\n\nRuns DynamoDB Local, the API, the worker, the stream reader feeding the projector\n"+
			"and the Strava simulator in one process until Ctrl-C. Configuration is read from the environment:\n\n")
		for _, s := range localstack.Settings {
			fmt.Fprintf(os.Stderr, "  %s\n        %s\n", s.Name, s.Meaning)
		}
	}
	flag.Parse()
	var level slog.Level
	if v := os.Getenv("CC_LOG_LEVEL"); v != "" {
		if err := level.UnmarshalText([]byte(v)); err != nil {
			fmt.Fprintf(os.Stderr, "CC_LOG_LEVEL %q: want debug, info, warn or error\n", v)
			os.Exit(2)
		}
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, err := localstack.Start(ctx, localstack.Options{Log: log})
	if err != nil {
		fmt.Fprintf(os.Stderr, "run: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(localstack.Banner(st))
	select {
	case <-ctx.Done():
	case <-st.Done():
	}
	stop()
	fmt.Fprintln(os.Stderr, "run: shutting down")
	closeCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	st.Close(closeCtx)
	if err := st.Err(); err != nil && ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "run: stream reader stopped: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "run: stopped")
}
