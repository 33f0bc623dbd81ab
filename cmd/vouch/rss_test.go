package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// maxIdleRSS is the resident memory `vouch serve` may use at rest.
const maxIdleRSS = 50 << 20

// TestServeIdleRSS starts the real binary, waits until it is ready (store
// open, sandbox proven, workers started), lets it idle, and checks its
// resident set size.
func TestServeIdleRSS(t *testing.T) {
	requireBwrap(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "vouch")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	addr := freeAddr(t)
	config := filepath.Join(dir, "vouch.yaml")
	yaml := fmt.Sprintf(`listen: %s
forges:
  gitea: {base_url: "http://127.0.0.1:1", token: unused, webhook_secret: s}
repositories: [{forge: gitea, owner: a, name: b}]
store: {path: %[2]s/data/vouch.db}
signing_key: %[2]s/data/signing.key
fetch_cache: %[2]s/data/git
`, addr, dir)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--config", config)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("vouch serve not ready within 30s (last error %v)", err)
		}
		time.Sleep(50 * time.Millisecond) // polling a separate process
	}
	time.Sleep(3 * time.Second) // idle: River's maintenance and the recovery scan run
	rss := vmRSS(t, cmd.Process.Pid)
	t.Logf("idle RSS of vouch serve: %.1f MiB (limit %d MiB)", float64(rss)/(1<<20), maxIdleRSS>>20)
	if rss > maxIdleRSS {
		t.Errorf("idle RSS %d bytes > %d", rss, maxIdleRSS)
	}
}

// vmRSS reads a process's resident set size from /proc.
func vmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS line")
	return 0
}
