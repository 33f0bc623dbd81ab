package bot

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	sdk "code.gitea.io/sdk/gitea"

	"vouch.dev/vouch/forge"
)

// serveProcess is `vouch serve` as its own process.
type serveProcess struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	done   chan struct{} // closed once the process was reaped
	err    error
}

// buildVouch builds cmd/vouch once for the test.
func buildVouch(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "vouch")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./cmd/vouch")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/vouch: %v\n%s", err, out)
	}
	return bin
}

// startProcess starts `vouch serve --config config` and waits for /healthz.
func (e *e2e) startProcess(t *testing.T, bin, config string) *serveProcess {
	t.Helper()
	p := &serveProcess{cmd: exec.Command(bin, "serve", "--config", config), done: make(chan struct{})}
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("vouch serve stderr:\n%s", p.stderr.String())
		}
	})
	e.waitFor("vouch serve answering", func() bool {
		resp, err := http.Get(e.url + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

// TestE2EKillDuringStep: `kill -9` of `vouch serve` while a step runs,
// with 50 deliveries sent around the kill (a sender that, like a forge,
// retries what was not acknowledged), then a restart ⇒ the interrupted head
// is verified, all 50 deliveries are accounted for, no status stays
// pending, and SIGTERM then stops the service cleanly.
func TestE2EKillDuringStep(t *testing.T) {
	const deliveries = 50
	bin := buildVouch(t)
	e := newE2E(t, "e2e-kill")
	m := e.g.Maintainer
	ctx := t.Context()
	e.cfg = e.config(t)
	addr := freeLoopback(t)
	e.url = "http://" + addr
	dir := t.TempDir()
	config := filepath.Join(dir, "vouch.yaml")
	yaml := fmt.Sprintf(`listen: %s
public_url: %s
forges:
  gitea: {base_url: %s, token: %s, webhook_secret: %s, bot_login: %s}
repositories: [{forge: gitea, owner: %s, name: %s}]
store: {path: %s}
signing_key: %s
fetch_cache: %s
work_root: %s
`, addr, e.url, e.g.URL, e.g.Bot.Token, e2eSecret, e.g.Bot.Login, e.repo.Owner, e.repo.Name,
		e.cfg.Store.Path, e.cfg.SigningKey, e.cfg.FetchCache, e.cfg.WorkRoot)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	proc := e.startProcess(t, bin, config)
	e.hook(t)

	// 50 real commits on side branches, announced as heads of the pull
	// request (each is then superseded by the real head).
	c := e.cloneMain("side")
	git, url, base := c.Git, c.URL, c.Base
	var side, refspecs []string
	for i := range deliveries {
		git("commit", "-q", "--allow-empty", "-m", fmt.Sprintf("side %d", i))
		side = append(side, git("rev-parse", "HEAD"))
		refspecs = append(refspecs, fmt.Sprintf("%s:refs/heads/side-%d", side[i], i))
	}
	git(append([]string{"push", "-q", url}, refspecs...)...)

	head := e.push(m, e.repo, "feature", map[string]string{"tests/slow.check": "sleep 6\n"})
	pr := e.openPR(m, "feature", "killed mid-step")
	e.waitFor("the head running", func() bool {
		sts := e.statuses(head)
		return len(sts) > 0 && strings.HasPrefix(sts[len(sts)-1].Description, "RUNNING")
	})

	// A sender that retries until acknowledged, as a forge does.
	var wg sync.WaitGroup
	send := func(i int) {
		defer wg.Done()
		for ctx.Err() == nil {
			if code := e.deliverSyncOnce(pr, base, side[i], fmt.Sprintf("kill-%d", i)); code == http.StatusAccepted || code == http.StatusOK {
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	for i := range deliveries / 2 {
		wg.Add(1)
		send(i)
	}
	proc.cmd.Process.Signal(syscall.SIGKILL)
	<-proc.done
	for i := deliveries / 2; i < deliveries; i++ {
		wg.Add(1)
		go send(i)
	}
	proc = e.startProcess(t, bin, config)
	wg.Wait()

	if st := e.waitFinal(head); st.State != sdk.StatusSuccess {
		t.Fatalf("interrupted head after restart: %s %q", st.State, st.Description)
	}
	e.waitFor("the queue to drain", func() bool { return e.metric("vouch_queue_depth") == "0" })
	if err := proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-proc.done:
		if proc.err != nil {
			t.Errorf("vouch serve after SIGTERM: %v\n%s", proc.err, proc.stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("vouch serve did not stop within a minute of SIGTERM")
	}

	if !strings.Contains(proc.stderr.String(), "taking back jobs interrupted by a previous process") {
		t.Errorf("the restarted service did not take back the interrupted job:\n%s", proc.stderr.String())
	}
	store, err := OpenSQLite(ctx, e.cfg.Store.Path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for i, h := range append(side, head) {
		runs, err := store.Runs(ctx, RunFilter{Forge: forge.Gitea, Repo: repoKey(e.repo), PR: pr, Head: h}, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != 1 || runs[0].State != RunPosted {
			t.Errorf("head %d (%s): runs %+v, want one posted run", i, h[:7], runs)
			continue
		}
		if sts := e.statuses(h); len(sts) > 0 && sts[len(sts)-1].State == sdk.StatusPending {
			t.Errorf("head %d (%s) left pending", i, h[:7])
		}
	}
}

// freeLoopback returns a loopback address with a port free right now.
func freeLoopback(t *testing.T) string {
	t.Helper()
	var lc net.ListenConfig
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
