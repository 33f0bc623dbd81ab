package bot

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"vouch.dev/vouch/evidence"
	"vouch.dev/vouch/forge"
	"vouch.dev/vouch/forge/fetch"
	"vouch.dev/vouch/forge/gitea"
	"vouch.dev/vouch/forge/github"
	"vouch.dev/vouch/sandbox"
)

// Service is `vouch serve`: the webhook intake over the durable store, the
// workers that verify and post, the start-up recovery, and the health,
// metrics and evidence endpoints.
type Service struct {
	cfg      Config
	store    *Store
	deps     *Deps
	workers  *river.Client[*sql.Tx]
	handler  http.Handler
	logger   *slog.Logger
	metrics  *Metrics
	isolated atomic.Pointer[string] // nil until the start-up proof; "" when proven
}

// ShutdownGrace bounds how long in-flight requests, and then running
// verifications, may take after a stop.
const ShutdownGrace = 30 * time.Second

// commandQueue runs command jobs apart from verifications, so a reply never
// waits behind a long run.
const commandQueue = "commands"

// NewService opens the store and builds the forge clients, the sandbox,
// the workers and the HTTP handlers of a validated configuration. Nothing
// runs until Serve.
func NewService(ctx context.Context, cfg Config, logger *slog.Logger) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	parsers, clients, err := forgesOf(cfg)
	if err != nil {
		return nil, err
	}
	runner, err := sandbox.New(cfg.SandboxConfig(), logger)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	key, err := evidence.LoadOrCreateKey(cfg.SigningKey)
	if err != nil {
		return nil, fmt.Errorf("signing_key: %w", err)
	}
	var store *Store
	switch cfg.Store.Driver {
	case StorePostgres:
		store, err = OpenPostgres(ctx, string(cfg.Store.DSN), logger)
	default:
		store, err = OpenSQLite(ctx, cfg.Store.Path, logger)
	}
	if err != nil {
		return nil, err
	}
	s := &Service{cfg: cfg, store: store, logger: logger}
	s.metrics = NewMetrics(store.QueueDepth)
	s.deps = &Deps{
		Store: store, Forges: clients, Fetch: &fetch.Cache{Dir: cfg.FetchCache}, Runner: runner,
		Policy: cfg.Policy(), Trust: cfg.TrustPolicy(), Notify: cfg.Trust.Notify, Key: key,
		PublicURL: cfg.PublicURL, Logger: logger, Metrics: s.metrics,
	}
	if s.workers, err = newWorkers(store, s.deps, cfg); err != nil {
		store.Close()
		return nil, err
	}
	intake := &Intake{Parsers: parsers, Queue: store, Served: ServedSet(cfg.Repositories), Logger: logger, Metrics: s.metrics,
		MaxPerPeer: cfg.MaxDeliveriesPerPeer}
	mux := http.NewServeMux()
	mux.Handle("/webhook/{forge}", intake) // POST only; it answers 405 to the rest
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusOK, "ok") })
	mux.HandleFunc("GET /readyz", s.ready)
	mux.Handle("GET /metrics", s.metrics.Handler())
	pages := &pages{store: store, key: key.Public(), logger: logger}
	pages.routes(mux)
	s.handler = mux
	return s, nil
}

// forgesOf builds the webhook parser and the API client of each configured forge.
func forgesOf(cfg Config) (map[forge.Kind]forge.WebhookParser, map[forge.Kind]forge.Client, error) {
	parsers := map[forge.Kind]forge.WebhookParser{}
	clients := map[forge.Kind]forge.Client{}
	if g := cfg.Forges.Gitea; g != nil {
		p, err := gitea.NewWebhook([]byte(g.WebhookSecret))
		if err != nil {
			return nil, nil, fmt.Errorf("forges.gitea: %w", err)
		}
		p.BotLogin = g.BotLogin
		parsers[forge.Gitea] = p
		c, err := gitea.NewClient(g.BaseURL, string(g.Token))
		if err != nil {
			return nil, nil, fmt.Errorf("forges.gitea: %w", err)
		}
		clients[forge.Gitea] = c
	}
	if g := cfg.Forges.GitHub; g != nil {
		p, err := github.NewWebhook([]byte(g.WebhookSecret))
		if err != nil {
			return nil, nil, fmt.Errorf("forges.github: %w", err)
		}
		p.BotLogin = g.BotLogin
		parsers[forge.GitHub] = p
		api := g.APIURL
		if api == "" {
			api = DefaultGitHubAPI
		}
		var c *github.Client
		if g.AppID != 0 {
			c, err = github.NewAppClient(api, g.AppID, g.InstallationID, []byte(g.PrivateKey), github.WithBotLogin(g.BotLogin))
		} else {
			c, err = github.NewTokenClient(api, string(g.Token), github.WithBotLogin(g.BotLogin))
		}
		if err != nil {
			return nil, nil, fmt.Errorf("forges.github: %w", err)
		}
		clients[forge.GitHub] = c
	}
	return parsers, clients, nil
}

