# agui-proxy developer commands. `make test` is the one test command CI runs.
.PHONY: test build demo fuzz bench clean

GO ?= go

test: ## install missing tools (redis-server, npm packages) and run every test with -race
	./scripts/test.sh

# What agui-proxy version prints (besides the commit Go stamps when it can run git).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)

build: ## build the binaries into bin/
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o bin/ ./cmd/...

demo: build ## the demo agent on DEMO_LISTEN (:8000) and the proxy in front of it on AGUI_LISTEN (:8080), in-memory store
	./scripts/demo.sh

fuzz: ## run every fuzz target for FUZZTIME (default 30s) each
	./scripts/fuzz.sh $(or $(FUZZTIME),30s)

# Every package with a Benchmark function, found afresh so a new one cannot be left out.
BENCH_PKGS = $(sort $(foreach f,$(shell grep -rl --include='*_test.go' --exclude-dir=node_modules '^func Benchmark' .),./$(patsubst %/,%,$(dir $(patsubst ./%,%,$(f))))))

bench: ## Go benchmarks of the hot paths (every package that has benchmarks)
	$(GO) test -run '^$$' -bench . -benchmem $(BENCH_PKGS)

clean:
	rm -rf bin
