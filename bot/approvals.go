package bot

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"vouch.dev/vouch/forge"
)

// SaveApproval records a maintainer's approval of one head; a second
// approval of the same head keeps the first.
func (s *Store) SaveApproval(ctx context.Context, a Approval, commentID int64) error {
	if !isSHA1Hex(a.HeadSHA) && !isObjectID(a.HeadSHA) {
		return fmt.Errorf("save approval: head %q is not a full commit id", a.HeadSHA)
	}
	_, err := s.db.ExecContext(ctx, s.dialect.rebind(`
INSERT INTO vouch_approval (forge, repo, pr, head, by_login, comment_id, approved_at)
VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`),
		string(a.Forge), repoKey(a.Repo), a.PR, a.HeadSHA, a.By, commentID, stamp(a.At))
	if err != nil {
		return fmt.Errorf("save approval of %s: %w", a.HeadSHA, err)
	}
	return nil
}

// ApprovalFor returns the approval of exactly head on the pull request, if
// one was recorded; ok is false otherwise.
func (s *Store) ApprovalFor(ctx context.Context, k forge.Kind, repo forge.Repo, pr int, head string) (a Approval, ok bool, err error) {
	var at string
	err = s.read.QueryRowContext(ctx, s.dialect.rebind(`
SELECT by_login, approved_at FROM vouch_approval WHERE forge = ? AND repo = ? AND pr = ? AND head = ?`),
		string(k), repoKey(repo), pr, head).Scan(&a.By, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return Approval{}, false, nil
	}
	if err != nil {
		return Approval{}, false, fmt.Errorf("approval of %s: %w", head, err)
	}
	a.Forge, a.Repo, a.PR, a.HeadSHA, a.At = k, repo, pr, head, unstamp(at)
	if !ApprovalCovers(a, head) {
		return Approval{}, false, nil
	}
	return a, true, nil
}

// askedAt returns when vouch finished asking for approval of head on the
// pull request (a STOP_AND_ASK UNTRUSTED_AUTHOR receipt persisted), or the
// zero time when it never did.
func (s *Store) askedAt(ctx context.Context, k forge.Kind, repo forge.Repo, pr int, head string) (time.Time, error) {
	var at sql.NullString
	err := s.read.QueryRowContext(ctx, s.dialect.rebind(`
SELECT MIN(finished_at) FROM vouch_run WHERE forge = ? AND repo = ? AND pr = ? AND head = ? AND reason = ? AND state <> ?`),
		string(k), repoKey(repo), pr, head, "UNTRUSTED_AUTHOR", string(RunRunning)).Scan(&at)
	if err != nil {
		return time.Time{}, fmt.Errorf("asked for %s: %w", head, err)
	}
	return unstamp(at.String), nil
}

// latestAskBefore returns the head of vouch's most recent approval
// question (STOP_AND_ASK UNTRUSTED_AUTHOR persisted) on the pull request
// before t, or "".
func (s *Store) latestAskBefore(ctx context.Context, k forge.Kind, repo forge.Repo, pr int, t time.Time) (string, error) {
	var head string
	err := s.read.QueryRowContext(ctx, s.dialect.rebind(`
SELECT head FROM vouch_run WHERE forge = ? AND repo = ? AND pr = ? AND reason = ? AND state <> ? AND finished_at < ?
ORDER BY finished_at DESC, id DESC LIMIT 1`),
		string(k), repoKey(repo), pr, "UNTRUSTED_AUTHOR", string(RunRunning), stamp(t)).Scan(&head)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("latest ask before %s: %w", t, err)
	}
	return head, nil
}

// lapseApprovals deletes the pull request's approvals of every head but
// current: an approval lapses on the next push, and does not come back if
// the old head is pushed again.
func (s *Store) lapseApprovals(ctx context.Context, k forge.Kind, repo forge.Repo, pr int, current string) error {
	_, err := s.db.ExecContext(ctx, s.dialect.rebind(`DELETE FROM vouch_approval WHERE forge = ? AND repo = ? AND pr = ? AND head <> ?`),
		string(k), repoKey(repo), pr, current)
	if err != nil {
		return fmt.Errorf("lapse approvals: %w", err)
	}
	return nil
}
