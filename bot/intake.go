package bot

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"vouch.dev/vouch/forge"
)

// Intake is the webhook endpoint: POST /webhook/gitea and POST
// /webhook/github. The endpoint alone chooses the parser (Gitea also sends
// GitHub's headers). A delivery is verified, turned into a job, recorded and
// queued durably, and answered 202; nothing slow happens before the answer.
type Intake struct {
	// Parsers verify and parse each configured forge's deliveries; a forge
	// without one answers 404.
	Parsers map[forge.Kind]forge.WebhookParser
	// Queue receives the jobs.
	Queue Queue
	// Served reports whether a repository is served; nil serves none.
	Served func(forge.Kind, forge.Repo) bool
	// Logger receives one line per delivery.
	Logger *slog.Logger
	// Metrics counts deliveries by forge, event and result; nil counts none.
	Metrics *Metrics
	// BodyReadTimeout bounds the time a body may take to arrive; zero means
	// DefaultBodyReadTimeout.
	BodyReadTimeout time.Duration
	// MaxPerPeer bounds the bodies one peer (an IPv4 address, an IPv6 /64)
	// sends at once, so a few hosts trickling bodies cannot hold every
	// slot; zero means no bound (behind a proxy every peer is the proxy).
	MaxPerPeer int

	peersMu sync.Mutex
	peers   map[string]int

	// inflight bounds the bodies held at once (forge.MaxWebhookBody each),
	// so unauthenticated senders cannot make vouch buffer without bound.
	inflightOnce  sync.Once
	inflight      chan struct{}
	inflightSmall chan struct{}
}

// MaxInflightBodies is how many deliveries Intake reads and parses at once;
// more get 503 and the forge retries them. A delivery gives its slot back
// once parsed: waiting for the queue holds a small Job, not the body, so
// slow storage does not turn bursts into 503s. Each slot may hold
// forge.MaxWebhookBody, so this bounds the intake's memory (8 × 25 MiB);
// reading and parsing take well under a millisecond, so 8 suffice for
// 64 clients at once without a 503 (BenchmarkIntakeLoad, busy/delivery).
const MaxInflightBodies = 8

// MaxInflightSmallBodies is how many deliveries that declare at most
// smallBody bytes Intake reads at once, beside the others.
const MaxInflightSmallBodies = 64

// smallBody is the declared size under which a delivery takes a small slot;
// forges' pull request and comment payloads are tens of kilobytes.
const smallBody = 1 << 20

// DefaultBodyReadTimeout bounds the time a delivery's body may take to
// arrive, unless Intake.BodyReadTimeout says otherwise.
const DefaultBodyReadTimeout = 15 * time.Second

// WebhookPath is the endpoint of a forge's deliveries.
func WebhookPath(k forge.Kind) string { return "/webhook/" + string(k) }

// errNoWork marks verified deliveries that need no job (not an error the
// sender made, so they answer 200 like forge.ErrIgnored).
var errNoWork = fmt.Errorf("%w: nothing to do", forge.ErrIgnored)

