package bot

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"vouch.dev/vouch/evidence"
	"vouch.dev/vouch/forge"
)

// evComment is an evidence comment vouch wrote for one head.
type evComment struct {
	ID        int64
	Collapsed bool
}

// headComments returns the pull request's evidence comments, by head, as
// the store records them. vouch records each comment it creates, so the
// forge's comments are listed only when the store knows none for the pull
// request (the first post, or comments made before vouch kept the record):
// a pull request with many comments then costs one listing, not one per
// post.
func (d *Deps) headComments(ctx context.Context, client forge.Client, k forge.Kind, repo forge.Repo, pr int) (map[string]evComment, error) {
	known, err := d.Store.comments(ctx, k, repo, pr)
	if err != nil || len(known) > 0 {
		return known, err
	}
	listed, err := client.BotComments(ctx, repo, pr)
	if err != nil {
		return nil, fmt.Errorf("list comments: %w", err)
	}
	for _, c := range listed {
		r, n, head, ok := evidence.ParseMarker(c.Body)
		if !ok || !strings.EqualFold(r, repo.FullName()) || n != pr {
			continue
		}
		ec := evComment{ID: c.ID, Collapsed: strings.HasPrefix(c.Body, "**vouch:** superseded by")}
		if err := d.Store.saveComment(ctx, k, repo, pr, head, ec); err != nil {
			return nil, err
		}
		known[head] = ec
	}
	return known, nil
}

// putComment edits head's evidence comment to body, or creates it when
// create is set and vouch has none (or the forge lost it), and records it.
func (d *Deps) putComment(ctx context.Context, client forge.Client, k forge.Kind, repo forge.Repo, pr int, known map[string]evComment, head, body string, collapsed, create bool) error {
	if c, ok := known[head]; ok {
		err := client.EditComment(ctx, repo, c.ID, body)
		switch {
		case err == nil:
			return d.Store.saveComment(ctx, k, repo, pr, head, evComment{ID: c.ID, Collapsed: collapsed})
		case !errors.Is(err, forge.ErrNotFound):
			return fmt.Errorf("edit comment %d: %w", c.ID, err)
		}
		// Deleted on the forge: forget it, and make it again if wanted.
		if err := d.Store.deleteComment(ctx, k, repo, pr, head); err != nil {
			return err
		}
		delete(known, head)
	}
	if !create {
		return nil
	}
	c, err := client.CreateComment(ctx, repo, pr, body)
	if err != nil {
		return fmt.Errorf("create comment: %w", err)
	}
	known[head] = evComment{ID: c.ID, Collapsed: collapsed}
	return d.Store.saveComment(ctx, k, repo, pr, head, known[head])
}

// comments reads the recorded evidence comments of a pull request.
func (s *Store) comments(ctx context.Context, k forge.Kind, repo forge.Repo, pr int) (map[string]evComment, error) {
	rows, err := s.read.QueryContext(ctx, s.dialect.rebind(`
SELECT head, comment_id, collapsed FROM vouch_comment WHERE forge = ? AND repo = ? AND pr = ?`),
		string(k), repoKey(repo), pr)
	if err != nil {
		return nil, fmt.Errorf("comments of %s#%d: %w", repo.FullName(), pr, err)
	}
	defer rows.Close()
	out := map[string]evComment{}
	for rows.Next() {
		var head string
		var c evComment
		var collapsed int
		if err := rows.Scan(&head, &c.ID, &collapsed); err != nil {
			return nil, fmt.Errorf("comments of %s#%d: %w", repo.FullName(), pr, err)
		}
		c.Collapsed = collapsed != 0
		out[head] = c
	}
	return out, rows.Err()
}

// saveComment records head's evidence comment.
func (s *Store) saveComment(ctx context.Context, k forge.Kind, repo forge.Repo, pr int, head string, c evComment) error {
	collapsed := 0
	if c.Collapsed {
		collapsed = 1
	}
	_, err := s.db.ExecContext(ctx, s.dialect.rebind(`
INSERT INTO vouch_comment (forge, repo, pr, head, comment_id, collapsed) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (forge, repo, pr, head) DO UPDATE SET comment_id = excluded.comment_id, collapsed = excluded.collapsed`),
		string(k), repoKey(repo), pr, head, c.ID, collapsed)
	if err != nil {
		return fmt.Errorf("record comment %d: %w", c.ID, err)
	}
	return nil
}

// deleteComment forgets head's evidence comment.
func (s *Store) deleteComment(ctx context.Context, k forge.Kind, repo forge.Repo, pr int, head string) error {
	_, err := s.db.ExecContext(ctx, s.dialect.rebind(`DELETE FROM vouch_comment WHERE forge = ? AND repo = ? AND pr = ? AND head = ?`),
		string(k), repoKey(repo), pr, head)
	if err != nil {
		return fmt.Errorf("forget comment of %s: %w", head, err)
	}
	return nil
}

// replied reports whether vouch answered a comment already.
func (s *Store) replied(ctx context.Context, k forge.Kind, repo forge.Repo, commentID int64) (bool, error) {
	var n int
	err := s.read.QueryRowContext(ctx, s.dialect.rebind(`SELECT count(*) FROM vouch_reply WHERE forge = ? AND repo = ? AND comment_id = ?`),
		string(k), repoKey(repo), commentID).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("reply to %d: %w", commentID, err)
	}
	return n > 0, nil
}

// saveReply records that vouch answered a comment.
func (s *Store) saveReply(ctx context.Context, k forge.Kind, repo forge.Repo, commentID int64) error {
	_, err := s.db.ExecContext(ctx, s.dialect.rebind(`INSERT INTO vouch_reply (forge, repo, comment_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`),
		string(k), repoKey(repo), commentID)
	if err != nil {
		return fmt.Errorf("record reply to %d: %w", commentID, err)
	}
	return nil
}
