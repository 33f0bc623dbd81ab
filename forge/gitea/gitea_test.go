package gitea

// Tests against a real Gitea server (forge/forgetest): one server for the
// whole package, started on first use.

import (
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	sdk "code.gitea.io/sdk/gitea"
	"github.com/go-git/go-git/v5/plumbing"

	"vouch.dev/vouch/forge"
	"vouch.dev/vouch/forge/fetch"
	"vouch.dev/vouch/forge/forgetest"
)

var capture = flag.Bool("capture", false, "save the real Gitea deliveries to testdata/")

var srv forgetest.Shared

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	srv.Close()
	os.Exit(code)
}

// delivery is one POST Gitea made to the test listener.
type delivery struct {
	header http.Header
	body   []byte
}

// hookListener starts a listener on loopback and registers it as a webhook
// of repo (pull request and issue comment events, JSON, signed with
// secret). Deliveries arrive on the returned channel.
func hookListener(t *testing.T, g *forgetest.Gitea, repo forge.Repo, secret string) <-chan delivery {
	t.Helper()
	ch := make(chan delivery, 64)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, forge.MaxWebhookBody+1))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ch <- delivery{header: r.Header.Clone(), body: body}
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(ts.Close)
	api := g.API(g.Maintainer)
	api.SetContext(t.Context())
	hook, _, err := api.CreateRepoHook(repo.Owner, repo.Name, sdk.CreateHookOption{
		Type:   "gitea",
		Config: map[string]string{"url": ts.URL + "/webhook/gitea", "content_type": "json", "secret": secret},
		Events: []string{"pull_request", "issue_comment"},
		Active: true,
	})
	if err != nil {
		t.Fatalf("CreateRepoHook: %v", err)
	}
	t.Cleanup(func() {
		api := g.API(g.Maintainer)
		api.DeleteRepoHook(repo.Owner, repo.Name, hook.ID)
	})
	return ch
}

// waitEvent reads deliveries until one parses into an event match accepts,
// and returns it with its body and the deliveries the parser ignored on
// the way. Any other parse error fails the test.
func waitEvent(t *testing.T, ch <-chan delivery, w *Webhook, what string, match func(*forge.Event) bool) (*forge.Event, delivery, []delivery) {
	t.Helper()
	var ignored []delivery
	deadline := time.After(60 * time.Second)
	for {
		select {
		case d := <-ch:
			ev, err := w.Parse(d.header, d.body)
			switch {
			case errors.Is(err, forge.ErrIgnored):
				ignored = append(ignored, d)
			case err != nil:
				t.Fatalf("waiting for %s: Parse(%s) = %v", what, d.header.Get("X-Gitea-Event-Type"), err)
			case match(ev):
				return ev, d, ignored
			default:
				t.Logf("waiting for %s: skipping %s %s", what, ev.Type, ev.Action)
			}
		case <-deadline:
			t.Fatalf("no %s delivery within 60s", what)
		}
	}
}

