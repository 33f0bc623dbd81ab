package main

import (
	"context"
	"crypto/ed25519"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"vouch.dev/vouch/bot"
	"vouch.dev/vouch/evidence"
	"vouch.dev/vouch/gate"
	"vouch.dev/vouch/sandbox"
)

// listFlag collects a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func runVerify(ctx context.Context, logger *slog.Logger, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		repo, base, head = fs.String("repo", "", "git repository `DIR`"), fs.String("base", "", "base revision"), fs.String("head", "", "head revision")
		receiptPath      = fs.String("receipt", "", "write the JSON receipt to `FILE`")
		commentPath      = fs.String("comment", "", "write the Markdown comment to `FILE`")
		signKey          = fs.String("sign-key", "", "ed25519 key `FILE` (created if absent; its public key goes to FILE.pub) to sign the receipt with")
		envelopePath     = fs.String("signed-receipt", "", "write the DSSE-signed in-toto receipt to `FILE` (needs --sign-key)")
		workRoot         = fs.String("work-root", "", "parent `DIR` of sandbox workspaces (default: system temp)")
		keepWorkspace    = fs.Bool("keep-workspace", false, "keep the workspace after the run (debugging)")
		trustedDev       = fs.Bool("trusted-development", false, "run steps WITHOUT isolation (operator's explicit choice; every result says NOT ISOLATED)")
		policy           = gate.DefaultPolicy()
		protect          listFlag
	)
	fs.Var(&protect, "protect", "operator-protected doublestar `GLOB` (repeatable)")
	var toolchains listFlag
	fs.Var(&toolchains, "toolchain", "operator toolchain `NAME=DIR[,DIR...]` a recipe may select, bound read-only (repeatable)")
	fs.IntVar(&policy.MaxFiles, "max-files", policy.MaxFiles, "refuse heads with more files than this")
	fs.Int64Var(&policy.MaxBytes, "max-bytes", policy.MaxBytes, "refuse heads with more blob bytes than this")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if *repo == "" || *base == "" || *head == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "vouch verify: --repo, --base and --head are required")
		return exitUsage
	}
	policy.Protected = protect

	cfg := sandbox.DefaultConfig()
	if b := os.Getenv("VOUCH_BWRAP"); b != "" {
		cfg.Bwrap = b
	}
	if *workRoot != "" {
		cfg.WorkRoot = *workRoot
	}
	cfg.KeepWorkspace = *keepWorkspace
	if *trustedDev {
		cfg.Mode = sandbox.ModeTrustedDevelopment
	}
	for _, tc := range toolchains {
		name, dirs, ok := strings.Cut(tc, "=")
		if !ok || name == "" || dirs == "" {
			fmt.Fprintf(stderr, "vouch verify: --toolchain %q: want NAME=DIR[,DIR...]\n", tc)
			return exitUsage
		}
		if cfg.Toolchains == nil {
			cfg.Toolchains = map[string]sandbox.Toolchain{}
		}
		cfg.Toolchains[name] = sandbox.Toolchain{Paths: strings.Split(dirs, ",")}
	}
	runner, err := sandbox.New(cfg, logger)
	if err != nil {
		fmt.Fprintf(stderr, "vouch verify: %v\n", err)
		return exitUsage
	}
	rc, err := bot.Verify(ctx, logger, runner, bot.VerifyRequest{RepoDir: *repo, Base: *base, Head: *head, Policy: policy})
	if err != nil {
		fmt.Fprintf(stderr, "vouch verify: %v\n", err)
		return exitUsage
	}
	if *receiptPath != "" {
		data, err := rc.JSON()
		if err == nil {
			err = os.WriteFile(*receiptPath, append(data, '\n'), 0o644)
		}
		if err != nil {
			fmt.Fprintf(stderr, "vouch verify: write receipt: %v\n", err)
			return exitUsage
		}
	}
	if (*signKey == "") != (*envelopePath == "") {
		fmt.Fprintln(stderr, "vouch verify: --sign-key and --signed-receipt go together")
		return exitUsage
	}
	if *signKey != "" {
		if err := writeSigned(rc, *signKey, *envelopePath); err != nil {
			fmt.Fprintf(stderr, "vouch verify: %v\n", err)
			return exitUsage
		}
	}
	if *commentPath != "" {
		if err := os.WriteFile(*commentPath, []byte(evidence.Comment(rc)), 0o644); err != nil {
			fmt.Fprintf(stderr, "vouch verify: write comment: %v\n", err)
			return exitUsage
		}
	}
	fmt.Fprint(stdout, evidence.Summary(rc))
	return evidence.ExitCode(rc.Outcome)
}

// writeSigned signs rc with the key at keyPath (created when absent, its
// public key written beside it as keyPath.pub) and writes the envelope.
func writeSigned(rc evidence.Receipt, keyPath, envelopePath string) error {
	key, err := evidence.LoadOrCreateKey(keyPath)
	if err != nil {
		return fmt.Errorf("signing key: %w", err)
	}
	pub := key.Public().(ed25519.PublicKey)
	if err := os.WriteFile(keyPath+".pub", evidence.PublicKeyPEM(pub), 0o644); err != nil {
		return fmt.Errorf("write public key: %w", err)
	}
	env, err := evidence.Sign(rc, key)
	if err != nil {
		return fmt.Errorf("sign receipt: %w", err)
	}
	if err := os.WriteFile(envelopePath, env, 0o644); err != nil {
		return fmt.Errorf("write signed receipt: %w", err)
	}
	return nil
}
