GO ?= go
PKGS := ./...

.PHONY: all build demo test bench fuzz lint clean

all: build

build:
	$(GO) build -o bin/vouch ./cmd/vouch

## demo: build vouch and verify a generated repository's clean, failing and tampered heads.
demo:
	sh fixtures/demo.sh

## test: the whole suite with real git, real bwrap; brief fuzzing.
test: lint
	$(GO) test -count=1 -race $(PKGS)
	$(GO) test -run '^$$' -fuzz FuzzCountTests -fuzztime 20000x ./evidence/

## bench: the benchmarks named in the issues.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 20x ./gate/ ./sandbox/

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzCountTests -fuzztime 2m ./evidence/

lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

clean:
	rm -rf bin
