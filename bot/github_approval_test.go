package bot

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"vouch.dev/vouch/evidence"
	"vouch.dev/vouch/forge"
	"vouch.dev/vouch/forge/github"
)

// fakeGitHub answers the REST calls the command worker makes, as GitHub
// does (go-github's own test approach): a pull request whose head can be
// moved, collaborator permissions, and the comments posted.
type fakeGitHub struct {
	mu       sync.Mutex
	head     string
	perms    map[string]string
	comments []string
}

func (f *fakeGitHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch p := r.URL.Path; {
	case r.Method == http.MethodGet && p == "/repos/octo/widget/pulls/5":
		fmt.Fprintf(w, `{"number":5,"state":"open","title":"t","user":{"login":"outsider"},
"head":{"sha":%q,"ref":"x","repo":{"name":"widget","full_name":"outsider/widget","owner":{"login":"outsider"}}},
"base":{"sha":%q,"ref":"main","repo":{"name":"widget","full_name":"octo/widget","owner":{"login":"octo"}}}}`, f.head, headB)
	case r.Method == http.MethodGet && strings.HasPrefix(p, "/repos/octo/widget/collaborators/") && strings.HasSuffix(p, "/permission"):
		user := strings.TrimSuffix(strings.TrimPrefix(p, "/repos/octo/widget/collaborators/"), "/permission")
		perm := f.perms[user]
		if perm == "" {
			perm = "read"
		}
		fmt.Fprintf(w, `{"permission":%q,"role_name":%q,"user":{"login":%q}}`, perm, perm, user)
	case r.Method == http.MethodGet && p == "/user":
		io.WriteString(w, `{"login":"vouch-bot"}`)
	case r.Method == http.MethodGet && p == "/repos/octo/widget/issues/5/comments":
		var out []map[string]any
		for i, c := range f.comments {
			out = append(out, map[string]any{"id": i + 1, "body": c, "user": map[string]string{"login": "vouch-bot"}})
		}
		json.NewEncoder(w).Encode(out)
	case r.Method == http.MethodPost && p == "/repos/octo/widget/issues/5/comments":
		var body struct{ Body string }
		json.NewDecoder(r.Body).Decode(&body)
		f.comments = append(f.comments, body.Body)
		fmt.Fprintf(w, `{"id":%d,"body":%q,"user":{"login":"vouch-bot"}}`, len(f.comments), body.Body)
	default:
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
	}
}

// TestGitHubApprovalWithoutHead: GitHub's comment events carry no head, so
// `/verify approve` must name the head, which must be the current one, and
// vouch must have asked about it before the comment arrived. An approval
// never lands on a head the maintainer did not name.
func TestGitHubApprovalWithoutHead(t *testing.T) {
	fake := &fakeGitHub{head: headA, perms: map[string]string{"maintainer": "admin"}}
	ts := httptest.NewServer(fake)
	t.Cleanup(ts.Close)
	client, err := github.NewTokenClient(ts.URL+"/", "test-token", github.WithMaxRetryWait(0))
	if err != nil {
		t.Fatal(err)
	}
	store := openStore(t, filepath.Join(t.TempDir(), "vouch.db"))
	w := &commandWorker{d: &Deps{Store: store, Forges: map[forge.Kind]forge.Client{forge.GitHub: client},
		Trust: Trust{MinPermission: forge.PermWrite}, Logger: slog.New(slog.DiscardHandler)}}
	repo := forge.Repo{Owner: "octo", Name: "widget"}
	ctx := t.Context()
	var commentID int64
	approve := func(by string, arrived time.Time, arg string) string {
		t.Helper()
		commentID++
		job := &river.Job[commandArgs]{
			JobRow: &rivertype.JobRow{ID: commentID, CreatedAt: arrived},
			Args: commandArgs{Forge: string(forge.GitHub), Repo: repoKey(repo), PR: 5, Delivery: fmt.Sprint("d", commentID),
				CommentID: commentID, Author: by, Commands: []Command{{Kind: CommandApprove, Arg: arg}}},
		}
		if err := w.Work(ctx, job); err != nil {
			t.Fatalf("Work: %v", err)
		}
		fake.mu.Lock()
		defer fake.mu.Unlock()
		return fake.comments[len(fake.comments)-1]
	}
	approved := func(head string) bool {
		_, ok, err := store.ApprovalFor(ctx, forge.GitHub, repo, 5, head)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	setHead := func(h string) {
		fake.mu.Lock()
		fake.head = h
		fake.mu.Unlock()
	}
	ask := func(id int64, head string) {
		t.Helper()
		rc := evidence.Receipt{Outcome: evidence.StopAndAsk, Reason: evidence.ReasonUntrustedAuthor, Head: head, Base: headB}
		if _, _, err := store.BeginRun(ctx, Run{ID: id, Forge: forge.GitHub, Repo: repoKey(repo), PR: 5, Head: head}); err != nil {
			t.Fatal(err)
		}
		if err := store.FinishRun(ctx, Run{ID: id, Receipt: &rc}); err != nil {
			t.Fatal(err)
		}
	}
	later := func() time.Time { return time.Now().Add(time.Second) }
	harmless := strings.Repeat("c", 40)

	steps := []struct {
		name    string
		before  func()
		by      string
		arrived func() time.Time
		arg     string
		reply   string
	}{
		{"nothing asked yet", nil, "maintainer", later, headA[:7], "nothing to approve"},
		{"a comment that predates the ask", func() { ask(100, headA) }, "maintainer", func() time.Time { return time.Now().Add(-time.Hour) }, headA[:7], "only after your comment arrived"},
		{"the outsider approves", nil, "outsider", later, headA[:7], "refused"},
		{"no head named, none in the event", nil, "maintainer", later, "", "approve by name: `/verify approve " + headA[:12] + "`"},
		// The push-back attack: vouch asked about A, then about a harmless C;
		// the maintainer reviews C and approves it by name, but the author
		// has pushed A back (a duplicate: no new job, no new question).
		{"C named while A is back", func() { ask(101, harmless) }, "maintainer", later, harmless[:7], "names a head that is not the current one"},
		{"the head moved on", func() { setHead(strings.Repeat("d", 40)) }, "maintainer", later, headA[:7], "not the current one"},
		{"the new head, never asked about", nil, "maintainer", later, "ddddddd", "nothing to approve"},
		{"A named while A is current", func() { setHead(headA) }, "maintainer", later, headA[:9], "approved head `" + headA[:12] + "`"},
	}
	for _, st := range steps {
		if st.before != nil {
			st.before()
		}
		r := approve(st.by, st.arrived(), st.arg)
		if !strings.Contains(r, st.reply) {
			t.Fatalf("%s: reply %q, want it to contain %q", st.name, r, st.reply)
		}
		if want := strings.HasPrefix(st.reply, "approved"); approved(headA) != want || approved(harmless) {
			t.Fatalf("%s: approved A %v, C %v", st.name, approved(headA), approved(harmless))
		}
	}
	jobs, err := store.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	verifies := 0
	for _, j := range jobs {
		if j.Kind == JobVerify && j.HeadSHA == headA {
			verifies++
		}
	}
	if verifies != 1 {
		t.Errorf("%d verify jobs queued for the approved head, want 1: %+v", verifies, jobs)
	}
}
