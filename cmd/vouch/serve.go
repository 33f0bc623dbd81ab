package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"

	"vouch.dev/vouch/bot"
)

// runServe runs the webhook service until ctx is cancelled (SIGTERM or
// interrupt), then shuts down gracefully. A bad configuration exits 2.
func runServe(ctx context.Context, _ *slog.Logger, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", "", "the service configuration `FILE` (YAML)")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 || *config == "" {
		if err == nil {
			fmt.Fprintln(stderr, "usage: vouch serve --config FILE")
		}
		return exitUsage
	}
	cfg, err := bot.Load(*config)
	if err != nil {
		fmt.Fprintf(stderr, "vouch serve: %v\n", err)
		return exitUsage
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	svc, err := bot.NewService(ctx, cfg, logger)
	if err != nil {
		fmt.Fprintf(stderr, "vouch serve: %v\n", err)
		return exitUsage
	}
	defer svc.Close()
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", cfg.Listen)
	if err != nil {
		fmt.Fprintf(stderr, "vouch serve: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(stdout, "vouch serve: listening on http://%s\n", ln.Addr())
	if err := svc.Serve(ctx, ln); err != nil {
		fmt.Fprintf(stderr, "vouch serve: %v\n", err)
		return exitUsage
	}
	return 0
}
