package bot

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/riverqueue/river"

	"vouch.dev/vouch/evidence"
	"vouch.dev/vouch/forge"
	"vouch.dev/vouch/forge/fetch"
	"vouch.dev/vouch/gate"
	"vouch.dev/vouch/sandbox"
)

// Deps are what the workers need: the store, a client per forge, the fetch
// cache, the gate policy, the sandbox and the signing key.
type Deps struct {
	Store  *Store
	Forges map[forge.Kind]forge.Client
	Fetch  *fetch.Cache
	Runner *sandbox.Runner
	Policy gate.Policy
	Trust  Trust
	// Notify is mentioned in every STOP_AND_ASK comment (e.g. "@org/team");
	// empty mentions no one.
	Notify string
	// Key signs receipts; nil leaves them unsigned.
	Key ed25519.PrivateKey
	// PublicURL is the service's public root; evidence pages are under it.
	PublicURL string
	Logger    *slog.Logger
	Metrics   *Metrics

	commentLocks sync.Map // pull request key → *sync.Mutex
}

// errSuperseded is the cause with which a run is cancelled when a newer
// head of its pull request is being verified.
var errSuperseded = errors.New("a newer head of the pull request is being verified")

// verifyWorker runs JobVerify jobs.
type verifyWorker struct {
	river.WorkerDefaults[verifyArgs]
	d        *Deps
	inflight *inflight
}

// Work verifies one head: re-read the pull request, post pending, check
// trust (an untrusted, unapproved head stops here, unfetched), fetch the
// exact SHAs, gate, run the sandbox, persist the receipt, then post. An attempt after a crash or a failed post finds the persisted
// receipt and only posts it: a verdict is never run twice. Errors returned
// are transient (the forge or the network) and retried with back-off.
func (w *verifyWorker) Work(ctx context.Context, job *river.Job[verifyArgs]) error {
	a := job.Args
	kind, repo := forge.Kind(a.Forge), splitRepo(a.Repo)
	log := w.d.Logger.With("job", job.ID, "forge", a.Forge, "repo", a.Repo, "pr", a.PR, "head", a.HeadSHA, "attempt", job.Attempt)
	client := w.d.Forges[kind]
	if client == nil {
		return river.JobCancel(fmt.Errorf("forge %q is not configured", a.Forge))
	}
	run, _, err := w.d.Store.BeginRun(ctx, Run{ID: job.ID, Forge: kind, Repo: a.Repo, PR: a.PR, Head: a.HeadSHA, Base: a.BaseSHA})
	if err != nil {
		return err
	}
	switch run.State {
	case RunPosted:
		return nil
	case RunFinal:
		log.Info("posting the persisted receipt")
		return w.post(ctx, client, run)
	}
	started := time.Now()
	res, err := w.verify(ctx, log, client, repo, job)
	if err != nil {
		log.Warn("verification attempt failed; will retry", "err", err)
		return err
	}
	rc := res.receipt
	w.d.Metrics.jobDone(rc, time.Since(started))
	var envelope []byte
	if w.d.Key != nil {
		if envelope, err = evidence.Sign(rc, w.d.Key); err != nil {
			return fmt.Errorf("sign receipt: %w", err)
		}
	}
	run.Title, run.Receipt, run.Envelope, run.Log = res.title, &rc, envelope, res.log
	if run.Base == "" {
		run.Base = rc.Base
	}
	if err := w.d.Store.FinishRun(ctx, run); err != nil {
		return err
	}
	log.Info("verdict persisted", "outcome", rc.Outcome, "reason", rc.Reason)
	// Post what the store holds: FinishRun never replaces a receipt.
	if run, err = w.d.Store.Run(ctx, job.ID); err != nil {
		return err
	}
	return w.post(ctx, client, run)
}

// verdict is a verification's result before it is persisted.
type verdict struct {
	receipt evidence.Receipt
	title   string
	log     []byte
}

