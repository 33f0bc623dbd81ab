package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/riverqueue/river"

	"vouch.dev/vouch/forge"
)

// commandWorker runs JobCommand jobs: it judges the comment's author at the
// time it is handled, acts, and answers in one reply comment.
type commandWorker struct {
	river.WorkerDefaults[commandArgs]
	d *Deps

	mu      sync.Mutex
	chatted map[string]time.Time // pull request and commenter → last help reply
}

// chatterEvery is how often one commenter on one pull request gets an
// answer to comments holding only `/verify help` or unknown commands: any
// commenter can post them, and each answer costs the bot API calls.
const chatterEvery = 10 * time.Minute

// mayChat reports whether a help-only reply to author on the pull request
// may be posted now, and records it.
func (w *commandWorker) mayChat(a commandArgs) bool {
	key := a.Forge + "/" + a.Repo + "#" + strconv.Itoa(a.PR) + "@" + strings.ToLower(a.Author)
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	if w.chatted == nil {
		w.chatted = map[string]time.Time{}
	}
	for k, t := range w.chatted {
		if now.Sub(t) > chatterEvery {
			delete(w.chatted, k)
		}
	}
	if _, ok := w.chatted[key]; ok {
		return false
	}
	w.chatted[key] = now
	return true
}

// replyMarker identifies vouch's reply to one comment, so a retried job
// never answers twice.
func replyMarker(commentID int64) string {
	return "<!-- vouch:reply comment=" + strconv.FormatInt(commentID, 10) + " -->"
}

// Work handles the commands of one comment.
func (w *commandWorker) Work(ctx context.Context, job *river.Job[commandArgs]) error {
	a := job.Args
	kind, repo := forge.Kind(a.Forge), splitRepo(a.Repo)
	log := w.d.Logger.With("job", job.ID, "forge", a.Forge, "repo", a.Repo, "pr", a.PR, "comment", a.CommentID, "author", a.Author)
	client := w.d.Forges[kind]
	if client == nil {
		return river.JobCancel(fmt.Errorf("forge %q is not configured", a.Forge))
	}
	pr, err := client.PullRequest(ctx, repo, a.PR)
	if errors.Is(err, forge.ErrNotFound) {
		log.Info("commands on a pull request that no longer exists")
		return nil
	}
	if err != nil {
		return fmt.Errorf("read pull request: %w", err)
	}
	var replies []string
	seen := map[CommandKind]bool{}
	for _, c := range a.Commands {
		// One answer per kind: a comment of a thousand unknown commands gets
		// one line about the first, and the help text at most once.
		if seen[c.Kind] {
			continue
		}
		seen[c.Kind] = true
		if c.Kind == CommandUnknown && hasKind(a.Commands, CommandHelp) {
			replies = append(replies, fmt.Sprintf("@%s: `/verify %s` is not a vouch command.", a.Author, inertArg(c.Arg)))
			continue
		}
		reply, err := w.handle(ctx, log, client, repo, pr, job, c)
		if err != nil {
			return err
		}
		if reply != "" {
			replies = append(replies, reply)
		}
	}
	if len(replies) == 0 {
		return nil
	}
	chatter := true
	for _, c := range a.Commands {
		chatter = chatter && (c.Kind == CommandHelp || c.Kind == CommandUnknown)
	}
	if chatter && !w.mayChat(a) {
		log.Info("help reply skipped: this commenter was answered recently")
		return nil
	}
	body := replyMarker(a.CommentID) + "\n" + strings.Join(replies, "\n\n") + "\n"
	return w.reply(ctx, client, kind, repo, a.PR, a.CommentID, body)
}