func save(t *testing.T, name string, body []byte) {
	t.Helper()
	if !*capture {
		return
	}
	if err := os.WriteFile(filepath.Join("testdata", name), body, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("captured testdata/%s", name)
}

func branchSHA(t *testing.T, g *forgetest.Gitea, repo forge.Repo, branch string) string {
	t.Helper()
	api := g.API(g.Maintainer)
	b, _, err := api.GetRepoBranch(repo.Owner, repo.Name, branch)
	if err != nil {
		t.Fatalf("GetRepoBranch(%s): %v", branch, err)
	}
	return b.Commit.ID
}

// TestDeliveries: a pull request opened, a push to it, /verify and other
// comments, and the merge, each delivered by Gitea to a listener and
// parsed into the right neutral event with the SHAs that were pushed.
func TestDeliveries(t *testing.T) {
	g := srv.Get(t)
	ctx := t.Context()
	const secret = "delivery-secret"
	ch := hookListener(t, g, g.Repo, secret)
	w, err := NewWebhook([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	w.BotLogin = g.Bot.Login
	m := g.API(g.Maintainer)

	base := branchSHA(t, g, g.Repo, "main")
	head1, err := g.Commit(ctx, g.Maintainer, g.Repo, "feature-deliveries", "main", "add feature", map[string]string{"feature.go": "package main\n\nvar feature = 1\n"})
	if err != nil {
		t.Fatal(err)
	}
	pr, _, err := m.CreatePullRequest(g.Repo.Owner, g.Repo.Name, sdk.CreatePullRequestOption{Head: "feature-deliveries", Base: "main", Title: "feature"})
	if err != nil {
		t.Fatalf("CreatePullRequest: %v", err)
	}
	number := int(pr.Index)
	isPR := func(typ forge.EventType, action forge.Action) func(*forge.Event) bool {
		return func(ev *forge.Event) bool { return ev.Number == number && ev.Type == typ && ev.Action == action }
	}

	ev, d, _ := waitEvent(t, ch, w, "opened", isPR(forge.EventPullRequest, forge.ActionOpened))
	save(t, "pull_request_opened.json", d.body)
	want := forge.Event{
		Forge: forge.Gitea, Delivery: d.header.Get("X-Gitea-Delivery"), Type: forge.EventPullRequest,
		Action: forge.ActionOpened, Repo: g.Repo, Number: number, BaseSHA: base, HeadSHA: head1, BaseRef: "main",
		HeadRepo: g.Repo, Author: g.Maintainer.Login, Sender: g.Maintainer.Login,
	}
	if *ev != want {
		t.Errorf("opened event = %+v\nwant %+v", *ev, want)
	}
	if ev.Delivery == "" {
		t.Error("opened event has no delivery id")
	}

	head2, err := g.Commit(ctx, g.Maintainer, g.Repo, "feature-deliveries", "", "more feature", map[string]string{"feature.go": "package main\n\nvar feature = 2\n"})
	if err != nil {
		t.Fatal(err)
	}
	ev, d, _ = waitEvent(t, ch, w, "synchronized", isPR(forge.EventPullRequest, forge.ActionSynchronized))
	save(t, "pull_request_synchronized.json", d.body)
	if ev.HeadSHA != head2 || ev.BaseSHA != base {
		t.Errorf("synchronized event SHAs = base %s head %s, want base %s head %s", ev.BaseSHA, ev.HeadSHA, base, head2)
	}

	o := g.API(g.Outsider)
	cm, _, err := o.CreateIssueComment(g.Repo.Owner, g.Repo.Name, int64(number), sdk.CreateIssueCommentOption{Body: "/verify"})
	if err != nil {
		t.Fatalf("CreateIssueComment: %v", err)
	}
	ev, d, _ = waitEvent(t, ch, w, "/verify comment", func(ev *forge.Event) bool { return ev.Type == forge.EventComment })
	save(t, "pull_request_comment.json", d.body)
	wantComment := forge.Event{
		Forge: forge.Gitea, Delivery: ev.Delivery, Type: forge.EventComment, Repo: g.Repo, Number: number,
		BaseSHA: base, HeadSHA: head2, BaseRef: "main", HeadRepo: g.Repo, Author: g.Maintainer.Login,
		Sender: g.Outsider.Login, Comment: ev.Comment,
	}
	if *ev != wantComment {
		t.Errorf("comment event = %+v\nwant %+v", *ev, wantComment)
	}
	if *ev.Comment != (forge.Comment{ID: cm.ID, Author: g.Outsider.Login, Body: "/verify", CreatedAt: ev.Comment.CreatedAt}) ||
		!ev.Comment.CreatedAt.Equal(cm.Created) {
		t.Errorf("comment = %+v, want id %d by %s at %s: /verify", *ev.Comment, cm.ID, g.Outsider.Login, cm.Created)
	}

	// The bot's own comment, an edit and a plain issue's comment are all
	// delivered and all ignored; a last /verify help proves they came first.
	b := g.API(g.Bot)
	if _, _, err := b.CreateIssueComment(g.Repo.Owner, g.Repo.Name, int64(number), sdk.CreateIssueCommentOption{Body: "vouch: PASS"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := o.EditIssueComment(g.Repo.Owner, g.Repo.Name, cm.ID, sdk.EditIssueCommentOption{Body: "/verify approve"}); err != nil {
		t.Fatal(err)
	}
	issue, _, err := m.CreateIssue(g.Repo.Owner, g.Repo.Name, sdk.CreateIssueOption{Title: "a plain issue"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := o.CreateIssueComment(g.Repo.Owner, g.Repo.Name, issue.Index, sdk.CreateIssueCommentOption{Body: "/verify"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := o.CreateIssueComment(g.Repo.Owner, g.Repo.Name, int64(number), sdk.CreateIssueCommentOption{Body: "/verify help"}); err != nil {
		t.Fatal(err)
	}
	ev, _, ignored := waitEvent(t, ch, w, "/verify help comment", func(ev *forge.Event) bool { return ev.Type == forge.EventComment })
	if ev.Comment.Body != "/verify help" {
		t.Errorf("next comment event = %q, want /verify help (bot, edit and issue comments ignored)", ev.Comment.Body)
	}
	var sawBot, sawEdit, sawIssue bool
	for _, d := range ignored {
		s := string(d.body)
		switch {
		case strings.Contains(s, `"body": "vouch: PASS"`):
			sawBot = true
			save(t, "pull_request_comment_bot.json", d.body)
		case strings.Contains(s, `"action": "edited"`):
			sawEdit = true
		case strings.Contains(s, `"is_pull": false`):
			sawIssue = true
			save(t, "issue_comment.json", d.body)
		}
	}
	if !sawBot || !sawEdit || !sawIssue {
		t.Errorf("ignored deliveries: bot %v, edit %v, issue %v; want all", sawBot, sawEdit, sawIssue)
	}

	if _, _, err := m.MergePullRequest(g.Repo.Owner, g.Repo.Name, int64(number), sdk.MergePullRequestOption{Style: sdk.MergeStyleMerge}); err != nil {
		t.Fatalf("MergePullRequest: %v", err)
	}
	ev, d, _ = waitEvent(t, ch, w, "closed", isPR(forge.EventPullRequest, forge.ActionClosed))
	save(t, "pull_request_closed_merged.json", d.body)
	if !ev.Merged || ev.HeadSHA != head2 {
		t.Errorf("closed event merged %v head %s, want merged head %s", ev.Merged, ev.HeadSHA, head2)
	}
}

func newClient(t *testing.T, g *forgetest.Gitea, token string) *Client {
	t.Helper()
	c, err := NewClient(g.URL+"/", token)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPermission(t *testing.T) {
	g := srv.Get(t)
	c := newClient(t, g, g.Bot.Token)
	tests := []struct {
		user string
		want forge.Permission
	}{
		{g.Maintainer.Login, forge.PermAdmin}, // owner
		{g.Bot.Login, forge.PermAdmin},        // admin collaborator
		{g.Outsider.Login, forge.PermRead},    // a stranger on a public repository
	}
	for _, tt := range tests {
		got, err := c.Permission(t.Context(), g.Repo, tt.user)
		if err != nil || got != tt.want {
			t.Errorf("Permission(%s) = %v, %v; want %v", tt.user, got, err, tt.want)
		}
	}
	if _, err := c.Permission(t.Context(), g.Repo, "nobody-here"); !errors.Is(err, forge.ErrNotFound) {
		t.Errorf("Permission(nobody-here) error = %v, want ErrNotFound", err)
	}
	// The outsider may not ask about others.
	oc := newClient(t, g, g.Outsider.Token)
	if _, err := oc.Permission(t.Context(), g.Repo, g.Maintainer.Login); !errors.Is(err, forge.ErrUnauthorized) {
		t.Errorf("outsider's Permission(maintainer) error = %v, want ErrUnauthorized", err)
	}
	bad := newClient(t, g, "0123456789abcdef0123456789abcdef01234567")
	_, err := bad.Permission(t.Context(), g.Repo, g.Maintainer.Login)
	if !errors.Is(err, forge.ErrUnauthorized) {
		t.Errorf("bad token Permission error = %v, want ErrUnauthorized", err)
	}
}

// forkPR pushes a commit to a new branch of the outsider's fork and opens
// a pull request from it; it returns the number and head SHA.
func forkPR(t *testing.T, g *forgetest.Gitea, branch string) (int, string) {
	t.Helper()
	head, err := g.Commit(t.Context(), g.Outsider, g.Fork, branch, "main", "outsider change", map[string]string{"outsider.txt": "from a fork\n"})
	if err != nil {
		t.Fatal(err)
	}
	pr, _, err := g.API(g.Outsider).CreatePullRequest(g.Repo.Owner, g.Repo.Name, sdk.CreatePullRequestOption{
		Head: g.Outsider.Login + ":" + branch, Base: "main", Title: "from a fork",
	})
	if err != nil {
		t.Fatalf("CreatePullRequest from fork: %v", err)
	}
	return int(pr.Index), head
}

func TestClientPullRequests(t *testing.T) {
	g := srv.Get(t)
	ctx := t.Context()
	c := newClient(t, g, g.Bot.Token)
	number, head := forkPR(t, g, "fork-client")
	base := branchSHA(t, g, g.Repo, "main")

	pr, err := c.PullRequest(ctx, g.Repo, number)
	if err != nil {
		t.Fatal(err)
	}
	want := forge.PullRequest{
		Repo: g.Repo, Number: number, Title: "from a fork", Author: g.Outsider.Login, Open: true,
		BaseRef: "main", BaseSHA: base, HeadSHA: head, HeadRepo: g.Fork, Fork: true,
	}
	if *pr != want {
		t.Errorf("PullRequest = %+v\nwant %+v", *pr, want)
	}

	open, err := c.OpenPullRequests(ctx, g.Repo)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, p := range open {
		found = found || p.Number == number && p.HeadSHA == head
		if !p.Open {
			t.Errorf("OpenPullRequests lists #%d, which is not open", p.Number)
		}
	}
	if !found {
		t.Errorf("OpenPullRequests = %d pulls, without #%d", len(open), number)
	}

	if _, err := c.PullRequest(ctx, g.Repo, 99999); !errors.Is(err, forge.ErrNotFound) {
		t.Errorf("PullRequest(99999) error = %v, want ErrNotFound", err)
	}
	if _, err := c.OpenPullRequests(ctx, forge.Repo{Owner: "nobody", Name: "nothing"}); !errors.Is(err, forge.ErrNotFound) {
		t.Errorf("OpenPullRequests(nobody/nothing) error = %v, want ErrNotFound", err)
	}

	// The fork's head, fetched by exact SHA from where FetchSource says.
	src, err := c.FetchSource(ctx, pr)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(src.URL, src.Token) || strings.Contains(src.URL, "@") {
		t.Errorf("FetchSource URL %q carries credentials", src.URL)
	}
	cache := &fetch.Cache{Dir: t.TempDir()}
	repo, err := cache.Fetch(ctx, src, base, head)
	if err != nil {
		t.Fatalf("Fetch(%v) = %v", src.Refs, err)
	}
	commit, err := repo.CommitObject(plumbing.NewHash(head))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := commit.File("outsider.txt"); err != nil {
		t.Errorf("fetched head %s lacks outsider.txt: %v", head, err)
	}
}

func TestClientStatusAndComments(t *testing.T) {
	g := srv.Get(t)
	ctx := t.Context()
	c := newClient(t, g, g.Bot.Token)
	number, head := forkPR(t, g, "fork-status")

	long := strings.Repeat("é", 200)
	err := c.SetStatus(ctx, g.Repo, head, forge.Status{State: forge.StatusFailure, Context: "vouch/verify", Description: long, TargetURL: "http://127.0.0.1/runs/1"})
	if err != nil {
		t.Fatal(err)
	}
	statuses, _, err := g.API(g.Maintainer).ListStatuses(g.Repo.Owner, g.Repo.Name, head, sdk.ListStatusesOption{})
	if err != nil {
		t.Fatal(err)
	}
	if len(statuses) != 1 {
		t.Fatalf("ListStatuses(%s) = %d statuses, want 1", head, len(statuses))
	}
	st := statuses[0]
	if st.State != sdk.StatusFailure || st.Context != "vouch/verify" || st.TargetURL != "http://127.0.0.1/runs/1" ||
		utf8.RuneCountInString(st.Description) != forge.MaxStatusDescription || !strings.HasPrefix(long, strings.TrimSuffix(st.Description, "…")) {
		t.Errorf("status = %s %q %q %q (%d chars), want failure vouch/verify, capped description",
			st.State, st.Context, st.TargetURL, st.Description, utf8.RuneCountInString(st.Description))
	}

	// Someone else's comment is not the bot's.
	if _, _, err := g.API(g.Outsider).CreateIssueComment(g.Repo.Owner, g.Repo.Name, int64(number), sdk.CreateIssueCommentOption{Body: "/verify"}); err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("x", forge.MaxCommentBody+1000)
	cm, err := c.CreateComment(ctx, g.Repo, number, huge)
	if err != nil {
		t.Fatal(err)
	}
	if cm.ID == 0 || cm.Author != g.Bot.Login {
		t.Errorf("CreateComment = %+v, want an id and author %s", cm, g.Bot.Login)
	}
	got, _, err := g.API(g.Maintainer).GetIssueComment(g.Repo.Owner, g.Repo.Name, cm.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n := utf8.RuneCountInString(got.Body); n != forge.MaxCommentBody || !strings.HasSuffix(got.Body, truncated) {
		t.Errorf("created comment has %d chars, want %d ending in the truncation mark", n, forge.MaxCommentBody)
	}
	if err := c.EditComment(ctx, g.Repo, cm.ID, "vouch: PASS"); err != nil {
		t.Fatal(err)
	}
	got, _, err = g.API(g.Maintainer).GetIssueComment(g.Repo.Owner, g.Repo.Name, cm.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Body != "vouch: PASS" {
		t.Errorf("edited comment body = %q, want vouch: PASS", got.Body)
	}
	mine, err := c.BotComments(ctx, g.Repo, number)
	if err != nil {
		t.Fatal(err)
	}
	if len(mine) != 1 || mine[0] != (forge.Comment{ID: cm.ID, Author: g.Bot.Login, Body: "vouch: PASS"}) {
		t.Errorf("BotComments = %+v, want only the bot's edited comment", mine)
	}
	if err := c.EditComment(ctx, g.Repo, 999999, "x"); !errors.Is(err, forge.ErrNotFound) {
		t.Errorf("EditComment(999999) error = %v, want ErrNotFound", err)
	}
}

// TestRateLimit: Gitea has no rate limiter to provoke, so this one answer
// comes from a stand-in server.
func TestRateLimit(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"message":"slow down"}`)
	}))
	defer ts.Close()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c, err := NewClient(ts.URL, "tok", WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.PullRequest(context.Background(), forge.Repo{Owner: "o", Name: "r"}, 1)
	var rl *forge.RateLimitError
	if !errors.As(err, &rl) || !rl.RetryAt.Equal(now.Add(7*time.Second)) {
		t.Fatalf("PullRequest error = %v, want RateLimitError until %s", err, now.Add(7*time.Second))
	}
	if strings.Contains(err.Error(), "tok") {
		t.Errorf("error %q contains the token", err)
	}
}

func TestCapRunes(t *testing.T) {
	tests := []struct {
		in     string
		max    int
		marker string
		want   string
	}{
		{"short", 10, "…", "short"},
		{"exactly10!", 10, "…", "exactly10!"},
		{"éééééééééééé", 10, "…", "ééééééééé…"},
		{"abcdef", 3, "long marker", "abc"},
	}
	for _, tt := range tests {
		if got := capRunes(tt.in, tt.max, tt.marker); got != tt.want {
			t.Errorf("capRunes(%q, %d, %q) = %q, want %q", tt.in, tt.max, tt.marker, got, tt.want)
		}
	}
}
