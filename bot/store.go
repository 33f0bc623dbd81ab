package bot

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, pure Go

	"vouch.dev/vouch/forge"
)

// verifyArgs are a JobVerify's River arguments. The fields tagged unique
// make River refuse a second job for the same head in any state (queued,
// running, retrying, completed), so each head is verified once.
type verifyArgs struct {
	Forge   string `json:"forge" river:"unique"`
	Repo    string `json:"repo" river:"unique"`
	PR      int    `json:"pr" river:"unique"`
	HeadSHA string `json:"head_sha" river:"unique"`
	BaseSHA string `json:"base_sha,omitempty" river:"unique"`
	// Trigger is empty for the verification a pull request event asks for,
	// and names the comment for one a command asks for ("comment:ID",
	// "approve:ID"), which may verify a head again.
	Trigger  string `json:"trigger,omitempty" river:"unique"`
	Delivery string `json:"delivery"`
}

func (verifyArgs) Kind() string { return string(JobVerify) }

func (verifyArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// commandArgs are a JobCommand's River arguments, unique per comment: the
// delivery id is not signed, and a forge's "redeliver" mints a new one.
type commandArgs struct {
	Forge     string `json:"forge" river:"unique"`
	Repo      string `json:"repo" river:"unique"`
	PR        int    `json:"pr"`
	HeadSHA   string `json:"head_sha,omitempty"`
	Delivery  string `json:"delivery"`
	CommentID int64  `json:"comment_id" river:"unique"`
	// CommentAt is when the forge says the comment was written.
	CommentAt time.Time `json:"comment_at,omitzero"`
	Author    string    `json:"author"`
	Commands  []Command `json:"commands"`
}

func (commandArgs) Kind() string { return string(JobCommand) }

func (commandArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: commandQueue, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// Store is vouch's durable state: River's job tables beside vouch's own
// (deliveries seen, runs and their receipts, approvals), in one SQLite file
// (OpenSQLite, modernc.org/sqlite, no cgo) or one PostgreSQL database shared
// by replicas (OpenPostgres). Every method is safe for concurrent use.
type Store struct {
	db      *sql.DB
	read    *sql.DB // for queries that write nothing; db itself on PostgreSQL
	dialect dialect
	river   *river.Client[*sql.Tx]
	driver  riverdriver.Driver[*sql.Tx]
	logger  *slog.Logger
	closers []func() error

	// batch queues Enqueue calls for the writer goroutine (batch.go).
	batch     *batcher
	closeOnce sync.Once
	closeErr  error
}

var _ Queue = (*Store)(nil)

// OpenSQLite opens (creating if needed) the database file at path, brings
// River's schema and vouch's tables up to date, and returns a store that
// can enqueue. The parent directory is created mode 0700. One process at a
// time may use the file: a second one is refused.
func OpenSQLite(ctx context.Context, path string, logger *slog.Logger) (*Store, error) {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("open store: %q: want a file path", path)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	unlock, err := lockFile(path + ".lock")
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	// WAL for concurrent readers, a busy timeout rather than SQLITE_BUSY,
	// FULL sync so an acknowledged delivery survives power loss, and
	// BEGIN IMMEDIATE so a write transaction never fails on upgrade.
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "busy_timeout(10000)", "synchronous(FULL)", "foreign_keys(ON)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		unlock()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	// riversqlite's advice: SQLite allows one writer; one connection avoids
	// SQLITE_BUSY between River's own goroutines.
	db.SetMaxOpenConns(1)
	s, err := newStore(ctx, db, sqliteDialect, riversqlite.New(db), logger)
	if err != nil {
		db.Close()
		unlock()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s.closers = append(s.closers, db.Close, func() error { unlock(); return nil })
	// Reads (evidence pages, metrics, approvals) get connections of their
	// own, so a burst of page views never queues behind, or holds up, the
	// one writer that intake and the workers share. WAL lets them read
	// while it writes.
	q.Del("_txlock")
	q.Add("_pragma", "query_only(1)")
	read, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("open store %s for reading: %w", path, err)
	}
	read.SetMaxOpenConns(4)
	s.read = read
	s.closers = append(s.closers, read.Close)
	return s, nil
}

func newStore(ctx context.Context, db *sql.DB, d dialect, driver riverdriver.Driver[*sql.Tx], logger *slog.Logger) (*Store, error) {
	if err := db.PingContext(ctx); err != nil {
		return nil, err
	}
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("river migrator: %w", err)
	}
	res, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	if err != nil {
		return nil, fmt.Errorf("river migrate: %w", err)
	}
	for _, v := range res.Versions {
		logger.Info("river schema migrated", "version", v.Version, "name", v.Name)
	}
	for _, stmt := range d.schema {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return nil, fmt.Errorf("create tables: %w", err)
		}
	}
	// An insert-only client; the workers get their own (Store.Work).
	client, err := river.NewClient(driver, &river.Config{Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	s := &Store{db: db, read: db, dialect: d, river: client, driver: driver, logger: logger, batch: newBatcher()}
	go s.writeLoop()
	return s, nil
}

// Enqueue records the delivery and inserts the job in one transaction,
// which it shares with the Enqueue calls waiting at the same time (group
// commit, batch.go).
func (s *Store) Enqueue(ctx context.Context, job Job) (bool, error) {
	if err := job.validate(); err != nil {
		return false, err
	}
	return s.enqueue(ctx, job, argsOf(job))
}

// EnqueueVerify queues a verification that no delivery carries (a
// command's, or one the start-up scan found missing). It returns false when
// an equal job exists already.
func (s *Store) EnqueueVerify(ctx context.Context, a verifyArgs) (bool, error) {
	if !isSHA1Hex(a.HeadSHA) && !isObjectID(a.HeadSHA) {
		return false, fmt.Errorf("enqueue verify: head %q is not a full commit id", a.HeadSHA)
	}
	res, err := s.river.Insert(ctx, a, nil)
	if err != nil {
		return false, fmt.Errorf("enqueue verify of %s: %w", a.HeadSHA, err)
	}
	return !res.UniqueSkippedAsDuplicate, nil
}

// Ping reports whether the store answers.
func (s *Store) Ping(ctx context.Context) error {
	var one int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM vouch_delivery WHERE 1 = 0`).Scan(&one); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	return nil
}

// Jobs lists the jobs in the store that have not finished (available,
// scheduled, running or retryable), oldest first.
func (s *Store) Jobs(ctx context.Context) ([]Job, error) {
	params := river.NewJobListParams().
		States(rivertype.JobStateAvailable, rivertype.JobStateScheduled, rivertype.JobStateRunning,
			rivertype.JobStateRetryable, rivertype.JobStatePending).
		OrderBy(river.JobListOrderByID, river.SortOrderAsc).First(10000)
	res, err := s.river.JobList(ctx, params)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	jobs := make([]Job, 0, len(res.Jobs))
	for _, row := range res.Jobs {
		j, err := jobOf(row)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// jobOf decodes a River row into a Job.
func jobOf(row *rivertype.JobRow) (Job, error) {
	switch JobKind(row.Kind) {
	case JobVerify:
		var a verifyArgs
		if err := json.Unmarshal(row.EncodedArgs, &a); err != nil {
			return Job{}, fmt.Errorf("job %d: %w", row.ID, err)
		}
		return Job{Kind: JobVerify, Forge: forge.Kind(a.Forge), Repo: splitRepo(a.Repo), PR: a.PR, HeadSHA: a.HeadSHA, Delivery: a.Delivery}, nil
	case JobCommand:
		var a commandArgs
		if err := json.Unmarshal(row.EncodedArgs, &a); err != nil {
			return Job{}, fmt.Errorf("job %d: %w", row.ID, err)
		}
		return Job{Kind: JobCommand, Forge: forge.Kind(a.Forge), Repo: splitRepo(a.Repo), PR: a.PR, HeadSHA: a.HeadSHA,
			Delivery: a.Delivery, CommentID: a.CommentID, CommentAt: a.CommentAt, Author: a.Author, Commands: a.Commands}, nil
	}
	return Job{}, fmt.Errorf("job %d: unknown kind %q", row.ID, row.Kind)
}

// Close answers the Enqueue calls already waiting, stops the writer,
// closes the database and releases the store's lock. An Enqueue after Close
// fails. Close may be called more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.batch.close()
		var errs []error
		for i := len(s.closers) - 1; i >= 0; i-- {
			errs = append(errs, s.closers[i]())
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// repoKey is a repository's name as jobs are keyed: forges treat owner and
// name case-insensitively, so "O/r" and "o/r" are one repository.
func repoKey(r forge.Repo) string { return strings.ToLower(r.FullName()) }
