GO ?= go
PKGS := ./...

.PHONY: all build demo test bench fuzz lint clean gitea

all: build

build:
	$(GO) build -o bin/vouch ./cmd/vouch

## demo: build vouch and verify a generated repository's clean, failing and tampered heads.
demo:
	sh fixtures/demo.sh

## test: the whole suite with real git, real bwrap; brief fuzzing.
test: lint gitea
	$(GO) test -count=1 -race $(PKGS)
	GO=$(GO) sh fixtures/unprivileged.sh
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 20000x ./forge/gitea/
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 20000x ./forge/github/
	$(GO) test -run '^$$' -fuzz FuzzCountTests -fuzztime 20000x ./evidence/

## bench: the benchmarks named in the issues.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 20x ./gate/ ./sandbox/
	$(GO) test -run '^$$' -bench . -benchmem ./forge/gitea/ ./forge/github/
	$(GO) test -run '^$$' -bench BenchmarkIntakeLoad -benchtime 3000x ./bot/

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzCountTests -fuzztime 2m ./evidence/
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 2m ./forge/gitea/
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 2m ./forge/github/

## gitea: build the Gitea server the forge tests run against, once (cached in ~/.cache/vouch).
## Under CI=true a failed build fails; elsewhere the Gitea tests then skip.
gitea:
	@GO=$(GO) sh forge/forgetest/build.sh || { [ "$${CI:-}" != true ] && echo "gitea unavailable: the Gitea tests will skip" >&2; }

lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

clean:
	rm -rf bin