func (in *Intake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	kind, ok := strings.CutPrefix(r.URL.Path, "/webhook/")
	parser := in.Parsers[forge.Kind(kind)]
	if !ok || parser == nil {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		reply(w, http.StatusMethodNotAllowed, "POST only")
		return
	}
	log := in.logger().With("forge", kind)
	in.inflightOnce.Do(func() {
		in.inflight = make(chan struct{}, MaxInflightBodies)
		in.inflightSmall = make(chan struct{}, MaxInflightSmallBodies)
	})
	// Deliveries that declare a small body have slots of their own, so a
	// few slow senders of large or unsized bodies cannot starve the forges'
	// ordinary deliveries; and no body may take longer than BodyReadTimeout
	// to arrive.
	if !in.enterPeer(r.RemoteAddr) {
		reply(w, http.StatusServiceUnavailable, "too many deliveries from your address at once, retry later")
		return
	}
	left := false
	leave := func() {
		if !left {
			left = true
			in.leavePeer(r.RemoteAddr)
		}
	}
	defer leave()
	slots := in.inflight
	if r.ContentLength >= 0 && r.ContentLength <= smallBody {
		slots = in.inflightSmall
	}
	select {
	case slots <- struct{}{}:
	default:
		reply(w, http.StatusServiceUnavailable, "busy, retry later")
		return
	}
	// The slot bounds the bodies held, not the deliveries waiting for the
	// store: it is given back once the body is parsed, before Enqueue.
	held := true
	release := func() {
		if held {
			held = false
			<-slots
		}
		leave()
	}
	defer release()
	readTimeout := in.BodyReadTimeout
	if readTimeout <= 0 {
		readTimeout = DefaultBodyReadTimeout
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(readTimeout)) // not every ResponseWriter can; the server's ReadTimeout still bounds those
	if r.ContentLength > forge.MaxWebhookBody {
		in.answer(w, log, fmt.Errorf("%w: Content-Length %d", forge.ErrTooLarge, r.ContentLength), nil)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, forge.MaxWebhookBody+1))
	if err != nil {
		log.Warn("webhook body unreadable", "err", err)
		reply(w, http.StatusBadRequest, "unreadable body")
		return
	}
	if len(body) > forge.MaxWebhookBody {
		in.answer(w, log, fmt.Errorf("%w: more than %d bytes", forge.ErrTooLarge, forge.MaxWebhookBody), nil)
		return
	}
	ev, err := parser.Parse(r.Header, body)
	if err != nil {
		in.Metrics.delivery(kind, "unparsed", resultOf(err))
		in.answer(w, log, err, nil)
		return
	}
	if ev.Delivery == "" {
		// Forges always send one; without it, the body itself identifies a
		// replay.
		sum := sha256.Sum256(body)
		ev.Delivery = "sha256:" + hex.EncodeToString(sum[:])
	}
	log = log.With("delivery", ev.Delivery, "repo", ev.Repo.FullName(), "pr", ev.Number)
	job, err := in.jobFor(forge.Kind(kind), ev)
	if err != nil {
		in.Metrics.delivery(kind, string(ev.Type), resultOf(err))
		in.answer(w, log, err, ev)
		return
	}
	release()
	fresh, err := in.Queue.Enqueue(r.Context(), job)
	if err != nil {
		in.Metrics.delivery(kind, string(ev.Type), "error")
		log.Error("enqueue failed", "err", err)
		reply(w, http.StatusServiceUnavailable, "could not queue the delivery; retry")
		return
	}
	if !fresh {
		in.Metrics.delivery(kind, string(ev.Type), "duplicate")
		log.Info("delivery already queued", "job", job.Kind, "head", job.HeadSHA)
		reply(w, http.StatusOK, "already queued")
		return
	}
	in.Metrics.delivery(kind, string(ev.Type), "queued")
	log.Info("delivery queued", "job", job.Kind, "head", job.HeadSHA)
	reply(w, http.StatusAccepted, "queued")
}

// jobFor turns a verified event into the job it asks for, or an error
// wrapping forge.ErrIgnored when it asks for nothing.
func (in *Intake) jobFor(kind forge.Kind, ev *forge.Event) (Job, error) {
	if ev.Forge != kind {
		return Job{}, fmt.Errorf("%w: %s parser returned a %s event", forge.ErrMalformed, kind, ev.Forge)
	}
	if in.Served == nil || !in.Served(kind, ev.Repo) {
		return Job{}, fmt.Errorf("%w: repository %s is not served", forge.ErrIgnored, ev.Repo.FullName())
	}
	repo := forge.Repo{Owner: ev.Repo.Owner, Name: ev.Repo.Name}
	switch ev.Type {
	case forge.EventPullRequest:
		switch ev.Action {
		case forge.ActionOpened, forge.ActionReopened, forge.ActionSynchronized:
			return Job{Kind: JobVerify, Forge: kind, Repo: repo, PR: ev.Number, HeadSHA: ev.HeadSHA, BaseSHA: ev.BaseSHA, Delivery: ev.Delivery}, nil
		}
		return Job{}, fmt.Errorf("%w: pull request %s", errNoWork, ev.Action)
	case forge.EventComment:
		if ev.Comment == nil {
			return Job{}, fmt.Errorf("%w: comment event without a comment", forge.ErrMalformed)
		}
		cmds := ParseCommands(ev.Comment.Body)
		if len(cmds) == 0 {
			return Job{}, fmt.Errorf("%w: comment without commands", errNoWork)
		}
		return Job{Kind: JobCommand, Forge: kind, Repo: repo, PR: ev.Number, HeadSHA: ev.HeadSHA, Delivery: ev.Delivery,
			CommentID: ev.Comment.ID, CommentAt: ev.Comment.CreatedAt, Author: ev.Comment.Author, Commands: cmds}, nil
	}
	return Job{}, fmt.Errorf("%w: event %s", errNoWork, ev.Type)
}

