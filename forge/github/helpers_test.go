package github

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var testSecret = []byte("It's a Secret to Everybody")

// fixture is a webhook payload from testdata/github-webhooks, byte for byte.
func fixture(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "github-webhooks", name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// delivery is the headers GitHub sends with a signed body.
func delivery(event string, body []byte) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "GitHub-Hookshot/044aadd")
	h.Set("X-GitHub-Event", event)
	h.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	h.Set("X-GitHub-Hook-ID", "292430182")
	h.Set("X-Hub-Signature-256", sign(testSecret, body))
	return h
}

// fakeClock is a Clock whose After returns at once, moving time on by d.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, d)
	c.now = c.now.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

// apiPrefix makes the fake API live below a path, as GitHub Enterprise's
// does, so a request that ignores the base URL's path misses every stub.
const apiPrefix = "/api/v3"

// fakeAPI is an httptest GitHub: handlers registered with handle must each
// be called, and any request no handler matches fails the test.
type fakeAPI struct {
	tb     testing.TB
	srv    *httptest.Server
	mux    *http.ServeMux
	mu     sync.Mutex
	called map[string]int
}

// BaseURL is what a Client is given.
func (f *fakeAPI) BaseURL() string { return f.srv.URL + apiPrefix + "/" }

func newFakeAPI(tb testing.TB) *fakeAPI {
	tb.Helper()
	f := &fakeAPI{tb: tb, mux: http.NewServeMux(), called: map[string]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path, ok := strings.CutPrefix(r.URL.Path, apiPrefix)
		if !ok {
			tb.Errorf("unexpected request outside the API prefix: %s %s", r.Method, r.URL)
			http.Error(w, "unexpected", http.StatusTeapot)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = path
		r2.URL.RawPath = ""
		if _, pattern := f.mux.Handler(r2); pattern == "" {
			tb.Errorf("unexpected request: %s %s", r.Method, r.URL)
			http.Error(w, "unexpected", http.StatusTeapot)
			return
		}
		f.mux.ServeHTTP(w, r2)
	}))
	tb.Cleanup(f.srv.Close)
	return f
}

// handle registers h for pattern ("GET /repos/o/r/pulls/1") and fails the
// test at cleanup unless it was called.
func (f *fakeAPI) handle(pattern string, h http.HandlerFunc) {
	f.tb.Helper()
	f.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.called[pattern]++
		f.mu.Unlock()
		h(w, r)
	})
	f.tb.Cleanup(func() {
		if f.calls(pattern) == 0 {
			f.tb.Errorf("stub %q was never called", pattern)
		}
	})
}

func (f *fakeAPI) calls(pattern string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.called[pattern]
}

// setup is a token Client wired to a fresh fake API and clock.
func setup(tb testing.TB, opts ...Option) (*Client, *fakeAPI, *fakeClock) {
	tb.Helper()
	api := newFakeAPI(tb)
	clock := newFakeClock()
	opts = append([]Option{WithClock(clock), WithGitOrigin("https://github.com")}, opts...)
	c, err := NewTokenClient(api.BaseURL(), "ghp_testtoken", opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return c, api, clock
}

// writeJSON answers with v as JSON (a string is sent as is).
func writeJSON(tb testing.TB, w http.ResponseWriter, status int, v any) {
	tb.Helper()
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	if s, ok := v.(string); ok {
		io.WriteString(w, s)
		return
	}
	if err := json.NewEncoder(w).Encode(v); err != nil {
		tb.Error(err)
	}
}

// decodeBody reads a request's JSON body into a map.
func decodeBody(tb testing.TB, r *http.Request) map[string]any {
	tb.Helper()
	var m map[string]any
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		tb.Errorf("%s %s: body: %v", r.Method, r.URL.Path, err)
	}
	return m
}

// pullJSON is a GitHub pull request as the REST API returns it.
func pullJSON(number int, state, base, head, baseSHA, headSHA string) string {
	repo := func(full string) string {
		if full == "" {
			return "null"
		}
		owner, name, _ := strings.Cut(full, "/")
		return fmt.Sprintf(`{"name":%q,"full_name":%q,"owner":{"login":%q},"clone_url":"https://github.com/%s.git"}`, name, full, owner, full)
	}
	return fmt.Sprintf(`{"number":%d,"state":%q,"title":"Fix the thing","user":{"login":"alice"},"merged":false,
"base":{"ref":"main","sha":%q,"repo":%s},"head":{"ref":"feature","sha":%q,"repo":%s}}`,
		number, state, baseSHA, repo(base), headSHA, repo(head))
}

const (
	shaA = "f95f852bd8fca8fcc58a9a2d6c842781e32a215e"
	shaB = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
)