// newWorkers is the River client that works the queue: cfg.Workers
// verifications at once, commands beside them.
func newWorkers(store *Store, deps *Deps, cfg Config) (*river.Client[*sql.Tx], error) {
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &verifyWorker{d: deps, inflight: &inflight{}}); err != nil {
		return nil, err
	}
	if err := river.AddWorkerSafely(workers, &commandWorker{d: deps}); err != nil {
		return nil, err
	}
	timeout := time.Duration(cfg.JobTimeout)
	client, err := river.NewClient(store.driver, &river.Config{
		Logger:  deps.Logger,
		Workers: workers,
		Queues: map[string]river.QueueConfig{
			river.QueueDefault: {MaxWorkers: cfg.Workers},
			commandQueue:       {MaxWorkers: 2},
		},
		JobTimeout: timeout,
		// A job still "running" this long after its timeout belongs to a
		// replica that died; another takes it over.
		RescueStuckJobsAfter: timeout + 5*time.Minute,
		MaxAttempts:          maxAttempts,
		// Jobs are unique per head while River keeps them: keep finished
		// ones long, so a head is not verified again by a late redelivery.
		CompletedJobRetentionPeriod: 90 * 24 * time.Hour,
		CancelledJobRetentionPeriod: 90 * 24 * time.Hour,
		DiscardedJobRetentionPeriod: 90 * 24 * time.Hour,
		RetryPolicy:                 retryPolicy{},
		FetchPollInterval:           pollInterval,
		FetchCooldown:               pollInterval / 4,
	})
	if err != nil {
		return nil, fmt.Errorf("river workers: %w", err)
	}
	return client, nil
}

// Handler serves the service's endpoints.
func (s *Service) Handler() http.Handler { return s.handler }

// ready answers 200 when the store answers and the sandbox was proven at
// start (vouch doctor's check).
func (s *Service) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		s.logger.Warn("not ready", "err", err)
		reply(w, http.StatusServiceUnavailable, "store unreachable")
		return
	}
	switch p := s.isolated.Load(); {
	case p == nil:
		reply(w, http.StatusServiceUnavailable, "sandbox proof pending")
	case *p != "":
		// The diagnosis is in the log; the public answer names no host detail.
		reply(w, http.StatusServiceUnavailable, "sandbox not proven at start; see the service log or run vouch doctor")
	default:
		reply(w, http.StatusOK, "ready")
	}
}

// proveSandbox runs the doctor's probe once and records the result for
// /readyz. A failed proof does not stop the service: each run then fails
// closed with BLOCKED, and /readyz says why.
func (s *Service) proveSandbox(ctx context.Context) {
	why := ""
	res, err := s.deps.Runner.Probe(ctx)
	switch {
	case err != nil:
		why = err.Error()
	case res.Mode == sandbox.ModeTrustedDevelopment:
		why = "trusted-development mode: steps are NOT ISOLATED"
	case res.Unproven != nil:
		why = res.Unproven.Cause + ": " + sandbox.Diagnose(res.Unproven)
	case !res.Isolated:
		why = "isolation was not observed"
	}
	if why != "" {
		s.logger.Error("sandbox not proven at start", "why", why)
	} else {
		s.logger.Info("sandbox proven at start", "provider", res.Provider, "version", res.Version)
	}
	s.isolated.Store(&why)
}

// Serve runs the service on ln until ctx is done: it proves the sandbox,
// takes back the jobs a dead process left running (SQLite), starts the
// workers, queues the open pull requests' heads that have no verdict, and
// answers HTTP. On stop it closes intake first, lets running verifications
// finish for up to ShutdownGrace, then cancels them (they run again on the
// next start).
func (s *Service) Serve(ctx context.Context, ln net.Listener) error {
	base := context.WithoutCancel(ctx)
	s.proveSandbox(ctx)
	if err := s.store.takeBackOrphans(ctx); err != nil {
		return err
	}
	if err := s.workers.Start(base); err != nil {
		return fmt.Errorf("start workers: %w", err)
	}
	scanCtx, stopScan := context.WithCancel(ctx)
	defer stopScan()
	go s.recover(scanCtx)

	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second, // a 25 MiB body on a slow link
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	s.logger.Info("serving", "addr", ln.Addr().String())
	var err error
	select {
	case err = <-errc:
		err = fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
		s.logger.Info("shutting down", "grace", ShutdownGrace)
		shutdownCtx, cancel := context.WithTimeout(base, ShutdownGrace)
		err = srv.Shutdown(shutdownCtx)
		cancel()
		if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, serr)
		}
	}
	stopScan()
	return errors.Join(err, s.stopWorkers(base))
}

// stopWorkers lets running jobs finish for ShutdownGrace, then cancels them.
func (s *Service) stopWorkers(ctx context.Context) error {
	graceCtx, cancel := context.WithTimeout(ctx, ShutdownGrace)
	defer cancel()
	if err := s.workers.Stop(graceCtx); err == nil {
		return nil
	}
	s.logger.Warn("grace period over; cancelling running verifications (they run again on the next start)")
	hardCtx, cancel2 := context.WithTimeout(ctx, 10*time.Second)
	defer cancel2()
	return s.workers.StopAndCancel(hardCtx)
}

// Close closes the store.
func (s *Service) Close() error { return s.store.Close() }

// The queue's retry behaviour: back off 1s, 2s, 4s... up to a minute, for
// about a day and a half, so a forge outage delays a result but does not
// lose it.
const (
	maxAttempts  = 2000
	maxBackoff   = time.Minute
	pollInterval = 200 * time.Millisecond
)

// retryPolicy is capped exponential back-off.
type retryPolicy struct{}

func (retryPolicy) NextRetry(job *rivertype.JobRow) time.Time {
	d := maxBackoff
	if n := job.Attempt; n < 7 {
		d = time.Second << max(n-1, 0)
	}
	return time.Now().Add(d)
}
