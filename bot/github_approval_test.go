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
// `/verify approve` binds to the head vouch asked about, and only when vouch
// asked before the comment arrived and the pull request still points there.
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
	approve := func(by string, arrived time.Time) string {
		t.Helper()
		commentID++
		job := &river.Job[commandArgs]{
			JobRow: &rivertype.JobRow{ID: commentID, CreatedAt: arrived},
			Args: commandArgs{Forge: string(forge.GitHub), Repo: repoKey(repo), PR: 5, Delivery: fmt.Sprint("d", commentID),
				CommentID: commentID, Author: by, Commands: []Command{{Kind: CommandApprove}}},
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

	// Nothing asked yet: nothing to approve.
	if r := approve("maintainer", time.Now()); !strings.Contains(r, "nothing to approve") || approved(headA) {
		t.Fatalf("approval before vouch asked: %q, approved %v", r, approved(headA))
	}
	// vouch asks about head A.
	ask := evidence.Receipt{Outcome: evidence.StopAndAsk, Reason: evidence.ReasonUntrustedAuthor, Head: headA, Base: headB}
	if _, _, err := store.BeginRun(ctx, Run{ID: 100, Forge: forge.GitHub, Repo: repoKey(repo), PR: 5, Head: headA}); err != nil {
		t.Fatal(err)
	}
	if err := store.FinishRun(ctx, Run{ID: 100, Receipt: &ask}); err != nil {
		t.Fatal(err)
	}
	// A comment that arrived before vouch asked does not approve.
	if r := approve("maintainer", time.Now().Add(-time.Hour)); !strings.Contains(r, "only after your comment was written") || approved(headA) {
		t.Fatalf("approval that predates the ask: %q", r)
	}
	// The outsider cannot approve.
	if r := approve("outsider", time.Now().Add(time.Second)); !strings.Contains(r, "refused") || approved(headA) {
		t.Fatalf("outsider's approval: %q", r)
	}
	// The head moved: the approval does not carry over.
	fake.mu.Lock()
	fake.head = strings.Repeat("c", 40)
	fake.mu.Unlock()
	if r := approve("maintainer", time.Now().Add(time.Second)); !strings.Contains(r, "nothing to approve") || approved(headA) || approved(fake.head) {
		t.Fatalf("approval after a push: %q", r)
	}
	// The attack a head-less event invites: vouch asked about A, then about
	// a harmless C the maintainer reviews; the author pushes A back right
	// after the maintainer's approval. The approval does not land on A.
	harmless := strings.Repeat("c", 40)
	if _, _, err := store.BeginRun(ctx, Run{ID: 101, Forge: forge.GitHub, Repo: repoKey(repo), PR: 5, Head: harmless}); err != nil {
		t.Fatal(err)
	}
	askC := evidence.Receipt{Outcome: evidence.StopAndAsk, Reason: evidence.ReasonUntrustedAuthor, Head: harmless, Base: headB}
	if err := store.FinishRun(ctx, Run{ID: 101, Receipt: &askC}); err != nil {
		t.Fatal(err)
	}
	fake.mu.Lock()
	fake.head = headA // pushed back after the comment
	fake.mu.Unlock()
	if r := approve("maintainer", time.Now().Add(time.Second)); !strings.Contains(r, "when you wrote, vouch was handling head `"+harmless[:12]+"`") || approved(headA) {
		t.Fatalf("approval meant for C landed on A: %q, approved %v", r, approved(headA))
	}
	// vouch asks about A again (the author's push back), then the
	// maintainer, having seen it, approves: that binds to A.
	if _, _, err := store.BeginRun(ctx, Run{ID: 102, Forge: forge.GitHub, Repo: repoKey(repo), PR: 5, Head: headA}); err != nil {
		t.Fatal(err)
	}
	if err := store.FinishRun(ctx, Run{ID: 102, Receipt: &ask}); err != nil {
		t.Fatal(err)
	}
	// Back on head A, a maintainer's approval after the ask binds to A.
	fake.mu.Lock()
	fake.head = headA
	fake.mu.Unlock()
	if r := approve("maintainer", time.Now().Add(time.Second)); !strings.Contains(r, "approved head `"+headA[:12]+"`") || !approved(headA) {
		t.Fatalf("maintainer's approval: %q, approved %v", r, approved(headA))
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
