package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"unicode"

	"vouch.dev/vouch/evidence"
)

// Exit statuses of `vouch receipt verify` (contract).
const (
	exitReceiptValid   = 0
	exitReceiptInvalid = 1
)

// maxEnvelope bounds the signed receipt file read.
const maxEnvelope = 64 << 20

const receiptUsage = `usage: vouch receipt verify FILE --key PUBKEY

Checks that FILE is a receipt signed by the PEM ed25519 public key PUBKEY
(the one the service serves at /key): signature, in-toto statement,
predicate type and that the subject is the receipt's head commit.
Exit 0 valid, 1 invalid, 2 usage or unreadable input.
`

// runReceipt runs `vouch receipt SUBCOMMAND`; only verify exists.
func runReceipt(ctx context.Context, logger *slog.Logger, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "verify" {
		fmt.Fprint(stderr, receiptUsage)
		return exitUsage
	}
	return runReceiptVerify(ctx, logger, args[1:], stdout, stderr)
}

// runReceiptVerify checks one signed receipt and prints its verdict.
func runReceiptVerify(_ context.Context, _ *slog.Logger, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("receipt verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, receiptUsage) }
	keyPath := fs.String("key", "", "PEM ed25519 public key `PUBKEY`")
	// FILE may come before or after the flags.
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			return exitUsage
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(files) != 1 || *keyPath == "" {
		fmt.Fprint(stderr, receiptUsage)
		return exitUsage
	}

	keyPEM, err := readBounded(*keyPath, 64<<10)
	if err != nil {
		fmt.Fprintf(stderr, "vouch receipt verify: read key: %v\n", err)
		return exitUsage
	}
	pub, err := evidence.ParsePublicKeyPEM(keyPEM)
	if err != nil {
		fmt.Fprintf(stderr, "vouch receipt verify: %s: %v\n", *keyPath, err)
		return exitUsage
	}
	env, err := readBounded(files[0], maxEnvelope)
	if err != nil {
		fmt.Fprintf(stderr, "vouch receipt verify: read receipt: %v\n", err)
		return exitUsage
	}
	rc, err := evidence.VerifyEnvelope(env, pub)
	if err != nil {
		fmt.Fprintf(stdout, "INVALID: %s\n", printable(err.Error()))
		return exitReceiptInvalid
	}
	fmt.Fprintf(stdout, "VALID: receipt signed by %s\n", printable(*keyPath))
	fmt.Fprintf(stdout, "head:      %s\n", printable(rc.Head))
	fmt.Fprintf(stdout, "base:      %s\n", printable(rc.Base))
	fmt.Fprintf(stdout, "OUTCOME=%s\n", printable(string(rc.Outcome)))
	fmt.Fprintf(stdout, "REASON=%s\n", printable(string(rc.Reason)))
	return exitReceiptValid
}

// readBounded reads the regular file at path, refusing one over n bytes.
func readBounded(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, n+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > n {
		return nil, errors.New(path + ": larger than " + fmt.Sprint(n) + " bytes")
	}
	return b, nil
}

// printable drops what could drive a terminal from text a receipt carries
// and bounds it to one line.
func printable(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == ' ' || unicode.IsGraphic(r) {
			return r
		}
		return -1
	}, strings.ToValidUTF8(s, "\uFFFD"))
	if r := []rune(s); len(r) > 512 {
		s = string(r[:512]) + "…"
	}
	return s
}
