package sandbox

import (
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"vouch.dev/vouch/gate"
)

// requireBwrap skips the test when bwrap is missing, except under CI=true
// where a missing bwrap is a failure.
func requireBwrap(tb testing.TB) string {
	tb.Helper()
	path, err := exec.LookPath("bwrap")
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("bwrap is required under CI=true: %v", err)
		}
		tb.Skipf("bwrap not installed: %v", err)
	}
	return path
}

// traversableDir returns a fresh directory that the sandbox uid can reach
// (t.TempDir makes 0700 directories).
func traversableDir(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o711); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}

// testRunner returns a Runner whose workspaces live in a test directory.
func testRunner(tb testing.TB, mod func(*Config)) *Runner {
	tb.Helper()
	requireBwrap(tb)
	cfg := DefaultConfig()
	cfg.WorkRoot = filepath.Join(traversableDir(tb), "work")
	if mod != nil {
		mod(&cfg)
	}
	r, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	return r
}

// testWorkspace returns a workspace owned by the sandbox uid, removed at
// cleanup.
func testWorkspace(tb testing.TB, r *Runner) *workspace {
	tb.Helper()
	ws, err := newWorkspace(r.cfg.WorkRoot, testGID())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := ws.remove(); err != nil {
			tb.Errorf("remove workspace: %v", err)
		}
	})
	if os.Geteuid() == 0 {
		if err := ws.chown(r.cfg.UID, r.cfg.GID); err != nil {
			tb.Fatal(err)
		}
	}
	return ws
}

// testSpec is a launch of argv in ws with the default limits.
func testSpec(r *Runner, ws *workspace, argv ...string) launchSpec {
	env, err := stepEnv(nil, nil)
	if err != nil {
		panic(err)
	}
	return launchSpec{
		name: "test", argv: argv, env: env, workspace: ws.dir,
		limits:  effectiveLimits(gate.Limits{}, r.cfg.Defaults, r.cfg.Max),
		timeout: 30 * time.Second, noFile: r.cfg.NoFile,
	}
}

// mustLaunch launches s with the real bwrap and fails on a Go error.
func mustLaunch(tb testing.TB, r *Runner, s launchSpec) launchOutcome {
	tb.Helper()
	bwrap := r.cfg.Bwrap
	if !filepath.IsAbs(bwrap) {
		bwrap = requireBwrap(tb)
	}
	out, err := r.launch(tb.Context(), bwrap, s)
	if err != nil {
		tb.Fatalf("launch %q: %v", s.argv, err)
	}
	return out
}

// mustProven fails unless the outcome is a proven, released step.
func mustProven(tb testing.TB, out launchOutcome) StepResult {
	tb.Helper()
	if out.proof != nil {
		tb.Fatalf("isolation unproven: %v (stderr %q)", out.proof, out.proof.Stderr)
	}
	return out.step
}

// pidsInNamespace lists the live (not zombie) host processes whose pid
// namespace link is ns. A zombie runs nothing; bwrap may exit before its
// sandbox pid 1 is reaped, and the host's init reaps it then.
func pidsInNamespace(tb testing.TB, ns string) []int {
	tb.Helper()
	return livePids(tb, func(pid string) bool {
		l, err := os.Readlink("/proc/" + pid + "/ns/pid")
		return err == nil && l == ns
	})
}

// livePidsMentioning lists live (not zombie) processes whose command line
// contains s.
func livePidsMentioning(tb testing.TB, s string) []int {
	tb.Helper()
	return livePids(tb, func(pid string) bool {
		cmdline, err := os.ReadFile("/proc/" + pid + "/cmdline")
		return err == nil && strings.Contains(string(cmdline), s)
	})
}

// livePids lists the live (not zombie) host processes that match.
func livePids(tb testing.TB, match func(pid string) bool) []int {
	tb.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		tb.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !match(e.Name()) {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // gone
		}
		if i := strings.LastIndexByte(string(stat), ')'); i > 0 && strings.HasPrefix(string(stat[i:]), ") Z") {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// requireNamespaceEmpty fails if any process of the step's pid namespace
// is still alive on the host.
func requireNamespaceEmpty(tb testing.TB, step StepResult) {
	tb.Helper()
	ns := step.Namespaces["pid"].Child
	if ns == "" {
		tb.Fatal("no pid namespace recorded")
	}
	if pids := pidsInNamespace(tb, ns); len(pids) > 0 {
		var cmds []string
		for _, p := range pids {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/cmdline")
			cmds = append(cmds, strings.ReplaceAll(string(b), "\x00", " "))
		}
		tb.Fatalf("processes left in %s after the step: %v %q", ns, pids, cmds)
	}
}

// testGID is the group a test workspace's guard gets: the sandbox's when
// the tests run as root, none otherwise.
func testGID() int {
	if os.Geteuid() == 0 {
		return DefaultGID
	}
	return -1
}
