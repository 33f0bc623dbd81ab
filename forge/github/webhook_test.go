package github

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"vouch.dev/vouch/forge"
)

func TestNewWebhookRefusesEmptySecret(t *testing.T) {
	for _, secret := range [][]byte{nil, {}} {
		if w, err := NewWebhook(secret); err == nil || w != nil {
			t.Errorf("NewWebhook(%q) = %v, %v; want an error", secret, w, err)
		}
	}
}

// jsonAt reads a dotted path ("pull_request.head.sha") from a JSON body,
// without go-github, so the test compares events to what the payload holds.
func jsonAt(tb testing.TB, body []byte, path string) any {
	tb.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		tb.Fatal(err)
	}
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			tb.Fatalf("%s: %q is not an object", path, k)
		}
		v = m[k]
	}
	return v
}

func jsonString(tb testing.TB, body []byte, path string) string {
	tb.Helper()
	s, _ := jsonAt(tb, body, path).(string)
	return s
}

func TestParseFixtures(t *testing.T) {
	hello := forge.Repo{Owner: "Codertocat", Name: "Hello-World", CloneURL: "https://github.com/Codertocat/Hello-World.git"}
	pr := func(action forge.Action) *forge.Event {
		return &forge.Event{
			Forge: forge.GitHub, Delivery: "72d3162e-cc78-11e3-81ab-4c9367dc0958",
			Type: forge.EventPullRequest, Action: action, Repo: hello, Number: 2,
			BaseSHA: shaA, HeadSHA: shaB, BaseRef: "master", HeadRepo: hello,
			Author: "Codertocat", Sender: "Codertocat",
		}
	}
	tests := []struct {
		file, event string
		want        *forge.Event
		wantErr     error
	}{
		{"pull_request_opened.payload.json", "pull_request", pr(forge.ActionOpened), nil},
		{"pull_request_opened.with-null-body.json", "pull_request", pr(forge.ActionOpened), nil},
		{"pull_request_reopened.payload.json", "pull_request", pr(forge.ActionReopened), nil},
		{"pull_request_synchronize.payload.json", "pull_request", pr(forge.ActionSynchronized), nil},
		{"pull_request_closed.payload.json", "pull_request", pr(forge.ActionClosed), nil},
		{"pull_request_labeled.payload.json", "pull_request", nil, forge.ErrIgnored},
		{"issue_comment_created.payload.json", "issue_comment", nil, forge.ErrIgnored}, // a plain issue
		{"issue_comment_created.with-installation.payload.json", "issue_comment", nil, forge.ErrIgnored},
		{"issue_comment_edited.payload.json", "issue_comment", nil, forge.ErrIgnored},
		{"ping_payload.json", "ping", nil, forge.ErrIgnored},
		{"ping_with-app_id.payload.json", "ping", nil, forge.ErrIgnored},
		{"push_payload.json", "push", nil, forge.ErrIgnored},
	}
	w, err := NewWebhook(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			body := fixture(t, tt.file)
			got, err := w.Parse(delivery(tt.event, body), body)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("Parse(%s) error = %v, want %v", tt.file, err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse(%s) (-want +got):\n%s", tt.file, diff)
			}
			if got == nil {
				return
			}
			// The same fields, read straight from the JSON.
			for _, f := range []struct{ got, path string }{
				{got.BaseSHA, "pull_request.base.sha"},
				{got.HeadSHA, "pull_request.head.sha"},
				{got.BaseRef, "pull_request.base.ref"},
				{got.Repo.Owner, "repository.owner.login"},
				{got.Repo.Name, "repository.name"},
				{got.Repo.CloneURL, "repository.clone_url"},
				{got.Author, "pull_request.user.login"},
				{got.Sender, "sender.login"},
				{string(got.Action), "action"},
			} {
				want := jsonString(t, body, f.path)
				if f.path == "action" && want == "synchronize" {
					want = string(forge.ActionSynchronized)
				}
				if f.got != want {
					t.Errorf("%s = %q in the event, %q in the payload", f.path, f.got, want)
				}
			}
			if n := jsonAt(t, body, "number").(float64); got.Number != int(n) {
				t.Errorf("Number = %d, payload has %v", got.Number, n)
			}
			if m := jsonAt(t, body, "pull_request.merged").(bool); got.Merged != m {
				t.Errorf("Merged = %v, payload has %v", got.Merged, m)
			}
			if tt.event == "pull_request" && jsonString(t, body, "action") == "synchronize" {
				if after := jsonString(t, body, "after"); got.HeadSHA != after {
					t.Errorf("synchronize HeadSHA = %s, payload's after = %s", got.HeadSHA, after)
				}
			}
		})
	}
}

