package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
)

// OpenPostgres connects to the PostgreSQL database dsn names, brings
// River's schema and vouch's tables up to date, and returns a store that
// several `vouch serve` replicas may share.
//
// Every query goes through database/sql over pgx (one code path with the
// SQLite store); River's riverdatabasesql driver gets a pgx pool as well,
// which it uses (as River's riverpgxv5 driver does) for LISTEN/NOTIFY, so
// replicas learn of new jobs without waiting for a poll.
func OpenPostgres(ctx context.Context, dsn string, logger *slog.Logger) (*Store, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		// pgx's parse errors may repeat the DSN and its password.
		return nil, errors.New("open store: the PostgreSQL DSN does not parse")
	}
	listen, err := pgxpool.New(ctx, dsn)
	if err != nil {
		pool.Close()
		return nil, errors.New("open store: the PostgreSQL DSN does not parse")
	}
	db := stdlib.OpenDBFromPool(pool)
	s, err := newStore(ctx, db, postgresDialect, riverdatabasesql.NewWithPgxListener(db, listen), logger)
	if err != nil {
		db.Close()
		pool.Close()
		listen.Close()
		return nil, fmt.Errorf("open store (postgres): %w", err)
	}
	s.closers = append(s.closers, func() error { listen.Close(); return nil }, func() error { pool.Close(); return nil }, db.Close)
	return s, nil
}
