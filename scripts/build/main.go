// Command build compiles every Lambda under handlers/ as a static linux
// `bootstrap` for the provided.al2023 runtime (arm64 by default, what
// Terraform deploys) and zips each one as dist/<name>.zip.
//
//	go run ./scripts/build [-out dist] [-handlers handlers] [-goarch arm64|amd64]
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
	goarch := flag.String("goarch", lambdabuild.DeployArch, "architecture of the bootstraps: arm64 (what Terraform deploys) or amd64")
	flag.Parse()
	zips, err := lambdabuild.BuildAllFor(*dir, *out, *goarch)
	if err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
		os.Exit(1)
	}
	for _, z := range zips {
		slog.Info("built", "zip", z, "goarch", *goarch)
	}
}