func TestParseCommentOnPullRequest(t *testing.T) {
	body, err := os.ReadFile(filepath.Join("testdata", "issue_comment_created.on-pull-request.json"))
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWebhook(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	got, err := w.Parse(delivery("issue_comment", body), body)
	if err != nil {
		t.Fatalf("Parse = %v", err)
	}
	want := &forge.Event{
		Forge: forge.GitHub, Delivery: "72d3162e-cc78-11e3-81ab-4c9367dc0958",
		Type:   forge.EventComment,
		Repo:   forge.Repo{Owner: "Codertocat", Name: "Hello-World", CloneURL: "https://github.com/Codertocat/Hello-World.git"},
		Number: 1, Author: "Codertocat", Sender: "Codertocat",
		Comment: &forge.Comment{ID: 492700400, Author: "Codertocat", Body: "/verify", CreatedAt: time.Date(2019, 5, 15, 15, 20, 21, 0, time.UTC)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
	if got.BaseSHA != "" || got.HeadSHA != "" {
		t.Errorf("comment event carries SHAs %q %q; GitHub sends none", got.BaseSHA, got.HeadSHA)
	}

	for _, login := range []string{"Codertocat", "codertocat"} {
		w.BotLogin = login
		if ev, err := w.Parse(delivery("issue_comment", body), body); !errors.Is(err, forge.ErrIgnored) || ev != nil {
			t.Errorf("bot's own comment (BotLogin %q): Parse = %v, %v; want ErrIgnored", login, ev, err)
		}
	}
}

// mutate decodes a fixture, lets f change it, and encodes it again.
func mutate(tb testing.TB, body []byte, f func(m map[string]any)) []byte {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		tb.Fatal(err)
	}
	f(m)
	out, err := json.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

func TestParsePullRequestVariants(t *testing.T) {
	w, err := NewWebhook(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	closed := fixture(t, "pull_request_closed.payload.json")
	opened := fixture(t, "pull_request_opened.payload.json")
	pull := func(m map[string]any) map[string]any { return m["pull_request"].(map[string]any) }
	head := func(m map[string]any) map[string]any { return pull(m)["head"].(map[string]any) }

	tests := []struct {
		name    string
		body    []byte
		check   func(*forge.Event) bool
		wantErr error
	}{
		{"merged", bytes.Replace(closed, []byte(`"merged": false`), []byte(`"merged": true`), 1),
			func(e *forge.Event) bool { return e.Action == forge.ActionClosed && e.Merged }, nil},
		{"from a fork", mutate(t, opened, func(m map[string]any) {
			r := head(m)["repo"].(map[string]any)
			r["owner"].(map[string]any)["login"] = "mallory"
			r["clone_url"] = "https://github.com/mallory/Hello-World.git"
		}), func(e *forge.Event) bool {
			return e.HeadRepo.Owner == "mallory" && e.Repo.Owner == "Codertocat" &&
				e.HeadRepo.CloneURL == "https://github.com/mallory/Hello-World.git"
		}, nil},
		{"deleted fork", mutate(t, opened, func(m map[string]any) { head(m)["repo"] = nil }),
			func(e *forge.Event) bool { return e.HeadRepo == (forge.Repo{}) && e.HeadSHA == shaB }, nil},
		{"short head sha", mutate(t, opened, func(m map[string]any) { head(m)["sha"] = "ec26c3e" }), nil, forge.ErrMalformed},
		{"no pull_request", []byte(`{"action":"opened","number":2}`), nil, forge.ErrMalformed},
		{"no repository", mutate(t, opened, func(m map[string]any) {
			delete(m, "repository")
			delete(pull(m)["base"].(map[string]any), "repo")
		}), nil, forge.ErrMalformed},
		{"edited", mutate(t, opened, func(m map[string]any) { m["action"] = "edited" }), nil, forge.ErrIgnored},
		{"null", []byte(`null`), nil, forge.ErrIgnored},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := w.Parse(delivery("pull_request", tt.body), tt.body)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || got != nil {
					t.Fatalf("Parse = %+v, %v; want %v", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || !tt.check(got) {
				t.Fatalf("Parse = %+v, %v", got, err)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	pr := fixture(t, "pull_request_opened.payload.json")
	big := bytes.Repeat([]byte(" "), forge.MaxWebhookBody+1)
	copy(big, pr)
	with := func(body []byte, f func(h http.Header)) http.Header {
		h := delivery("pull_request", body)
		f(h)
		return h
	}
	giteaSig := sign(testSecret, pr)
	tests := []struct {
		name       string
		header     http.Header
		body       []byte
		wantErr    error
		wantStatus int
	}{
		{"forged body", delivery("pull_request", pr), bytes.Replace(pr, []byte(shaB), []byte(shaA), 1), forge.ErrBadSignature, 401},
		{"missing signature", with(pr, func(h http.Header) { h.Del("X-Hub-Signature-256") }), pr, forge.ErrNoSignature, 401},
		{"empty signature", with(pr, func(h http.Header) { h.Set("X-Hub-Signature-256", "") }), pr, forge.ErrNoSignature, 401},
		{"wrong secret", with(pr, func(h http.Header) { h.Set("X-Hub-Signature-256", sign([]byte("not the secret"), pr)) }), pr, forge.ErrBadSignature, 401},
		{"sha1 only", with(pr, func(h http.Header) {
			h.Del("X-Hub-Signature-256")
			h.Set("X-Hub-Signature", "sha1=0123456789abcdef0123456789abcdef01234567")
		}), pr, forge.ErrNoSignature, 401},
		{"sha1 label on a sha256 header", with(pr, func(h http.Header) {
			h.Set("X-Hub-Signature-256", "sha1="+strings.TrimPrefix(sign(testSecret, pr), "sha256="))
		}), pr, forge.ErrBadSignature, 401},
		{"bare hex", with(pr, func(h http.Header) {
			h.Set("X-Hub-Signature-256", strings.TrimPrefix(sign(testSecret, pr), "sha256="))
		}), pr, forge.ErrBadSignature, 401},
		{"not hex", with(pr, func(h http.Header) { h.Set("X-Hub-Signature-256", "sha256=zz") }), pr, forge.ErrBadSignature, 401},
		{"truncated mac", with(pr, func(h http.Header) { h.Set("X-Hub-Signature-256", sign(testSecret, pr)[:40]) }), pr, forge.ErrBadSignature, 401},
		{"two signatures", with(pr, func(h http.Header) { h.Add("X-Hub-Signature-256", sign(testSecret, pr)) }), pr, forge.ErrBadSignature, 401},
		{"oversized", delivery("pull_request", big), big, forge.ErrTooLarge, 413},
		{"not JSON", delivery("pull_request", []byte("<html>hi</html>")), []byte("<html>hi</html>"), forge.ErrMalformed, 400},
		{"truncated JSON", delivery("pull_request", pr[:len(pr)/2]), pr[:len(pr)/2], forge.ErrMalformed, 400},
		{"comment not JSON", delivery("issue_comment", []byte("action=created")), []byte("action=created"), forge.ErrMalformed, 400},
		{"unknown event", with(pr, func(h http.Header) { h.Set("X-GitHub-Event", "pull_request_party") }), pr, forge.ErrUnknownEvent, 400},
		{"empty event", with(pr, func(h http.Header) { h.Del("X-GitHub-Event") }), pr, forge.ErrUnknownEvent, 400},
		{"gitea delivery", http.Header{
			"Content-Type":      {"application/json"},
			"X-Gitea-Delivery":  {"b5bce7b6-1ef3-4a93-9fcb-2b5d1c2f0f0e"},
			"X-Gitea-Event":     {"pull_request"},
			"X-Gitea-Signature": {strings.TrimPrefix(giteaSig, "sha256=")},
		}, pr, forge.ErrNoSignature, 401},
	}
	w, err := NewWebhook(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := w.Parse(tt.header, tt.body)
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("Parse error = %v, want %v", err, tt.wantErr)
			}
			if ev != nil {
				t.Errorf("Parse produced an event: %+v", ev)
			}
			if got := forge.StatusOf(err); got != tt.wantStatus {
				t.Errorf("StatusOf(%v) = %d, want %d", err, got, tt.wantStatus)
			}
		})
	}
}

// TestFixturesMatchShared keeps testdata/github-webhooks byte-identical to
// the shared fixtures when they are beside the repository.
func TestFixturesMatchShared(t *testing.T) {
	shared := filepath.Join("..", "..", "..", "shared", "fixtures", "github-webhooks")
	names, err := filepath.Glob(filepath.Join(shared, "*.json"))
	if err != nil || len(names) == 0 {
		// A drift check only: testdata/ holds the same bytes, which the
		// parser tests use; where CI puts shared/ is not this test's to know.
		t.Skipf("no shared fixtures at %s", shared)
	}
	for _, n := range names {
		want, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		if got := fixture(t, filepath.Base(n)); !bytes.Equal(got, want) {
			t.Errorf("testdata copy of %s differs from shared/", filepath.Base(n))
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []struct{ event, file string }{
		{"pull_request", "pull_request_opened.payload.json"},
		{"pull_request", "pull_request_synchronize.payload.json"},
		{"pull_request", "pull_request_closed.payload.json"},
		{"issue_comment", "issue_comment_created.payload.json"},
		{"ping", "ping_payload.json"},
	} {
		f.Add(s.event, "", fixture(f, s.file), true)
	}
	comment, err := os.ReadFile(filepath.Join("testdata", "issue_comment_created.on-pull-request.json"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add("issue_comment", "", comment, true)
	f.Add("pull_request", "sha256="+hex.EncodeToString(make([]byte, 32)), []byte(`{"action":"opened"}`), false)
	f.Add("", "sha1=00", []byte(`{}`), false)

	w, err := NewWebhook(testSecret)
	if err != nil {
		f.Fatal(err)
	}
	w.BotLogin = "vouch-bot"
	f.Fuzz(func(t *testing.T, event, sig string, body []byte, signed bool) {
		h := http.Header{}
		h.Set("X-GitHub-Event", event)
		h.Set("X-GitHub-Delivery", "fuzz")
		if signed {
			sig = sign(testSecret, body)
		}
		h.Set("X-Hub-Signature-256", sig)
		ev, err := w.Parse(h, body)
		if (ev == nil) == (err == nil) {
			t.Fatalf("Parse = %v, %v: want exactly one of event, error", ev, err)
		}
		if err != nil {
			switch forge.StatusOf(err) {
			case http.StatusOK, http.StatusUnauthorized, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			default:
				t.Fatalf("Parse error %v maps to %d", err, forge.StatusOf(err))
			}
			return
		}
		if !signed {
			t.Fatalf("unsigned body produced an event: %+v", ev)
		}
		if ev.Repo.Owner == "" || ev.Repo.Name == "" || ev.Number <= 0 {
			t.Fatalf("event without repo or number: %+v", ev)
		}
		switch ev.Type {
		case forge.EventPullRequest:
			if !isSHA(ev.BaseSHA) || !isSHA(ev.HeadSHA) || ev.Comment != nil {
				t.Fatalf("pull request event: %+v", ev)
			}
		case forge.EventComment:
			if ev.Comment == nil || ev.Comment.ID <= 0 || strings.EqualFold(ev.Comment.Author, w.BotLogin) {
				t.Fatalf("comment event: %+v", ev)
			}
		default:
			t.Fatalf("event type %q", ev.Type)
		}
	})
}

func BenchmarkParsePullRequest(b *testing.B) {
	body := fixture(b, "pull_request_opened.payload.json")
	h := delivery("pull_request", body)
	w, err := NewWebhook(testSecret)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := w.Parse(h, body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerify is the HMAC check alone, to read BenchmarkParsePullRequest against.
func BenchmarkVerify(b *testing.B) {
	body := fixture(b, "pull_request_opened.payload.json")
	h := delivery("pull_request", body)
	w, err := NewWebhook(testSecret)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := w.verify(h, body); err != nil {
			b.Fatal(err)
		}
	}
}