// handle acts on one command and returns the reply it needs, if any.
func (w *commandWorker) handle(ctx context.Context, log *slog.Logger, client forge.Client, repo forge.Repo, pr *forge.PullRequest, job *river.Job[commandArgs], c Command) (string, error) {
	a := job.Args
	switch c.Kind {
	case CommandHelp:
		return HelpText, nil
	case CommandUnknown:
		return fmt.Sprintf("@%s: `/verify %s` is not a vouch command.\n\n%s", a.Author, inertArg(c.Arg), HelpText), nil
	}
	if !pr.Open {
		return fmt.Sprintf("@%s: this pull request is closed; vouch verifies open pull requests only.", a.Author), nil
	}
	trusted, perm, err := w.d.Trust.Decide(ctx, client, repo, a.Author)
	if err != nil {
		return "", err
	}
	cmd := "/verify"
	if c.Kind == CommandApprove {
		cmd = "/verify approve"
	}
	if !trusted {
		log.Info("command refused: untrusted commenter", "command", c.Kind, "permission", perm)
		return fmt.Sprintf("@%s: `%s` refused: it needs %s permission on %s (you have %s). Nothing was run or approved.",
			a.Author, cmd, w.d.Trust.min(), repo.FullName(), perm), nil
	}
	head := pr.HeadSHA
	if a.HeadSHA != "" && a.HeadSHA != head {
		return fmt.Sprintf("@%s: the head moved from `%s` to `%s` after your comment; `%s` was not acted on. Review the new head and comment again.",
			a.Author, short(a.HeadSHA), short(head), cmd), nil
	}
	switch c.Kind {
	case CommandVerify:
		if _, err := w.d.Store.EnqueueVerify(ctx, verifyArgs{Forge: a.Forge, Repo: a.Repo, PR: a.PR, HeadSHA: head, BaseSHA: pr.BaseSHA,
			Delivery: a.Delivery, Trigger: "comment:" + strconv.FormatInt(a.CommentID, 10)}); err != nil {
			return "", err
		}
		log.Info("verification requested", "head", head)
		return "", nil
	case CommandApprove:
		// Which head the maintainer means, at the time they wrote:
		//   - named in the command (`/verify approve abc1234`), which must
		//     abbreviate the current head;
		//   - otherwise the head the comment event carries (Gitea, Forgejo:
		//     the pull request's head when the comment was made), and then
		//     vouch's latest question on this pull request, before the
		//     comment arrived, must have been about that head, so a head
		//     pushed back silently (a duplicate, asked about long ago) cannot
		//     borrow an old question;
		//   - GitHub's comment events carry no head: the command must name it.
		// In every case vouch must have asked about the head before the
		// comment arrived.
		meant := a.HeadSHA
		if c.Arg != "" {
			if !strings.HasPrefix(head, c.Arg) {
				return fmt.Sprintf("@%s: `/verify approve %s` names a head that is not the current one (`%s`); nothing was approved. Review `%s` and approve it by name.",
					a.Author, c.Arg, short(head), short(head)), nil
			}
			meant = head
		}
		if meant == "" {
			return fmt.Sprintf("@%s: this forge does not say which head you saw; approve by name: `/verify approve %s` (after reviewing that commit). Nothing was approved.",
				a.Author, short(head)), nil
		}
		asked, err := w.d.Store.askedAt(ctx, forge.Kind(a.Forge), repo, a.PR, head)
		if err != nil {
			return "", err
		}
		switch {
		case asked.IsZero():
			return fmt.Sprintf("@%s: vouch has not asked for approval of the current head `%s`, so there is nothing to approve yet. If it asks, approve that head.",
				a.Author, short(head)), nil
		case !asked.Before(job.CreatedAt):
			return fmt.Sprintf("@%s: vouch asked about head `%s` only after your comment arrived; review that head and approve it by name: `/verify approve %s`.",
				a.Author, short(head), short(head)), nil
		}
		if c.Arg == "" {
			last, err := w.d.Store.latestAskBefore(ctx, forge.Kind(a.Forge), repo, a.PR, job.CreatedAt)
			if err != nil {
				return "", err
			}
			if last != head {
				return fmt.Sprintf("@%s: vouch's latest question on this pull request was about `%s`, but its head is now `%s`; review `%s` and approve it by name: `/verify approve %s`.",
					a.Author, short(last), short(head), short(head), short(head)), nil
			}
		}
		appr := Approval{Forge: forge.Kind(a.Forge), Repo: repo, PR: a.PR, HeadSHA: head, By: a.Author, At: time.Now()}
		if err := w.d.Store.SaveApproval(ctx, appr, a.CommentID); err != nil {
			return "", err
		}
		if _, err := w.d.Store.EnqueueVerify(ctx, verifyArgs{Forge: a.Forge, Repo: a.Repo, PR: a.PR, HeadSHA: head, BaseSHA: pr.BaseSHA,
			Delivery: a.Delivery, Trigger: "approve:" + strconv.FormatInt(a.CommentID, 10)}); err != nil {
			return "", err
		}
		log.Info("head approved", "head", head)
		return fmt.Sprintf("@%s approved head `%s`; vouch is verifying it now. The approval covers this commit only: a new push needs a new approval.",
			a.Author, short(head)), nil
	}
	return "", nil
}

// hasKind reports whether cmds holds a command of kind k.
func hasKind(cmds []Command, k CommandKind) bool {
	for _, c := range cmds {
		if c.Kind == k {
			return true
		}
	}
	return false
}

// reply posts body unless vouch already answered the comment (recorded in
// the store, so a retried job never answers twice and nothing is listed).
func (w *commandWorker) reply(ctx context.Context, client forge.Client, k forge.Kind, repo forge.Repo, pr int, commentID int64, body string) error {
	done, err := w.d.Store.replied(ctx, k, repo, commentID)
	if err != nil || done {
		return err
	}
	if _, err := client.CreateComment(ctx, repo, pr, body); err != nil {
		return fmt.Errorf("reply to comment %d: %w", commentID, err)
	}
	return w.d.Store.saveReply(ctx, k, repo, commentID)
}

// inertArg shows an unknown command's argument inside a code span.
func inertArg(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '`' || r == '<' || r == '>' || r == '@' || r < ' ' {
			return -1
		}
		return r
	}, s)
	return s
}

// short is a commit's 12-character abbreviation, for replies.
func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
