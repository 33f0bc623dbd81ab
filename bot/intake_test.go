package bot

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"vouch.dev/vouch/forge"
	"vouch.dev/vouch/forge/gitea"
	"vouch.dev/vouch/forge/github"
)

const testSecret = "intake-secret"

// giteaPayload reads a delivery Gitea really sent (forge/gitea/testdata).
func giteaPayload(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("..", "forge", "gitea", "testdata", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// giteaRequest is a delivery to /webhook/gitea, signed with secret.
func giteaRequest(event, eventType, delivery string, body []byte, secret string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/webhook/gitea", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-Gitea-Event", event)
	r.Header.Set("X-Gitea-Event-Type", eventType)
	r.Header.Set("X-Gitea-Delivery", delivery)
	r.Header.Set("X-Gitea-Signature", gitea.Signature([]byte(secret), body))
	return r
}

type intakeFixture struct {
	store  *Store
	intake *Intake
}

func newIntake(tb testing.TB) intakeFixture {
	tb.Helper()
	gp, err := gitea.NewWebhook([]byte(testSecret))
	if err != nil {
		tb.Fatal(err)
	}
	gp.BotLogin = "vouch-bot"
	hp, err := github.NewWebhook([]byte(testSecret))
	if err != nil {
		tb.Fatal(err)
	}
	store := openStore(tb, filepath.Join(tb.TempDir(), "vouch.db"))
	return intakeFixture{store: store, intake: &Intake{
		Parsers: map[forge.Kind]forge.WebhookParser{forge.Gitea: gp, forge.GitHub: hp},
		Queue:   store,
		Served:  ServedSet([]RepoRef{{Forge: forge.Gitea, Owner: "maintainer", Name: "project"}}),
	}}
}

func (f intakeFixture) post(tb testing.TB, r *http.Request) (int, string) {
	tb.Helper()
	w := httptest.NewRecorder()
	f.intake.ServeHTTP(w, r)
	return w.Code, w.Body.String()
}

func (f intakeFixture) jobs(tb testing.TB) []Job {
	tb.Helper()
	jobs, err := f.store.Jobs(tb.Context())
	if err != nil {
		tb.Fatal(err)
	}
	return jobs
}

func TestIntakeReplayedDeliveryQueuesOnce(t *testing.T) {
	f := newIntake(t)
	body := giteaPayload(t, "pull_request_opened.json")
	for i, want := range []int{http.StatusAccepted, http.StatusOK, http.StatusOK} {
		code, msg := f.post(t, giteaRequest("pull_request", "pull_request", "d-1", body, testSecret))
		if code != want {
			t.Errorf("post #%d: %d %q, want %d", i+1, code, msg, want)
		}
	}
	jobs := f.jobs(t)
	if len(jobs) != 1 {
		t.Fatalf("jobs = %+v, want one", jobs)
	}
	want := Job{Kind: JobVerify, Forge: forge.Gitea, Repo: forge.Repo{Owner: "maintainer", Name: "project"}, PR: 1, HeadSHA: headA, Delivery: "d-1"}
	if jobs[0].Kind != want.Kind || jobs[0].Repo != want.Repo || jobs[0].PR != 1 || jobs[0].HeadSHA != headA || jobs[0].Delivery != "d-1" {
		t.Errorf("job = %+v, want %+v", jobs[0], want)
	}

	// A push: a new head, a new job.
	code, msg := f.post(t, giteaRequest("pull_request", "pull_request_sync", "d-2", giteaPayload(t, "pull_request_synchronized.json"), testSecret))
	if code != http.StatusAccepted {
		t.Errorf("synchronized: %d %q, want 202", code, msg)
	}
	// A verify command in a comment: a command job.
	code, msg = f.post(t, giteaRequest("issue_comment", "pull_request_comment", "d-3", giteaPayload(t, "pull_request_comment.json"), testSecret))
	if code != http.StatusAccepted {
		t.Errorf("comment: %d %q, want 202", code, msg)
	}
	jobs = f.jobs(t)
	if len(jobs) != 3 || jobs[1].HeadSHA != headB || jobs[2].Kind != JobCommand || len(jobs[2].Commands) != 1 || jobs[2].Commands[0].Kind != CommandVerify {
		t.Errorf("jobs = %+v", jobs)
	}
}

func TestIntakeRejects(t *testing.T) {
	opened := giteaPayload(t, "pull_request_opened.json")
	githubSigned := func(r *http.Request, body []byte) {
		mac := hmac.New(sha256.New, []byte(testSecret))
		mac.Write(body)
		r.Header.Set("X-GitHub-Event", "pull_request")
		r.Header.Set("X-GitHub-Delivery", "gh-1")
		r.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	}
	tests := []struct {
		name string
		req  func() *http.Request
		code int
	}{
		{"forged signature", func() *http.Request {
			return giteaRequest("pull_request", "pull_request", "d", opened, "not-the-secret")
		}, http.StatusUnauthorized},
		{"no signature", func() *http.Request {
			r := giteaRequest("pull_request", "pull_request", "d", opened, testSecret)
			r.Header.Del("X-Gitea-Signature")
			return r
		}, http.StatusUnauthorized},
		{"body changed after signing", func() *http.Request {
			r := giteaRequest("pull_request", "pull_request", "d", opened, testSecret)
			r.Body = io.NopCloser(bytes.NewReader(bytes.Replace(opened, []byte(headA), []byte(headB), 1)))
			return r
		}, http.StatusUnauthorized},
		{"GitHub-signed delivery to the Gitea endpoint", func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, "/webhook/gitea", bytes.NewReader(opened))
			githubSigned(r, opened)
			return r
		}, http.StatusUnauthorized},
		{"Gitea delivery (with its GitHub headers) to the GitHub endpoint", func() *http.Request {
			r := giteaRequest("pull_request", "pull_request", "d", opened, testSecret)
			r.URL.Path = "/webhook/github"
			r.Header.Set("X-GitHub-Event", "pull_request")
			return r
		}, http.StatusUnauthorized},
		{"oversized body", func() *http.Request {
			big := append(bytes.Repeat([]byte(" "), forge.MaxWebhookBody), opened...)
			return giteaRequest("pull_request", "pull_request", "d", big, testSecret)
		}, http.StatusRequestEntityTooLarge},
		{"oversized by Content-Length", func() *http.Request {
			r := giteaRequest("pull_request", "pull_request", "d", opened, testSecret)
			r.ContentLength = forge.MaxWebhookBody + 1
			return r
		}, http.StatusRequestEntityTooLarge},
		{"malformed signed body", func() *http.Request {
			return giteaRequest("pull_request", "pull_request", "d", []byte("{not json"), testSecret)
		}, http.StatusBadRequest},
		{"unknown event", func() *http.Request {
			return giteaRequest("telepathy", "", "d", opened, testSecret)
		}, http.StatusBadRequest},
		{"GET", func() *http.Request {
			return httptest.NewRequest(http.MethodGet, "/webhook/gitea", nil)
		}, http.StatusMethodNotAllowed},
		{"unknown forge", func() *http.Request {
			r := giteaRequest("pull_request", "pull_request", "d", opened, testSecret)
			r.URL.Path = "/webhook/gitlab"
			return r
		}, http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newIntake(t)
			code, msg := f.post(t, tt.req())
			if code != tt.code {
				t.Errorf("status %d %q, want %d", code, msg, tt.code)
			}
			if len(msg) > 64 || strings.Contains(msg, "maintainer") || strings.Contains(msg, testSecret) {
				t.Errorf("reply %q: want a short text that quotes nothing", msg)
			}
			if jobs := f.jobs(t); len(jobs) != 0 {
				t.Errorf("jobs = %+v, want none", jobs)
			}
		})
	}
}

