package bot

import (
	"strconv"
	"strings"
	"testing"

	sdk "code.gitea.io/sdk/gitea"

	"vouch.dev/vouch/evidence"
)

// TestE2ECommands: `/verify` in a code fence, on a plain issue, or added
// by editing a comment does nothing; `/verify help` and an unknown
// `/verify x` get one reply each; a maintainer's `/verify` verifies the
// same head again, and its evidence comment is edited, not repeated.
func TestE2ECommands(t *testing.T) {
	e := startE2E(t, "e2e-commands")
	m := e.g.Maintainer
	api := e.g.API(m)
	api.SetContext(t.Context())

	head := e.push(m, e.repo, "feature", map[string]string{"feature.go": "package main\n"})
	pr := e.openPR(m, "feature", "a feature")
	if st := e.waitFinal(head); st.State != sdk.StatusSuccess {
		t.Fatalf("status = %s %q", st.State, st.Description)
	}

	e.comment(m, pr, "Let me try:\n\n```\n/verify\n```\n\n> /verify\n")
	issue, _, err := api.CreateIssue(e.repo.Owner, e.repo.Name, sdk.CreateIssueOption{Title: "a plain issue", Body: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := api.CreateIssueComment(e.repo.Owner, e.repo.Name, issue.Index, sdk.CreateIssueCommentOption{Body: "/verify"}); err != nil {
		t.Fatal(err)
	}
	c, _, err := api.CreateIssueComment(e.repo.Owner, e.repo.Name, int64(pr), sdk.CreateIssueCommentOption{Body: "looks fine"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := api.EditIssueComment(e.repo.Owner, e.repo.Name, c.ID, sdk.EditIssueCommentOption{Body: "/verify"}); err != nil {
		t.Fatal(err)
	}
	// Gitea delivers in order; the sentinel's reply means the rest arrived.
	e.comment(m, pr, "/verify help\n/verify frobnicate")
	e.waitFor("the help reply", func() bool { return len(e.replies(pr)) == 1 })
	reply := e.replies(pr)[0]
	if !strings.Contains(reply, HelpText) || !strings.Contains(reply, "`/verify frobnicate` is not a vouch command") {
		t.Errorf("reply:\n%s", reply)
	}
	if n := e.metric(`vouch_webhook_deliveries_total{event="comment",forge="gitea",result="ignored"}`); n == "" {
		t.Error("the fenced /verify was not counted as an ignored comment")
	}
	if runs := e.runsOf(pr, head); len(runs) != 1 {
		t.Errorf("ignored commands made %d runs of the head, want 1", len(runs))
	}
	if cms, _, _ := api.ListIssueComments(e.repo.Owner, e.repo.Name, issue.Index, sdk.ListIssueCommentOptions{}); len(cms) != 1 {
		t.Errorf("the plain issue has %d comments, want only the user's", len(cms))
	}

	// /verify by a maintainer verifies the same head again.
	e.comment(m, pr, "/verify")
	e.waitFor("a second run of the head", func() bool { return len(e.runsOf(pr, head)) == 2 })
	e.waitFor("the second run posted", func() bool {
		for _, r := range e.runsOf(pr, head) {
			if r.State != RunPosted {
				return false
			}
		}
		return true
	})
	if got := e.evidenceComments(pr)[head]; len(got) != 1 {
		t.Errorf("head has %d evidence comments after /verify, want 1", len(got))
	}
	if n := len(e.replies(pr)); n != 1 {
		t.Errorf("%d replies, want only the help reply", n)
	}

	// Someone deletes the evidence comment; the next run makes it again.
	for _, c := range e.botComments(pr) {
		if _, _, h, ok := evidence.ParseMarker(c.Body); ok && h == head {
			if _, err := api.DeleteIssueComment(e.repo.Owner, e.repo.Name, c.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.comment(m, pr, "/verify")
	e.waitFor("the comment made again", func() bool {
		got := e.evidenceComments(pr)[head]
		return len(got) == 1 && strings.HasPrefix(got[0], "**vouch: PASS**")
	})
	page := e.url + "/runs?repo=" + e.repo.FullName() + "&pr=" + strconv.Itoa(pr)
	if !strings.Contains(e.get(t, page), head[:7]) {
		t.Errorf("%s does not list the head", page)
	}
}
