package gitea

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"vouch.dev/vouch/forge"
)

var testSecret = []byte("s3cret-for-tests")

// fixture reads a delivery body captured from the real Gitea server by
// TestDeliveries -capture (forge/gitea/testdata).
func fixture(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		tb.Fatalf("fixture: %v", err)
	}
	return b
}

// signed returns Gitea's headers for a delivery of body.
func signed(secret, body []byte, event, eventType string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-Gitea-Delivery", "c7a9e1d2-0000-4000-8000-000000000001")
	h.Set("X-Gitea-Event", event)
	h.Set("X-Gitea-Event-Type", eventType)
	h.Set("X-Gitea-Signature", Signature(secret, body))
	// Gitea sends these too; the parser must not be swayed by them.
	h.Set("X-GitHub-Event", event)
	h.Set("X-Hub-Signature-256", "sha256="+Signature(secret, body))
	return h
}

func newTestWebhook(tb testing.TB) *Webhook {
	tb.Helper()
	w, err := NewWebhook(testSecret)
	if err != nil {
		tb.Fatal(err)
	}
	w.BotLogin = "vouch-bot"
	return w
}

func TestNewWebhookRefusesEmptySecret(t *testing.T) {
	for _, s := range [][]byte{nil, {}} {
		if _, err := NewWebhook(s); err == nil {
			t.Errorf("NewWebhook(%q) = nil error, want refusal", s)
		}
	}
}

func TestParseCapturedDeliveries(t *testing.T) {
	w := newTestWebhook(t)
	tests := []struct {
		name, file, event, eventType string
		want                         *forge.Event
	}{
		{
			name: "opened", file: "pull_request_opened.json", event: "pull_request", eventType: "pull_request",
			want: &forge.Event{Type: forge.EventPullRequest, Action: forge.ActionOpened},
		},
		{
			name: "synchronized", file: "pull_request_synchronized.json", event: "pull_request", eventType: "pull_request_sync",
			want: &forge.Event{Type: forge.EventPullRequest, Action: forge.ActionSynchronized},
		},
		{
			name: "merged", file: "pull_request_closed_merged.json", event: "pull_request", eventType: "pull_request",
			want: &forge.Event{Type: forge.EventPullRequest, Action: forge.ActionClosed, Merged: true},
		},
		{
			name: "comment", file: "pull_request_comment.json", event: "issue_comment", eventType: "pull_request_comment",
			want: &forge.Event{Type: forge.EventComment},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := fixture(t, tt.file)
			ev, err := w.Parse(signed(testSecret, body, tt.event, tt.eventType), body)
			if err != nil {
				t.Fatalf("Parse(%s) error = %v", tt.file, err)
			}
			got := &forge.Event{Type: ev.Type, Action: ev.Action, Merged: ev.Merged}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse(%s) (-want +got):\n%s", tt.file, diff)
			}
			if ev.Forge != forge.Gitea || ev.Delivery == "" || ev.Number <= 0 || ev.Repo.Owner == "" ||
				ev.Repo.Name == "" || !isObjectID(ev.BaseSHA) || !isObjectID(ev.HeadSHA) || ev.Sender == "" || ev.Author == "" {
				t.Errorf("Parse(%s) = %+v, want forge, delivery, number, repo, SHAs, sender and author", tt.file, ev)
			}
			if tt.want.Type == forge.EventComment && (ev.Comment == nil || ev.Comment.ID == 0 || ev.Comment.Body == "") {
				t.Errorf("Parse(%s).Comment = %+v, want id and body", tt.file, ev.Comment)
			}
		})
	}
}