// verify reaches a verdict on job's head, or returns a transient error.
func (w *verifyWorker) verify(ctx context.Context, log *slog.Logger, client forge.Client, repo forge.Repo, job *river.Job[verifyArgs]) (verdict, error) {
	a := job.Args
	pr, err := client.PullRequest(ctx, repo, a.PR)
	if err == nil {
		// Whichever job reads the pull request first learns of a push: runs
		// of any other head stop now, not when the new head's job starts,
		// and approvals of any other head lapse.
		w.inflight.supersede(prKey(a), pr.HeadSHA, pr.Open)
		if err := w.d.Store.lapseApprovals(ctx, a.forge(), repo, a.PR, pr.HeadSHA); err != nil {
			return verdict{}, err
		}
	}
	switch {
	case errors.Is(err, forge.ErrNotFound):
		return verdict{receipt: evidence.NewError(a.BaseSHA, a.HeadSHA, evidence.ReasonSuperseded, "the pull request no longer exists")}, nil
	case err != nil:
		return verdict{}, fmt.Errorf("read pull request: %w", err)
	case !pr.Open:
		return verdict{title: pr.Title, receipt: evidence.NewError(a.BaseSHA, a.HeadSHA, evidence.ReasonSuperseded, "the pull request was closed")}, nil
	case pr.HeadSHA != a.HeadSHA:
		return verdict{title: pr.Title, receipt: evidence.NewError(a.BaseSHA, a.HeadSHA, evidence.ReasonSuperseded, "the head moved to "+pr.HeadSHA)}, nil
	}
	v := verdict{title: pr.Title}
	base := a.BaseSHA
	if base == "" {
		base = pr.BaseSHA
	}
	// This head is current: older heads of the pull request stop here.
	ctx, done := w.inflight.start(ctx, job.ID, prKey(job.Args), a.HeadSHA)
	defer done()

	page := w.d.pageURL(job.ID)
	if err := client.SetStatus(ctx, repo, a.HeadSHA, forgeStatus(evidence.Pending(evidence.Running, page))); err != nil {
		return verdict{}, fmt.Errorf("set pending: %w", err)
	}
	unlock := w.d.lockPR(prKey(a))
	known, err := w.d.headComments(ctx, client, a.forge(), repo, a.PR)
	if err == nil {
		err = w.d.putComment(ctx, client, a.forge(), repo, a.PR, known, a.HeadSHA,
			evidence.PendingComment(repo.FullName(), a.PR, a.HeadSHA, evidence.Running, page), false, true)
	}
	unlock()
	if err != nil {
		return verdict{}, fmt.Errorf("post pending comment: %w", err)
	}
	// Trust first: an untrusted author's head is not even downloaded, let
	// alone gated or run, until a maintainer approves that exact commit.
	trusted, why, err := w.trusted(ctx, client, repo, pr)
	if err != nil {
		return verdict{}, err
	}
	if !trusted {
		approval, approved, err := w.d.Store.ApprovalFor(ctx, job.Args.forge(), repo, a.PR, a.HeadSHA)
		if err != nil {
			return verdict{}, err
		}
		if !approved {
			v.receipt = evidence.AwaitApprovalUnread(base, a.HeadSHA, why+"; running it needs a maintainer's approval of head "+a.HeadSHA)
			return v, nil
		}
		log.Info("running an untrusted head on approval", "approved_by", approval.By)
	}
	src, err := client.FetchSource(ctx, pr)
	if err != nil {
		return verdict{}, fmt.Errorf("fetch source: %w", err)
	}
	gitRepo, err := w.d.Fetch.Fetch(ctx, src, base, a.HeadSHA)
	if err != nil {
		if ctx.Err() != nil {
			return w.interrupted(ctx, client, repo, v, a, base)
		}
		var missing *fetch.MissingError
		if errors.As(err, &missing) {
			v.receipt = evidence.NewError(base, a.HeadSHA, evidence.ReasonInternal, "the commits could not be fetched: "+err.Error())
			return v, nil
		}
		return verdict{}, fmt.Errorf("fetch: %w", err)
	}
	d, err := gate.Decide(ctx, gitRepo, base, a.HeadSHA, w.d.Policy)
	if err != nil {
		if ctx.Err() != nil {
			return w.interrupted(ctx, client, repo, v, a, base)
		}
		v.receipt = evidence.NewError(base, a.HeadSHA, evidence.ReasonInternal, "gate: "+err.Error())
		return v, nil
	}
	plan, ok := d.Admitted()
	if !ok {
		v.receipt = evidence.Judge(d, nil)
		return v, nil
	}
	res, err := w.d.Runner.Run(ctx, plan)
	if ctx.Err() != nil {
		return w.interrupted(ctx, client, repo, v, a, base)
	}
	if err != nil {
		w.d.Metrics.sandboxFailure()
		v.receipt = evidence.NewError(base, a.HeadSHA, evidence.ReasonInternal, "sandbox: "+err.Error())
		return v, nil
	}
	if res.Unproven != nil {
		w.d.Metrics.sandboxFailure()
	}
	v.receipt = evidence.Judge(d, res)
	v.log = stepLog(res)
	return v, nil
}

