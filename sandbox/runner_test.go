package sandbox

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"vouch.dev/vouch/gate"
)

// writeFile is a fill function that writes one file through the root.
func writeFile(name, data string) func(*os.Root) error {
	return func(root *os.Root) error { return root.WriteFile(name, []byte(data), 0o644) }
}

func TestRunRefusesInvalidPlan(t *testing.T) {
	r := testRunner(t, nil)
	for _, p := range []*gate.Plan{nil, {}} {
		if res, err := r.Run(t.Context(), p); !errors.Is(err, ErrInvalidPlan) || res != nil {
			t.Errorf("Run(%v) = %v, %v; want nil, ErrInvalidPlan", p, res, err)
		}
	}
}

// TestRunMissingBwrap: no bwrap is a result with Unproven set, not a Go error.
func TestRunMissingBwrap(t *testing.T) {
	r := testRunner(t, func(c *Config) { c.Bwrap = filepath.Join(t.TempDir(), "no-bwrap") })
	recipe := gate.Recipe{Version: 1, Steps: []gate.Step{{Name: "x", Run: []string{"true"}}}}
	res, err := r.run(t.Context(), r.logger, recipe, writeFile("f", "x"))
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if res.Unproven == nil || !strings.Contains(res.Unproven.Cause, "not found") || res.Isolated || len(res.Steps) != 0 {
		t.Fatalf("result = %+v; want Unproven naming the missing bwrap", res)
	}
	if res.Provider != "bubblewrap" {
		t.Errorf("Provider = %q", res.Provider)
	}
}

// TestRunStepsInOrderStopOnFailure: steps run in order, each on a fresh copy
// of the tree (what step one rewrote or left is gone for step two, so head
// code cannot tamper with what a later step runs), a failing step ends the
// run, the result is proven and the workspaces are removed afterwards.
func TestRunStepsInOrderStopOnFailure(t *testing.T) {
	r := testRunner(t, nil)
	recipe := gate.Recipe{Version: 1, Env: map[string]string{"GREETING": "hi"}, Steps: []gate.Step{
		{Name: "read", Run: []string{"sh", "-c", `test "$(cat input)" = tree && echo "$GREETING" > out && echo tampered > input`}},
		{Name: "check", Run: []string{"sh", "-c", `test ! -e out && test "$(cat input)" = tree && exit 3`}},
		{Name: "never", Run: []string{"touch", "never"}},
	}}
	res, err := r.run(t.Context(), r.logger, recipe, writeFile("input", "tree"))
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if res.Unproven != nil {
		t.Fatalf("unproven: %v (%s)", res.Unproven, res.Unproven.Stderr)
	}
	if len(res.Steps) != 2 || res.Steps[0].ExitCode != 0 || res.Steps[1].ExitCode != 3 {
		t.Fatalf("steps = %+v; want read exit 0, check exit 3, nothing else", res.Steps)
	}
	if !res.Isolated || len(res.Namespaces) != len(Namespaces) {
		t.Errorf("Isolated = %v, %d namespaces; want true, %d", res.Isolated, len(res.Namespaces), len(Namespaces))
	}
	if !strings.HasPrefix(res.Version, "bubblewrap ") || !filepath.IsAbs(res.Path) {
		t.Errorf("Version %q, Path %q", res.Version, res.Path)
	}
	// pids: "cgroup-v1:pids" or "cgroup-v2:pids.max" where the host gives a
	// writable cgroup, "rlimit:NPROC" otherwise.
	for _, mech := range []string{"pids", "tmpfs-size", "vouch:timeout-kill", "vouch:output-kill"} {
		found := false
		for _, l := range res.Limits {
			found = found || l.Mechanism == mech || (mech == "pids" && l.Name == "pids" &&
				(l.Mechanism == "rlimit:NPROC" || strings.HasPrefix(l.Mechanism, "cgroup-v")))
		}
		if !found {
			t.Errorf("limit %s not recorded in %+v", mech, res.Limits)
		}
	}
	entries, err := os.ReadDir(r.cfg.WorkRoot)
	if err != nil || len(entries) != 0 {
		t.Errorf("work root after the run: %v, %v; want empty", entries, err)
	}
}

// TestRunTimeoutFromRecipe: the recipe's timeout ends the run.
func TestRunTimeoutFromRecipe(t *testing.T) {
	r := testRunner(t, nil)
	recipe := gate.Recipe{Version: 1, Steps: []gate.Step{
		{Name: "slow", Run: []string{"sleep", "300"}, Timeout: 200 * time.Millisecond},
		{Name: "never", Run: []string{"true"}},
	}}
	res, err := r.run(t.Context(), r.logger, recipe, writeFile("f", "x"))
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if len(res.Steps) != 1 || !res.Steps[0].TimedOut {
		t.Fatalf("steps = %+v; want one timed-out step", res.Steps)
	}
}

// TestRunUnknownToolchain: a toolchain the operator did not configure is an
// invalid step, and nothing starts.
func TestRunUnknownToolchain(t *testing.T) {
	r := testRunner(t, nil)
	recipe := gate.Recipe{Version: 1, Toolchains: []string{"go"}, Steps: []gate.Step{{Name: "x", Run: []string{"true"}}}}
	if _, err := r.run(t.Context(), r.logger, recipe, writeFile("f", "x")); !errors.Is(err, ErrInvalidStep) {
		t.Fatalf("run = %v, want ErrInvalidStep", err)
	}
}

