package bot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"vouch.dev/vouch/forge"
	"vouch.dev/vouch/forge/forgetest"
	"vouch.dev/vouch/forge/gitea"
)

var srv forgetest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	srv.Close()
	os.Exit(code)
}

// TestTrustOnGitea reads permissions from a real Gitea, as the bot does when
// an event arrives: the owner and the admin collaborator are trusted, an
// outsider (who can read the public repository) is not, and an unknown
// login is an error, never trust.
func TestTrustOnGitea(t *testing.T) {
	g := srv.Get(t)
	client, err := gitea.NewClient(g.URL, g.Bot.Token)
	if err != nil {
		t.Fatal(err)
	}
	trust := Trust{MinPermission: forge.PermWrite}
	for _, tt := range []struct {
		user    string
		trusted bool
		err     bool
	}{
		{g.Maintainer.Login, true, false},
		{g.Bot.Login, true, false},
		{g.Outsider.Login, false, false},
		{"no-such-user-here", false, true},
	} {
		trusted, perm, err := trust.Decide(t.Context(), client, g.Repo, tt.user)
		if trusted != tt.trusted || (err != nil) != tt.err {
			t.Errorf("Decide(%q) = %v, %v, %v; want trusted %v, error %v", tt.user, trusted, perm, err, tt.trusted, tt.err)
		}
	}
	// The allowlist trusts the outsider; the forge is still asked.
	trust.Allow = []string{"OUTSIDER"}
	if ok, _, err := trust.Decide(t.Context(), client, g.Repo, g.Outsider.Login); !ok || err != nil {
		t.Errorf("Decide(outsider on the allowlist) = %v, %v", ok, err)
	}
}

// TestIntakeFromGitea: Gitea itself delivers a signed pull_request webhook
// to the intake, and the job is queued once for the head it names.
func TestIntakeFromGitea(t *testing.T) {
	g := srv.Get(t)
	f := newIntake(t)
	hits := make(chan int, 16)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		f.intake.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
		if r.Header.Get("X-Gitea-Event") == "pull_request" {
			hits <- rec.Code
		}
	}))
	t.Cleanup(ts.Close)

	api := func(method, path string, body any) map[string]any {
		t.Helper()
		b, _ := json.Marshal(body)
		req, err := http.NewRequestWithContext(t.Context(), method, g.URL+"/api/v1"+path, bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "token "+g.Maintainer.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %v", method, path, resp.StatusCode, out)
		}
		return out
	}
	repo := "/repos/" + g.Repo.FullName()
	api(http.MethodPost, repo+"/hooks", map[string]any{
		"type": "gitea", "active": true, "events": []string{"pull_request"},
		"config": map[string]string{"url": ts.URL + WebhookPath(forge.Gitea), "content_type": "json", "secret": testSecret},
	})
	branch := fmt.Sprintf("intake-%d", time.Now().UnixNano())
	head, err := g.Commit(t.Context(), g.Maintainer, g.Repo, branch, "main", "change", map[string]string{"intake.txt": branch})
	if err != nil {
		t.Fatal(err)
	}
	pr := api(http.MethodPost, repo+"/pulls", map[string]any{"title": "intake", "head": branch, "base": "main"})

	select {
	case code := <-hits:
		if code != http.StatusAccepted {
			t.Fatalf("Gitea's delivery answered %d, want 202", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("Gitea delivered no pull_request webhook; logs:\n%s", g.Logs())
	}
	jobs := f.jobs(t)
	if len(jobs) != 1 || jobs[0].HeadSHA != head || jobs[0].PR != int(pr["number"].(float64)) || jobs[0].Delivery == "" {
		t.Fatalf("jobs = %+v, want one for head %s", jobs, head)
	}
}
