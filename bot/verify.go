package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/go-git/go-git/v5"

	"vouch.dev/vouch/evidence"
	"vouch.dev/vouch/gate"
	"vouch.dev/vouch/sandbox"
)

// VerifyRequest names one verification of a local repository.
type VerifyRequest struct {
	// RepoDir is a git repository (work tree or bare).
	RepoDir string
	// Base and Head are revisions; they are resolved to SHAs exactly once.
	Base, Head string
	// Policy is the operator's gate policy.
	Policy gate.Policy
}

// ErrBadInput marks errors caused by the request itself (missing repository,
// unknown revision); the CLI reports them as usage errors.
var ErrBadInput = errors.New("bad input")

// Verify runs the whole local pipeline: freeze, gate, sandbox, judge. A
// returned error means no verdict could be reached; the receipt is then zero.
func Verify(ctx context.Context, logger *slog.Logger, runner *sandbox.Runner, req VerifyRequest) (evidence.Receipt, error) {
	if fi, err := os.Stat(req.RepoDir); err != nil || !fi.IsDir() {
		return evidence.Receipt{}, fmt.Errorf("%w: repository %q is not a directory", ErrBadInput, req.RepoDir)
	}
	repo, err := git.PlainOpen(req.RepoDir)
	if err != nil {
		return evidence.Receipt{}, fmt.Errorf("%w: open repository %q: %v", ErrBadInput, req.RepoDir, err)
	}
	d, err := gate.Decide(ctx, repo, req.Base, req.Head, req.Policy)
	if err != nil {
		return evidence.Receipt{}, fmt.Errorf("%w: %v", ErrBadInput, err)
	}
	log := logger.With("base", d.Base, "head", d.Head)
	plan, ok := d.Admitted()
	if !ok {
		log.Info("gate refused", "refusal", d.Refusal, "violations", len(d.Violations))
		return evidence.Judge(d, nil), nil
	}
	log.Info("gate admitted", "changed", len(d.Changed))
	res, err := runner.Run(ctx, plan)
	if err != nil {
		return evidence.Receipt{}, fmt.Errorf("run sandbox for head %s: %w", d.Head, err)
	}
	rc := evidence.Judge(d, res)
	log.Info("verified", "outcome", rc.Outcome, "reason", rc.Reason)
	return rc, nil
}