// TestRunToolchainBound: a configured toolchain is visible read-only and its
// bin directory is on PATH.
func TestRunToolchainBound(t *testing.T) {
	tc := traversableDir(t)
	if err := os.Mkdir(filepath.Join(tc, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tc, "bin", "hello-tool"), []byte("#!/bin/sh\necho tool-ok\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := testRunner(t, func(c *Config) {
		c.Toolchains = map[string]Toolchain{"demo": {Paths: []string{tc}, Env: map[string]string{"DEMO_HOME": tc}}}
	})
	recipe := gate.Recipe{Version: 1, Toolchains: []string{"demo"}, Steps: []gate.Step{
		{Name: "x", Run: []string{"sh", "-c", "hello-tool && test \"$DEMO_HOME\" = " + tc + " && ! touch " + tc + "/bin/w 2>/dev/null"}},
	}}
	res, err := r.run(t.Context(), r.logger, recipe, writeFile("f", "x"))
	if err != nil || res.Unproven != nil {
		t.Fatalf("run: %v %v", err, res.Unproven)
	}
	if s := res.Steps[0]; s.ExitCode != 0 || !strings.Contains(string(s.Output), "tool-ok") {
		t.Fatalf("step = %d %q", s.ExitCode, s.Output)
	}
}

// TestProbe: the doctor's probe proves the sandbox on this host.
func TestProbe(t *testing.T) {
	r := testRunner(t, nil)
	res, err := r.Probe(t.Context())
	if err != nil || !res.Isolated {
		t.Fatalf("Probe = %+v, %v; want isolated", res, err)
	}
}

// TestCancelKillsStep: cancelling the context kills the running step and
// is reported as an error.
func TestCancelKillsStep(t *testing.T) {
	r := testRunner(t, nil)
	ws := testWorkspace(t, r)
	s := testSpec(r, ws, "sleep", "300")
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	out, err := r.launch(ctx, requireBwrap(t), s)
	if err == nil || out.step.ExitCode != -1 {
		t.Fatalf("launch = %+v, %v; want killed with a cancellation error", out.step, err)
	}
	requireNamespaceEmpty(t, out.step)
}

// TestSetuidLeftInWorkspaceUnreachable: a step copies a shell into /work,
// makes it setuid and opens /work to everyone; no other host user can reach
// it, because the workspace sits below a guard directory only vouch and the
// sandbox group may pass.
func TestSetuidLeftInWorkspaceUnreachable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as another host user")
	}
	r := testRunner(t, func(c *Config) { c.KeepWorkspace = true })
	recipe := gate.Recipe{Version: 1, Steps: []gate.Step{{Name: "plant",
		Run: []string{"sh", "-c", "cp /bin/sh /work/suid-sh && chmod 4755 /work/suid-sh && chmod 0777 /work"}}}}
	res, err := r.run(t.Context(), r.logger, recipe, func(*os.Root) error { return nil })
	if err != nil || res.Unproven != nil || len(res.Steps) != 1 || res.Steps[0].ExitCode != 0 {
		t.Fatalf("run = %+v, %v; want the planting step to succeed", res, err)
	}
	matches, err := filepath.Glob(filepath.Join(r.cfg.WorkRoot, "run-*", "ws", "suid-sh"))
	if err != nil || len(matches) != 1 {
		t.Fatalf("planted file not found: %v %v", matches, err)
	}
	fi, err := os.Stat(matches[0])
	if err != nil || fi.Mode()&os.ModeSetuid == 0 {
		t.Fatalf("the step did not leave a setuid file (%v, %v): the test proves nothing", fi, err)
	}
	// As nobody, exactly as a local user would try (setpriv would keep
	// root's capabilities until its exec, so set the ids in the child).
	cmd := exec.Command(matches[0], "-c", "id -u")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("another host user ran the planted setuid shell: %s", out)
	}
	if !errors.Is(err, fs.ErrPermission) {
		t.Errorf("running it as nobody: %v %s, want permission denied", err, out)
	}
}

// TestStepIsFirstForTheOOMKiller: every process of the step starts with
// oom_score_adj 1000, so under memory pressure the kernel kills the step
// before vouch. (Without CAP_SYS_RESOURCE vouch cannot set a floor: a
// hostile step can lower its own value back to 0, vouch's level; the
// step's memory cgroup, which also charges its tmpfs pages, is the bound.)
func TestStepIsFirstForTheOOMKiller(t *testing.T) {
	r := testRunner(t, nil)
	recipe := gate.Recipe{Version: 1, Steps: []gate.Step{{Name: "oom",
		Run: []string{"sh", "-c", "cat /proc/self/oom_score_adj"}}}}
	res, err := r.run(t.Context(), r.logger, recipe, func(*os.Root) error { return nil })
	if err != nil || res.Unproven != nil || len(res.Steps) != 1 {
		t.Fatalf("run = %+v, %v", res, err)
	}
	out := string(res.Steps[0].Output)
	if out != "1000\n" {
		t.Errorf("step output %q: want oom_score_adj 1000", out)
	}
}
