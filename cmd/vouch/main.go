// Command vouch verifies pull requests only with evidence. See the contract
// for its subcommands and exit codes.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// exitUsage is the contract's exit status for usage and internal errors.
const exitUsage = 2

const usage = `usage: vouch <command> [flags]

commands:
  verify   --repo DIR --base REV --head REV [--receipt FILE] [--comment FILE]
  doctor   prove the sandbox on this host
  serve    --config FILE   run the webhook service
  receipt  verify FILE --key PUBKEY   check a signed receipt
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	switch args[0] {
	case "verify":
		return runVerify(ctx, logger, args[1:], stdout, stderr)
	case "doctor":
		return runDoctor(ctx, logger, args[1:], stdout, stderr)
	case "receipt":
		return runReceipt(ctx, logger, args[1:], stdout, stderr)
	case "serve":
		return runServe(ctx, logger, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "vouch: unknown command %q\n%s", args[0], usage)
		return exitUsage
	}
}
