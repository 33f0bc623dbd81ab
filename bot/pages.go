package bot

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"vouch.dev/vouch/evidence"
)

// pages serves the evidence pages, the signed receipts and the public key.
type pages struct {
	store  *Store
	key    crypto.PublicKey
	logger *slog.Logger
	busy   chan struct{} // bounds the pages rendered at once
}

// maxPagesAtOnce bounds concurrent evidence page requests; more get 503.
const maxPagesAtOnce = 4

func (p *pages) routes(mux *http.ServeMux) {
	p.busy = make(chan struct{}, maxPagesAtOnce)
	mux.HandleFunc("GET /runs", p.bounded(p.list))
	mux.HandleFunc("GET /runs/{id}", p.bounded(p.run))
	mux.HandleFunc("GET /runs/{id}/receipt.json", p.bounded(p.receipt))
	mux.HandleFunc("GET /key", p.publicKey)
}

// bounded serves h unless maxPagesAtOnce requests are being served.
func (p *pages) bounded(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		select {
		case p.busy <- struct{}{}:
			defer func() { <-p.busy }()
			h(w, r)
		default:
			reply(w, http.StatusServiceUnavailable, "busy, retry later")
		}
	}
}

// list is GET /runs?repo=owner/name&pr=N&outcome=PASS: recent runs, newest
// first.
func (p *pages) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := evidence.PageFilter{Repo: strings.ToLower(q.Get("repo")), Outcome: evidence.Outcome(q.Get("outcome"))}
	if s := q.Get("pr"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			reply(w, http.StatusBadRequest, "pr: want a pull request number")
			return
		}
		f.PR = n
	}
	runs, err := p.store.Runs(r.Context(), RunFilter{Repo: f.Repo, PR: f.PR, Outcome: f.Outcome, Finished: true}, evidence.MaxPageRuns)
	if err != nil {
		p.fail(w, err)
		return
	}
	views := make([]evidence.PageRun, 0, len(runs))
	for _, run := range runs {
		views = append(views, pageRun(run))
	}
	var b bytes.Buffer
	if err := evidence.RenderRuns(&b, views, f); err != nil {
		p.fail(w, err)
		return
	}
	html(w, b.Bytes())
}

// run is GET /runs/{id}: the run's evidence page.
func (p *pages) run(w http.ResponseWriter, r *http.Request) {
	run, ok := p.lookup(w, r)
	if !ok {
		return
	}
	if run.Receipt == nil {
		reply(w, http.StatusOK, fmt.Sprintf("run %d of %s#%d, head %s: running; no verdict yet", run.ID, run.Repo, run.PR, run.Head))
		return
	}
	var b bytes.Buffer
	if err := evidence.RenderRun(&b, pageRun(run)); err != nil {
		p.fail(w, err)
		return
	}
	html(w, b.Bytes())
}

// receipt is GET /runs/{id}/receipt.json: the signed receipt (a DSSE
// envelope) when the run was signed, else the bare receipt.
func (p *pages) receipt(w http.ResponseWriter, r *http.Request) {
	run, ok := p.lookup(w, r)
	if !ok {
		return
	}
	body := run.Envelope
	if len(body) == 0 {
		if run.Receipt == nil {
			reply(w, http.StatusNotFound, "no receipt yet: the run has no verdict")
			return
		}
		js, err := run.Receipt.JSON()
		if err != nil {
			p.fail(w, err)
			return
		}
		body = js
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="vouch-run-%d.json"`, run.ID))
	w.Write(body)
}

// publicKey is GET /key: the receipt verification key, PEM.
func (p *pages) publicKey(w http.ResponseWriter, _ *http.Request) {
	pub, ok := p.key.(ed25519.PublicKey)
	if !ok {
		reply(w, http.StatusNotFound, "no signing key")
		return
	}
	w.Header().Set("Content-Type", "application/x-pem-file")
	w.Write(evidence.PublicKeyPEM(pub))
}

func (p *pages) lookup(w http.ResponseWriter, r *http.Request) (Run, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		reply(w, http.StatusNotFound, "no such run")
		return Run{}, false
	}
	run, err := p.store.Run(r.Context(), id)
	if errors.Is(err, ErrNoRun) {
		reply(w, http.StatusNotFound, "no such run")
		return Run{}, false
	}
	if err != nil {
		p.fail(w, err)
		return Run{}, false
	}
	return run, true
}

func (p *pages) fail(w http.ResponseWriter, err error) {
	p.logger.Error("evidence page", "err", err)
	reply(w, http.StatusInternalServerError, "internal error")
}

// pageRun is what the evidence pages show of a run.
func pageRun(run Run) evidence.PageRun {
	pr := evidence.PageRun{ID: strconv.FormatInt(run.ID, 10), Repo: run.Repo, PR: run.PR, Title: run.Title,
		Log: run.Log, Envelope: run.Envelope, CreatedAt: run.CreatedAt}
	if run.Receipt != nil {
		pr.Receipt = *run.Receipt
	}
	return pr
}

// html writes a rendered page with headers that keep it inert.
func html(w http.ResponseWriter, b []byte) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:")
	w.Write(b)
}
