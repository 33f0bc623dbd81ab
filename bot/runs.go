package bot

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"vouch.dev/vouch/evidence"
	"vouch.dev/vouch/forge"
)

// RunState is where a run is.
type RunState string

// The states of a run, in order. A run's receipt is persisted (RunFinal)
// before anything about it is posted; RunPosted means the forge has the
// status and the comment.
const (
	RunRunning RunState = "running"
	RunFinal   RunState = "final"
	RunPosted  RunState = "posted"
)

// Run is one verification of one head, as the store keeps it. Its ID is
// the River job's id.
type Run struct {
	ID      int64
	Forge   forge.Kind
	Repo    string // "owner/name", lowercased like job keys
	PR      int
	Head    string
	Base    string
	Title   string
	State   RunState
	Receipt *evidence.Receipt // nil while running
	// Envelope is the signed receipt; Log the steps' output, bounded.
	Envelope   []byte
	Log        []byte
	CreatedAt  time.Time
	FinishedAt time.Time
	PostedAt   time.Time
}

// ErrNoRun says the store has no such run.
var ErrNoRun = errors.New("no such run")

// BeginRun records that job id started on head, or returns the run a
// previous attempt of the same job recorded (created false), so that an
// attempt after a crash or a posting failure sees the receipt that was
// already persisted and never runs the verdict again.
func (s *Store) BeginRun(ctx context.Context, r Run) (run Run, created bool, err error) {
	res, err := s.db.ExecContext(ctx, s.dialect.rebind(`
INSERT INTO vouch_run (id, forge, repo, pr, head, base, title, state, outcome, reason, created_at, finished_at, posted_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, '', '', ?, '', '') ON CONFLICT (id) DO NOTHING`),
		r.ID, string(r.Forge), r.Repo, r.PR, r.Head, r.Base, r.Title, string(RunRunning), stamp(time.Now()))
	if err != nil {
		return Run{}, false, fmt.Errorf("begin run %d: %w", r.ID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return Run{}, false, fmt.Errorf("begin run %d: %w", r.ID, err)
	}
	run, err = s.Run(ctx, r.ID)
	return run, n == 1, err
}

// FinishRun persists a run's receipt, signed envelope, log, title and
// base. It changes only a running run: a receipt once persisted is never
// replaced.
func (s *Store) FinishRun(ctx context.Context, r Run) error {
	if r.Receipt == nil {
		return fmt.Errorf("finish run %d: no receipt", r.ID)
	}
	js, err := json.Marshal(r.Receipt)
	if err != nil {
		return fmt.Errorf("finish run %d: %w", r.ID, err)
	}
	_, err = s.db.ExecContext(ctx, s.dialect.rebind(`
UPDATE vouch_run SET state = ?, outcome = ?, reason = ?, receipt = ?, envelope = ?, log = ?, title = ?, base = ?, finished_at = ?
WHERE id = ? AND state = ?`),
		string(RunFinal), string(r.Receipt.Outcome), string(r.Receipt.Reason), js, nonNilBytes(r.Envelope), nonNilBytes(r.Log),
		r.Title, r.Base, stamp(time.Now()), r.ID, string(RunRunning))
	if err != nil {
		return fmt.Errorf("finish run %d: %w", r.ID, err)
	}
	return nil
}

// MarkPosted records that the forge has a run's status and comment.
func (s *Store) MarkPosted(ctx context.Context, id int64) error {
	_, err := s.db.ExecContext(ctx, s.dialect.rebind(`UPDATE vouch_run SET state = ?, posted_at = ? WHERE id = ? AND state = ?`),
		string(RunPosted), stamp(time.Now()), id, string(RunFinal))
	if err != nil {
		return fmt.Errorf("mark run %d posted: %w", id, err)
	}
	return nil
}

const runColumns = `id, forge, repo, pr, head, base, title, state, receipt, envelope, log, created_at, finished_at, posted_at`

// Run reads one run.
func (s *Store) Run(ctx context.Context, id int64) (Run, error) {
	rows, err := s.read.QueryContext(ctx, s.dialect.rebind(`SELECT `+runColumns+` FROM vouch_run WHERE id = ?`), id)
	if err != nil {
		return Run{}, fmt.Errorf("run %d: %w", id, err)
	}
	runs, err := scanRuns(rows, true)
	if err != nil {
		return Run{}, fmt.Errorf("run %d: %w", id, err)
	}
	if len(runs) == 0 {
		return Run{}, fmt.Errorf("run %d: %w", id, ErrNoRun)
	}
	return runs[0], nil
}

// RunFilter selects runs; zero fields select all.
type RunFilter struct {
	Forge   forge.Kind
	Repo    string
	PR      int
	Head    string
	Outcome evidence.Outcome
	Reason  evidence.Reason
	// Finished selects runs with a persisted receipt.
	Finished bool
}

// Runs lists at most limit runs that pass f, newest first, without their
// logs and envelopes, and with receipts cut to their verdicts (no paths, no
// output): read one run with Run for the whole evidence.
func (s *Store) Runs(ctx context.Context, f RunFilter, limit int) ([]Run, error) {
	var where []string
	var args []any
	add := func(cond string, v any) { where = append(where, cond); args = append(args, v) }
	if f.Forge != "" {
		add("forge = ?", string(f.Forge))
	}
	if f.Repo != "" {
		add("repo = ?", strings.ToLower(f.Repo))
	}
	if f.PR != 0 {
		add("pr = ?", f.PR)
	}
	if f.Head != "" {
		add("head = ?", f.Head)
	}
	if f.Outcome != "" {
		add("outcome = ?", string(f.Outcome))
	}
	if f.Reason != "" {
		add("reason = ?", string(f.Reason))
	}
	if f.Finished {
		add("state <> ?", string(RunRunning))
	}
	// Lists carry receipts but never logs or envelopes: those are read one
	// run at a time.
	q := `SELECT ` + strings.Replace(strings.Replace(runColumns, " log,", " NULL,", 1), " envelope,", " NULL,", 1) + ` FROM vouch_run`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY id DESC LIMIT ?"
	args = append(args, max(limit, 1))
	rows, err := s.read.QueryContext(ctx, s.dialect.rebind(q), args...)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	runs, err := scanRuns(rows, false)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return runs, nil
}

// scanRuns reads rows of runColumns and closes them.
func scanRuns(rows *sql.Rows, withLog bool) ([]Run, error) {
	defer rows.Close()
	var runs []Run
	for rows.Next() {
		var r Run
		var forgeName, state, created, finished, posted string
		var receipt, envelope, log []byte
		if err := rows.Scan(&r.ID, &forgeName, &r.Repo, &r.PR, &r.Head, &r.Base, &r.Title, &state,
			&receipt, &envelope, &log, &created, &finished, &posted); err != nil {
			return nil, err
		}
		r.Forge, r.State = forge.Kind(forgeName), RunState(state)
		r.CreatedAt, r.FinishedAt, r.PostedAt = unstamp(created), unstamp(finished), unstamp(posted)
		if len(receipt) > 0 {
			var rc evidence.Receipt
			if err := json.Unmarshal(receipt, &rc); err != nil {
				return nil, fmt.Errorf("run %d: receipt: %w", r.ID, err)
			}
			if !withLog {
				// A list shows verdicts, not evidence: drop what can be large.
				rc.Gate.Changed, rc.Gate.Violations = nil, nil
				for i := range rc.Steps {
					rc.Steps[i].OutputTail = ""
				}
			}
			r.Receipt = &rc
		}
		r.Envelope = envelope
		if withLog {
			r.Log = log
		}
		runs = append(runs, r)
	}
	return runs, rows.Err()
}

// nonNilBytes keeps NOT NULL-free columns uniform: an empty slice, not NULL.
func nonNilBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
