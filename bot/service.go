package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"vouch.dev/vouch/forge"
	"vouch.dev/vouch/forge/gitea"
	"vouch.dev/vouch/forge/github"
)

// Service is `vouch serve` in this slice: the webhook intake over the
// durable store, with health and readiness endpoints. (The workers that
// run the queued jobs come next.)
type Service struct {
	store   *SQLiteStore
	handler http.Handler
	logger  *slog.Logger
}

// ShutdownGrace bounds how long in-flight requests may take after a stop.
const ShutdownGrace = 30 * time.Second

// NewService opens the store and builds the HTTP handlers for a validated
// configuration.
func NewService(ctx context.Context, cfg Config, logger *slog.Logger) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Store.Driver != StoreSQLite {
		return nil, fmt.Errorf("store.driver: %s is not implemented yet; use sqlite", cfg.Store.Driver)
	}
	parsers := map[forge.Kind]forge.WebhookParser{}
	if g := cfg.Forges.Gitea; g != nil {
		p, err := gitea.NewWebhook([]byte(g.WebhookSecret))
		if err != nil {
			return nil, fmt.Errorf("forges.gitea: %w", err)
		}
		p.BotLogin = g.BotLogin
		parsers[forge.Gitea] = p
	}
	if g := cfg.Forges.GitHub; g != nil {
		p, err := github.NewWebhook([]byte(g.WebhookSecret))
		if err != nil {
			return nil, fmt.Errorf("forges.github: %w", err)
		}
		p.BotLogin = g.BotLogin
		parsers[forge.GitHub] = p
	}
	store, err := OpenSQLite(ctx, cfg.Store.Path, logger)
	if err != nil {
		return nil, err
	}
	s := &Service{store: store, logger: logger}
	intake := &Intake{Parsers: parsers, Queue: store, Served: ServedSet(cfg.Repositories), Logger: logger}
	mux := http.NewServeMux()
	mux.Handle("/webhook/{forge}", intake) // POST only; it answers 405 to the rest
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { reply(w, http.StatusOK, "ok") })
	mux.HandleFunc("GET /readyz", s.ready)
	s.handler = mux
	return s, nil
}

// Handler serves the service's endpoints.
func (s *Service) Handler() http.Handler { return s.handler }

// ready answers 200 when the store answers.
func (s *Service) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		s.logger.Warn("not ready", "err", err)
		reply(w, http.StatusServiceUnavailable, "store unreachable")
		return
	}
	reply(w, http.StatusOK, "ready")
}

// Serve answers on ln until ctx is done, then stops accepting, lets
// in-flight requests finish for up to ShutdownGrace, and returns.
func (s *Service) Serve(ctx context.Context, ln net.Listener) error {
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
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	s.logger.Info("shutting down", "grace", ShutdownGrace)
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownGrace)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// Close closes the store.
func (s *Service) Close() error { return s.store.Close() }