// trusted decides whether pr's head may run without an approval: its
// author's permission, read from the forge now, and, for a head in another
// owner's fork, that owner's too (their pushes change the head).
func (w *verifyWorker) trusted(ctx context.Context, client forge.Client, repo forge.Repo, pr *forge.PullRequest) (bool, string, error) {
	ok, perm, err := w.d.Trust.Decide(ctx, client, repo, pr.Author)
	if err != nil {
		return false, "", err
	}
	if !ok {
		return false, fmt.Sprintf("the author %s has %s permission on %s (trust needs %s)", pr.Author, perm, repo.FullName(), w.d.Trust.min()), nil
	}
	owner := pr.HeadRepo.Owner
	if !pr.Fork || owner == "" || strings.EqualFold(owner, pr.Author) {
		return true, "", nil
	}
	ok, perm, err = w.d.Trust.Decide(ctx, client, repo, owner)
	switch {
	case errors.Is(err, forge.ErrNotFound):
		ok, perm = false, forge.PermNone // an organisation, or a user the forge does not know here
	case err != nil:
		return false, "", err
	}
	if !ok {
		return false, fmt.Sprintf("the head is in %s's fork %s, and %s has %s permission on %s (trust needs %s)",
			owner, pr.HeadRepo.FullName(), owner, perm, repo.FullName(), w.d.Trust.min()), nil
	}
	return true, "", nil
}

// interrupted turns a cancelled run into a verdict or a retry:
//   - cancelled because another job saw a newer head: the forge is asked
//     again, and only if the head really moved (or the pull request was
//     closed) is it SUPERSEDED; a stale view runs the head again;
//   - the job's timeout passed: a final ERROR, never retried;
//   - the service is stopping: a transient error, so the job runs again.
func (w *verifyWorker) interrupted(ctx context.Context, client forge.Client, repo forge.Repo, v verdict, a verifyArgs, base string) (verdict, error) {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errSuperseded):
		askCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		pr, err := client.PullRequest(askCtx, repo, a.PR)
		if err != nil && !errors.Is(err, forge.ErrNotFound) {
			return verdict{}, fmt.Errorf("confirm supersede: %w", err)
		}
		if err == nil && pr.Open && pr.HeadSHA == a.HeadSHA {
			return verdict{}, errors.New("cancelled on a stale view of the pull request; its head is still current, running again")
		}
		v.receipt = evidence.NewError(base, a.HeadSHA, evidence.ReasonSuperseded, "a newer head was pushed, or the pull request closed, while this one was being verified")
		return v, nil
	case errors.Is(cause, context.DeadlineExceeded):
		v.receipt = evidence.NewError(base, a.HeadSHA, evidence.ReasonInternal, "the verification outran the service's job_timeout and was stopped")
		return v, nil
	}
	return verdict{}, fmt.Errorf("interrupted: %w", cause)
}

// post publishes a persisted run: the commit status on its head, and the
// evidence comment of its head edited in place (or created), with every
// older head's comment collapsed to one line. Only the current head keeps
// a full comment.
func (w *verifyWorker) post(ctx context.Context, client forge.Client, run Run) error {
	if run.Receipt == nil {
		return fmt.Errorf("post run %d: no receipt", run.ID)
	}
	ctx = context.WithoutCancel(ctx) // a verdict reached is posted even while stopping
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	repo := splitRepo(run.Repo)
	rc := *run.Receipt
	page := w.d.pageURL(run.ID)
	if err := client.SetStatus(ctx, repo, run.Head, forgeStatus(evidence.Status(rc, page))); err != nil {
		return fmt.Errorf("post status: %w", err)
	}
	current := run.Head
	pr, err := client.PullRequest(ctx, repo, run.PR)
	if err == nil {
		current = pr.HeadSHA
	} else if !errors.Is(err, forge.ErrNotFound) {
		return fmt.Errorf("read pull request: %w", err)
	}
	unlock := w.d.lockPR(prKeyOf(run.Forge, run.Repo, run.PR))
	defer unlock()
	known, err := w.d.headComments(ctx, client, run.Forge, repo, run.PR)
	if err != nil {
		return err
	}
	if run.Head == current {
		// A superseded run (a closed pull request) updates its comment but
		// never opens one.
		create := rc.Reason != evidence.ReasonSuperseded
		if err := w.d.putComment(ctx, client, run.Forge, repo, run.PR, known, run.Head, w.d.runComment(repo, run.PR, rc), false, create); err != nil {
			return err
		}
	}
	for head, c := range known {
		if head == current || c.Collapsed {
			continue
		}
		body := evidence.Superseded(repo.FullName(), run.PR, head, current, w.d.headPage(repo, run.PR))
		if err := w.d.putComment(ctx, client, run.Forge, repo, run.PR, known, head, body, true, false); err != nil {
			return err
		}
	}
	return w.d.Store.MarkPosted(ctx, run.ID)
}

