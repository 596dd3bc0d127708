// Command build compiles every Lambda under handlers/ as a static
// linux/arm64 `bootstrap` for the provided.al2023 runtime and zips each one
// as dist/<name>.zip.
//
//	go run ./scripts/build [-out dist] [-handlers handlers]
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/commitcollect/backend/scripts/lambdabuild"
)

func main() {
	out := flag.String("out", "dist", "folder for the zips")
	dir := flag.String("handlers", "handlers", "folder holding one package per Lambda")
	flag.Parse()
	zips, err := lambdabuild.BuildAll(*dir, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		os.Exit(1)
	}
	for _, z := range zips {
		slog.Info("built", "zip", z)
	}
}