// answer replies to a delivery that queues nothing.
func (in *Intake) answer(w http.ResponseWriter, log *slog.Logger, err error, ev *forge.Event) {
	code := forge.StatusOf(err)
	switch {
	case code == http.StatusOK:
		log.Info("delivery ignored", "reason", err)
		reply(w, code, "ignored")
	case code < 500:
		log.Warn("delivery rejected", "status", code, "err", err)
		reply(w, code, publicReason(err))
	default:
		log.Error("delivery failed", "err", err)
		reply(w, http.StatusInternalServerError, "internal error")
	}
}

// peerOf is the key a remote address is bounded under: the IPv4 address,
// or the /64 of an IPv6 one (a host has a whole /64 to choose from).
func peerOf(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	ip := net.ParseIP(host)
	switch {
	case ip == nil:
		return host
	case ip.To4() != nil:
		return ip.To4().String()
	}
	return ip.Mask(net.CIDRMask(64, 128)).String()
}

// enterPeer counts a body from remoteAddr in, unless its peer has
// MaxPerPeer in flight already.
func (in *Intake) enterPeer(remoteAddr string) bool {
	if in.MaxPerPeer <= 0 {
		return true
	}
	key := peerOf(remoteAddr)
	in.peersMu.Lock()
	defer in.peersMu.Unlock()
	if in.peers == nil {
		in.peers = map[string]int{}
	}
	if in.peers[key] >= in.MaxPerPeer {
		return false
	}
	in.peers[key]++
	return true
}

func (in *Intake) leavePeer(remoteAddr string) {
	if in.MaxPerPeer <= 0 {
		return
	}
	key := peerOf(remoteAddr)
	in.peersMu.Lock()
	defer in.peersMu.Unlock()
	if in.peers[key]--; in.peers[key] <= 0 {
		delete(in.peers, key)
	}
}

// resultOf is the metrics result of a delivery that queued nothing.
func resultOf(err error) string {
	switch code := forge.StatusOf(err); {
	case code == http.StatusOK:
		return "ignored"
	case code < 500:
		return "rejected"
	}
	return "error"
}

// publicReason is the short text a rejected sender sees: the sentinel's
// words, never the details (which may quote the payload).
func publicReason(err error) string {
	for _, s := range []error{forge.ErrNoSignature, forge.ErrBadSignature, forge.ErrTooLarge, forge.ErrMalformed, forge.ErrUnknownEvent} {
		if errors.Is(err, s) {
			return strings.TrimPrefix(s.Error(), "webhook: ")
		}
	}
	return http.StatusText(forge.StatusOf(err))
}

func reply(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	io.WriteString(w, msg+"\n")
}

func (in *Intake) logger() *slog.Logger {
	if in.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return in.Logger
}

// ServedSet returns a Served function for the configured repositories;
// owner and name compare without regard to case, as forges do.
func ServedSet(repos []RepoRef) func(forge.Kind, forge.Repo) bool {
	set := make(map[string]bool, len(repos))
	key := func(k forge.Kind, owner, name string) string {
		return strings.ToLower(string(k) + ":" + owner + "/" + name)
	}
	for _, r := range repos {
		set[key(r.Forge, r.Owner, r.Name)] = true
	}
	return func(k forge.Kind, r forge.Repo) bool { return set[key(k, r.Owner, r.Name)] }
}