func TestParseIgnores(t *testing.T) {
	w := newTestWebhook(t)
	prComment := fixture(t, "pull_request_comment.json")
	tests := []struct {
		name, event, eventType string
		body                   []byte
	}{
		{"plain issue comment", "issue_comment", "issue_comment", fixture(t, "issue_comment.json")},
		{"edited comment", "issue_comment", "pull_request_comment", bytes.Replace(prComment, []byte(`"action": "created"`), []byte(`"action": "edited"`), 1)},
		{"deleted comment", "issue_comment", "pull_request_comment", bytes.Replace(prComment, []byte(`"action": "created"`), []byte(`"action": "deleted"`), 1)},
		{"bot's own comment", "issue_comment", "pull_request_comment", fixture(t, "pull_request_comment_bot.json")},
		{"label change", "pull_request", "pull_request_label", []byte(`{"action":"label_updated","number":1}`)},
		{"edited pull request", "pull_request", "pull_request", []byte(`{"action":"edited","number":1}`)},
		{"push", "push", "push", []byte(`{"ref":"refs/heads/main"}`)},
		{"review comment", "pull_request_comment", "pull_request_review_comment", []byte(`{"action":"reviewed"}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := w.Parse(signed(testSecret, tt.body, tt.event, tt.eventType), tt.body)
			if !errors.Is(err, forge.ErrIgnored) || ev != nil {
				t.Fatalf("Parse = %v, %v; want nil, ErrIgnored", ev, err)
			}
			if got := forge.StatusOf(err); got != http.StatusOK {
				t.Errorf("StatusOf(%v) = %d, want 200", err, got)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	w := newTestWebhook(t)
	body := fixture(t, "pull_request_opened.json")
	good := func() http.Header { return signed(testSecret, body, "pull_request", "pull_request") }
	tests := []struct {
		name   string
		header func() http.Header
		body   []byte
		want   error
		status int
	}{
		{
			name: "forged signature",
			header: func() http.Header {
				h := good()
				h.Set("X-Gitea-Signature", strings.Repeat("ab", 32))
				return h
			},
			body: body, want: forge.ErrBadSignature, status: http.StatusUnauthorized,
		},
		{
			name: "signature not hex",
			header: func() http.Header {
				h := good()
				h.Set("X-Gitea-Signature", "sha256="+Signature(testSecret, body))
				return h
			},
			body: body, want: forge.ErrBadSignature, status: http.StatusUnauthorized,
		},
		{
			name:   "wrong secret",
			header: func() http.Header { return signed([]byte("another secret"), body, "pull_request", "pull_request") },
			body:   body, want: forge.ErrBadSignature, status: http.StatusUnauthorized,
		},
		{
			name: "body changed after signing",
			header: func() http.Header {
				return good()
			},
			body: bytes.Replace(body, []byte(`"opened"`), []byte(`"closed"`), 1), want: forge.ErrBadSignature, status: http.StatusUnauthorized,
		},
		{
			name: "missing signature",
			header: func() http.Header {
				h := good()
				h.Del("X-Gitea-Signature")
				h.Del("X-Hub-Signature-256")
				return h
			},
			body: body, want: forge.ErrNoSignature, status: http.StatusUnauthorized,
		},
		{
			name: "GitHub delivery with X-Hub-Signature-256 only",
			header: func() http.Header {
				h := http.Header{}
				h.Set("X-GitHub-Event", "pull_request")
				h.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
				h.Set("X-Hub-Signature-256", "sha256="+Signature(testSecret, body))
				return h
			},
			body: body, want: forge.ErrNoSignature, status: http.StatusUnauthorized,
		},
		{
			name: "Forgejo signature wins and is wrong",
			header: func() http.Header {
				h := good()
				h.Set("X-Forgejo-Signature", Signature([]byte("nope"), body))
				return h
			},
			body: body, want: forge.ErrBadSignature, status: http.StatusUnauthorized,
		},
		{
			name:   "oversized body",
			header: good,
			body:   make([]byte, forge.MaxWebhookBody+1), want: forge.ErrTooLarge, status: http.StatusRequestEntityTooLarge,
		},
		{
			name:   "not JSON",
			header: func() http.Header { return signed(testSecret, []byte("<xml/>"), "pull_request", "pull_request") },
			body:   []byte("<xml/>"), want: forge.ErrMalformed, status: http.StatusBadRequest,
		},
		{
			name:   "not JSON, ignorable event",
			header: func() http.Header { return signed(testSecret, []byte("{"), "push", "push") },
			body:   []byte("{"), want: forge.ErrMalformed, status: http.StatusBadRequest,
		},
		{
			name: "JSON without a repository",
			header: func() http.Header {
				return signed(testSecret, []byte(`{"action":"opened","number":1,"pull_request":{}}`), "pull_request", "pull_request")
			},
			body: []byte(`{"action":"opened","number":1,"pull_request":{}}`), want: forge.ErrMalformed, status: http.StatusBadRequest,
		},
		{
			name:   "unknown event",
			header: func() http.Header { return signed(testSecret, body, "telepathy", "telepathy") },
			body:   body, want: forge.ErrUnknownEvent, status: http.StatusBadRequest,
		},
		{
			name: "no event header",
			header: func() http.Header {
				h := good()
				h.Del("X-Gitea-Event")
				h.Del("X-Gitea-Event-Type")
				return h
			},
			body: body, want: forge.ErrUnknownEvent, status: http.StatusBadRequest,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := w.Parse(tt.header(), tt.body)
			if !errors.Is(err, tt.want) || ev != nil {
				t.Fatalf("Parse = %v, %v; want nil, %v", ev, err, tt.want)
			}
			if got := forge.StatusOf(err); got != tt.status {
				t.Errorf("StatusOf(%v) = %d, want %d", err, got, tt.status)
			}
		})
	}
}

// TestParseForgejo: Forgejo's own headers are read first.
func TestParseForgejo(t *testing.T) {
	w := newTestWebhook(t)
	body := fixture(t, "pull_request_opened.json")
	h := http.Header{}
	h.Set("X-Forgejo-Signature", Signature(testSecret, body))
	h.Set("X-Forgejo-Event", "pull_request")
	h.Set("X-Forgejo-Event-Type", "pull_request")
	h.Set("X-Forgejo-Delivery", "forgejo-delivery")
	// Stale Gitea headers lose to Forgejo's.
	h.Set("X-Gitea-Signature", "00")
	h.Set("X-Gitea-Event", "push")
	ev, err := w.Parse(h, body)
	if err != nil {
		t.Fatalf("Parse = %v", err)
	}
	if ev.Delivery != "forgejo-delivery" || ev.Action != forge.ActionOpened {
		t.Errorf("Parse = delivery %q action %q, want forgejo-delivery opened", ev.Delivery, ev.Action)
	}
}

// TestVerifyBeforeParse: a bad signature is reported even when the body
// would not parse, so nothing reads unverified bytes.
func TestVerifyBeforeParse(t *testing.T) {
	w := newTestWebhook(t)
	h := signed([]byte("wrong"), []byte("not json"), "telepathy", "")
	if _, err := w.Parse(h, []byte("not json")); !errors.Is(err, forge.ErrBadSignature) {
		t.Errorf("Parse = %v, want ErrBadSignature", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"pull_request_opened.json", "pull_request_synchronized.json",
		"pull_request_closed_merged.json", "pull_request_comment.json", "issue_comment.json"} {
		body := fixture(f, name)
		f.Add(body, "pull_request", "pull_request")
		f.Add(body, "issue_comment", "pull_request_comment")
	}
	f.Add([]byte(`{"action":"opened","number":1,"pull_request":{"base":{"sha":"x"},"head":null},"repository":{"name":"a","owner":{"login":"b"}}}`), "pull_request", "")
	f.Add([]byte("null"), "issue_comment", "")
	w, err := NewWebhook(testSecret)
	if err != nil {
		f.Fatal(err)
	}
	w.BotLogin = "vouch-bot"
	f.Fuzz(func(t *testing.T, body []byte, event, eventType string) {
		h := http.Header{}
		h.Set("X-Gitea-Event", event)
		h.Set("X-Gitea-Event-Type", eventType)
		// Unsigned: refused before parsing, whatever the bytes.
		if ev, err := w.Parse(h, body); ev != nil || !errors.Is(err, forge.ErrNoSignature) {
			t.Fatalf("unsigned Parse = %v, %v", ev, err)
		}
		h.Set("X-Gitea-Signature", Signature(testSecret, body))
		ev, err := w.Parse(h, body)
		if (ev == nil) == (err == nil) {
			t.Fatalf("Parse = %v, %v: want exactly one of event and error", ev, err)
		}
		if err != nil {
			if code := forge.StatusOf(err); code == http.StatusInternalServerError {
				t.Fatalf("Parse error %v maps to 500", err)
			}
			return
		}
		if ev.Number <= 0 || ev.Repo.Owner == "" || ev.Repo.Name == "" {
			t.Fatalf("event without number or repo: %+v", ev)
		}
		switch ev.Type {
		case forge.EventPullRequest:
			if !isObjectID(ev.BaseSHA) || !isObjectID(ev.HeadSHA) || ev.Action == "" {
				t.Fatalf("pull request event without SHAs or action: %+v", ev)
			}
		case forge.EventComment:
			if ev.Comment == nil || strings.EqualFold(ev.Comment.Author, "vouch-bot") {
				t.Fatalf("comment event %+v", ev)
			}
		default:
			t.Fatalf("event type %q", ev.Type)
		}
	})
}

func BenchmarkParsePullRequest(b *testing.B) {
	w, err := NewWebhook(testSecret)
	if err != nil {
		b.Fatal(err)
	}
	body := fixture(b, "pull_request_opened.json")
	h := signed(testSecret, body, "pull_request", "pull_request")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := w.Parse(h, body); err != nil {
			b.Fatal(err)
		}
	}
}
