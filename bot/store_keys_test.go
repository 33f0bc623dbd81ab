package bot

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"vouch.dev/vouch/forge"
)

// TestStoreJobKeys: what makes two jobs the same. A new base is a new
// verification; a repository's name is compared without case; a comment
// redelivered under a new delivery id is still one command job.
func TestStoreJobKeys(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "vouch.db"))
	ctx := t.Context()
	enqueue := func(j Job) bool {
		t.Helper()
		ok, err := s.Enqueue(ctx, j)
		if err != nil {
			t.Fatalf("Enqueue(%+v): %v", j, err)
		}
		return ok
	}
	first := verifyJob("d1", headA, 1)
	first.BaseSHA = headB
	if !enqueue(first) {
		t.Fatal("first job refused")
	}
	upper := verifyJob("d2", headA, 1)
	upper.BaseSHA = headB
	upper.Repo.Owner = strings.ToUpper(upper.Repo.Owner)
	if enqueue(upper) {
		t.Error("same job with the owner in other case queued twice")
	}
	rebased := verifyJob("d3", headA, 1)
	rebased.BaseSHA = strings.Repeat("c", 40)
	if !enqueue(rebased) {
		t.Error("same head on a new base not queued")
	}
	cmd := Job{Kind: JobCommand, Forge: forge.Gitea, Repo: first.Repo, PR: 1, Delivery: "c1", CommentID: 42, Author: "m", Commands: []Command{{Kind: CommandVerify}}}
	if !enqueue(cmd) {
		t.Fatal("command job refused")
	}
	cmd.Delivery = "c2-redelivered"
	if enqueue(cmd) {
		t.Error("one comment redelivered under a new delivery id queued twice")
	}
}

// TestIntakeBusy: past MaxInflightBodies deliveries in flight, the intake
// answers 503 without reading the body.
func TestIntakeBusy(t *testing.T) {
	in := &Intake{Parsers: map[forge.Kind]forge.WebhookParser{forge.Gitea: nil}}
	in.Parsers[forge.Gitea] = parserFunc(func(http.Header, []byte) (*forge.Event, error) { return nil, forge.ErrIgnored })
	in.inflightOnce.Do(func() { in.inflight = make(chan struct{}, MaxInflightBodies) })
	for range MaxInflightBodies {
		in.inflight <- struct{}{}
	}
	rec := httptest.NewRecorder()
	in.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/webhook/gitea", strings.NewReader("{}")))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("busy intake answered %d, want 503", rec.Code)
	}
	<-in.inflight
	rec = httptest.NewRecorder()
	in.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/webhook/gitea", strings.NewReader("{}")))
	if rec.Code != http.StatusOK {
		t.Errorf("intake with room answered %d, want 200 (ignored)", rec.Code)
	}
}

type parserFunc func(http.Header, []byte) (*forge.Event, error)

func (f parserFunc) Parse(h http.Header, b []byte) (*forge.Event, error) { return f(h, b) }

// TestSecretRedactedEverywhere: JSON, text and slog never print a secret.
func TestSecretRedactedEverywhere(t *testing.T) {
	s := Secret("hunter2-very-secret")
	j, _ := json.Marshal(struct{ S Secret }{s})
	var b strings.Builder
	slog.New(slog.NewJSONHandler(&b, nil)).Info("cfg", "secret", s)
	txt, _ := s.MarshalText()
	for name, out := range map[string]string{"json": string(j), "slog": b.String(), "text": string(txt), "fmt": fmt.Sprint(s)} {
		if strings.Contains(out, "hunter2") {
			t.Errorf("%s output carries the secret: %s", name, out)
		}
	}
}