// runComment is the evidence comment of rc, mentioning Notify when it asks
// a maintainer to decide.
func (d *Deps) runComment(repo forge.Repo, pr int, rc evidence.Receipt) string {
	body := evidence.RunComment(repo.FullName(), pr, rc)
	if rc.Outcome == evidence.StopAndAsk && d.Notify != "" && len(body)+len(d.Notify)+8 <= forge.MaxCommentBody {
		body += "\ncc " + d.Notify + "\n"
	}
	return body
}

// pageURL is the evidence page of run id, or "" without a public URL.
func (d *Deps) pageURL(id int64) string {
	if d.PublicURL == "" {
		return ""
	}
	return strings.TrimRight(d.PublicURL, "/") + "/runs/" + strconv.FormatInt(id, 10)
}

// headPage lists a pull request's runs, newest first.
func (d *Deps) headPage(repo forge.Repo, pr int) string {
	if d.PublicURL == "" {
		return ""
	}
	return strings.TrimRight(d.PublicURL, "/") + "/runs?repo=" + repoKey(repo) + "&pr=" + strconv.Itoa(pr)
}

// forgeStatus converts a rendered status.
func forgeStatus(v evidence.StatusView) forge.Status {
	return forge.Status{State: forge.StatusState(v.State), Context: v.Context, Description: v.Description, TargetURL: v.TargetURL}
}

// stepLog joins the steps' outputs under one header line each.
func stepLog(res *sandbox.Result) []byte {
	var b bytes.Buffer
	for _, s := range res.Steps {
		fmt.Fprintf(&b, "==> step %q: exit %d, %d bytes of output\n", s.Name, s.ExitCode, s.OutputBytes)
		b.Write(s.Output)
		if len(s.Output) > 0 && s.Output[len(s.Output)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// splitRepo turns a job's "owner/name" back into a Repo.
func splitRepo(full string) forge.Repo {
	owner, name, _ := strings.Cut(full, "/")
	return forge.Repo{Owner: owner, Name: name}
}

// prKey names a pull request across forges.
func prKey(a verifyArgs) string { return prKeyOf(forge.Kind(a.Forge), a.Repo, a.PR) }

func prKeyOf(k forge.Kind, repo string, pr int) string {
	return string(k) + "/" + strings.ToLower(repo) + "#" + strconv.Itoa(pr)
}

// lockPR serialises this process's edits of one pull request's comments,
// so two runs of one head (a webhook's and a /verify's) never both create
// its comment.
func (d *Deps) lockPR(key string) (unlock func()) {
	mu, _ := d.commentLocks.LoadOrStore(key, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	return mu.(*sync.Mutex).Unlock
}

func (a verifyArgs) forge() forge.Kind { return forge.Kind(a.Forge) }

// inflight tracks the runs of this process per pull request, so that a run
// of the current head cancels the runs of older heads.
type inflight struct {
	mu   sync.Mutex
	runs map[string]map[int64]inflightRun
}

type inflightRun struct {
	head   string
	cancel context.CancelCauseFunc
}

// supersede cancels, with errSuperseded, every run of pull request pr on a
// head other than current, or every run when the pull request is closed.
// current must come from the forge, never from a delivery: an old delivery
// arriving late must not stop the current head's run.
func (f *inflight) supersede(pr, current string, open bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, r := range f.runs[pr] {
		if r.head != current || !open {
			r.cancel(errSuperseded)
			delete(f.runs[pr], id)
		}
	}
}

// start registers run id of head on pull request pr and cancels, with
// errSuperseded, every other run of pr on another head. done unregisters.
func (f *inflight) start(ctx context.Context, id int64, pr, head string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	f.supersede(pr, head, true)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.runs == nil {
		f.runs = map[string]map[int64]inflightRun{}
	}
	if f.runs[pr] == nil {
		f.runs[pr] = map[int64]inflightRun{}
	}
	f.runs[pr][id] = inflightRun{head: head, cancel: cancel}
	return ctx, func() {
		f.mu.Lock()
		delete(f.runs[pr], id)
		if len(f.runs[pr]) == 0 {
			delete(f.runs, pr)
		}
		f.mu.Unlock()
		cancel(nil)
	}
}
