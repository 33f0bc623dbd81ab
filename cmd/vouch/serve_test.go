package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"vouch.dev/vouch/bot"
	"vouch.dev/vouch/forge/gitea"
)

// syncBuffer is a bytes.Buffer safe to read while run writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startServe runs `vouch serve --config FILE` in the test's process and
// waits for /healthz; it returns the base URL and a stop function that
// cancels it (as SIGTERM does) and returns its exit code.
func startServe(t *testing.T, config string) (base string, stop func() int, stderr *syncBuffer) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "vouch.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var stdout syncBuffer
	stderr = &syncBuffer{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve", "--config", path}, &stdout, stderr) }()
	stopped := false
	var code int
	stop = func() int {
		if !stopped {
			cancel()
			select {
			case code = <-done:
			case <-time.After(bot.ShutdownGrace + 5*time.Second):
				t.Fatalf("vouch serve did not stop; stderr:\n%s", stderr)
			}
			stopped = true
		}
		return code
	}
	t.Cleanup(func() { stop() })

	deadline := time.Now().Add(15 * time.Second)
	for {
		if out := stdout.String(); strings.Contains(out, "listening on ") {
			base = strings.TrimSpace(out[strings.Index(out, "http://"):])
			if resp, err := http.Get(base + "/healthz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return base, stop, stderr
				}
			}
		}
		select {
		case code := <-done:
			t.Fatalf("vouch serve exited %d; stderr:\n%s", code, stderr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("vouch serve not healthy; stderr:\n%s", stderr)
		}
	}
}

func TestServe(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "data", "vouch.db")
	secretFile := filepath.Join(dir, "webhook-secret")
	if err := os.WriteFile(secretFile, []byte("serve-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VOUCH_TEST_GITEA_TOKEN", "unused-token")
	config := fmt.Sprintf(`listen: %s
forges:
  gitea:
    base_url: http://127.0.0.1:1
    token: ${VOUCH_TEST_GITEA_TOKEN}
    webhook_secret_file: %s
    bot_login: vouch-bot
repositories:
  - {forge: gitea, owner: maintainer, name: project}
store: {path: %s}
signing_key: %s
fetch_cache: %s
`, freeAddr(t), secretFile, db, filepath.Join(dir, "data", "signing.key"), filepath.Join(dir, "data", "git"))
	base, stop, stderr := startServe(t, config)

	for _, p := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(base + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d, want 200", p, resp.StatusCode)
		}
	}

	body, err := os.ReadFile(filepath.Join("..", "..", "forge", "gitea", "testdata", "pull_request_opened.json"))
	if err != nil {
		t.Fatal(err)
	}
	post := func(secret string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, base+"/webhook/gitea", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Gitea-Event", "pull_request")
		req.Header.Set("X-Gitea-Event-Type", "pull_request")
		req.Header.Set("X-Gitea-Delivery", "serve-1")
		req.Header.Set("X-Gitea-Signature", gitea.Signature([]byte(secret), body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("wrong"); code != http.StatusUnauthorized {
		t.Errorf("forged delivery: %d, want 401", code)
	}
	if code := post("serve-secret"); code != http.StatusAccepted {
		t.Errorf("signed delivery: %d, want 202", code)
	}
	if code := post("serve-secret"); code != http.StatusOK {
		t.Errorf("replayed delivery: %d, want 200", code)
	}
	if code := stop(); code != 0 {
		t.Fatalf("vouch serve exited %d after stop; stderr:\n%s", code, stderr)
	}
	if !strings.Contains(stderr.String(), `"delivery":"serve-1"`) {
		t.Errorf("no JSON log line with the delivery attribute:\n%s", stderr)
	}

	// The job outlived the service.
	store, err := bot.OpenSQLite(t.Context(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	jobs, err := store.Jobs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].Delivery != "serve-1" || jobs[0].Kind != bot.JobVerify {
		t.Errorf("jobs after shutdown = %+v, want the one verify job", jobs)
	}
}

func TestServeRefusesBadConfig(t *testing.T) {
	dir := t.TempDir()
	for name, config := range map[string]string{
		"empty secret": "forges:\n  gitea: {base_url: http://127.0.0.1:1, token: t}\nrepositories: [{forge: gitea, owner: a, name: b}]\n",
		"unknown key":  "forges:\n  gitea: {base_url: http://127.0.0.1:1, token: t, webhook_secret: s, extra: 1}\n",
	} {
		p := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".yaml")
		if err := os.WriteFile(p, []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := vouch(t, "serve", "--config", p)
		if code != exitUsage || !strings.Contains(stderr, p) {
			t.Errorf("%s: exit %d, stderr %q; want %d naming the file", name, code, stderr, exitUsage)
		}
	}
	if code, _, _ := vouch(t, "serve"); code != exitUsage {
		t.Errorf("serve without --config: exit %d, want %d", code, exitUsage)
	}
}