func TestIntakeIgnores(t *testing.T) {
	// withJSON edits a real delivery; the edited body is signed afresh.
	withJSON := func(name string, edit func(map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(giteaPayload(t, name), &m); err != nil {
			t.Fatal(err)
		}
		edit(m)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	commentBody := func(body string) func(map[string]any) {
		return func(m map[string]any) { m["comment"].(map[string]any)["body"] = body }
	}
	tests := []struct {
		name             string
		event, eventType string
		body             []byte
	}{
		{"closed", "pull_request", "pull_request", giteaPayload(t, "pull_request_closed_merged.json")},
		{"comment on an issue", "issue_comment", "issue_comment", giteaPayload(t, "issue_comment.json")},
		{"the bot's own comment", "issue_comment", "pull_request_comment", giteaPayload(t, "pull_request_comment_bot.json")},
		{"comment without commands", "issue_comment", "pull_request_comment", withJSON("pull_request_comment.json", commentBody("nice work"))},
		{"command in a fence", "issue_comment", "pull_request_comment", withJSON("pull_request_comment.json", commentBody("```\n/verify\n```"))},
		{"edited comment", "issue_comment", "pull_request_comment", withJSON("pull_request_comment.json", func(m map[string]any) { m["action"] = "edited" })},
		{"push", "push", "push", []byte(`{"ref":"refs/heads/main"}`)},
		{"repository not served", "pull_request", "pull_request", withJSON("pull_request_opened.json", func(m map[string]any) { m["repository"].(map[string]any)["name"] = "elsewhere" })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !bytes.Contains(tt.body, []byte("{")) {
				t.Fatal("empty fixture")
			}
			f := newIntake(t)
			code, msg := f.post(t, giteaRequest(tt.event, tt.eventType, "d-"+tt.name, tt.body, testSecret))
			if code != http.StatusOK {
				t.Errorf("status %d %q, want 200", code, msg)
			}
			if jobs := f.jobs(t); len(jobs) != 0 {
				t.Errorf("jobs = %+v, want none", jobs)
			}
		})
	}
}

// failingQueue fails every Enqueue: the sender must be told to retry.
type failingQueue struct{}

func (failingQueue) Enqueue(context.Context, Job) (bool, error) { return false, io.ErrUnexpectedEOF }

func TestIntakeQueueDown(t *testing.T) {
	f := newIntake(t)
	f.intake.Queue = failingQueue{}
	code, msg := f.post(t, giteaRequest("pull_request", "pull_request", "d", giteaPayload(t, "pull_request_opened.json"), testSecret))
	if code != http.StatusServiceUnavailable || strings.Contains(msg, "EOF") {
		t.Errorf("status %d %q, want 503 without internals", code, msg)
	}
}
