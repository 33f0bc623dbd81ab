package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"vouch.dev/vouch/gate"
)

// requireCgroup skips the test when this host gives vouch no writable
// cgroup controller c (not root, no delegation, no controller mounted):
// the limit then falls back to an rlimit, which other tests cover.
func requireCgroup(tb testing.TB, r *Runner, c string) {
	tb.Helper()
	if r.cgroups.parent[c] == "" {
		tb.Skipf("no %s cgroup on this host: %s", c, r.cgroups.why[c])
	}
	if err := os.MkdirAll(r.cgroups.parent[c], 0o755); err != nil {
		tb.Skipf("%s cgroup not writable here: %v", c, err)
	}
	probe, err := os.MkdirTemp(r.cgroups.parent[c], "probe-")
	if err != nil {
		tb.Skipf("%s cgroup not writable here: %v", c, err)
	}
	os.Remove(probe)
}

// mechanismOf returns the mechanism recorded for the limit named name.
func mechanismOf(limits []AppliedLimit, name string) string {
	for _, l := range limits {
		if l.Name == name {
			return l.Mechanism
		}
	}
	return ""
}

// requireCgroupsGone fails if any cgroup directory of the step is left.
func requireCgroupsGone(tb testing.TB, out launchOutcome) {
	tb.Helper()
	for _, d := range out.cgroups {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			tb.Errorf("cgroup %s left after the step (stat: %v)", d, err)
		}
	}
}

// TestCgroupMemoryHogOOMKilled: a step allocating 600 MiB under a 256 MiB
// memory limit the recipe asked for is OOM-killed inside its cgroup; vouch
// (this test process) lives on and the result says why the step died.
func TestCgroupMemoryHogOOMKilled(t *testing.T) {
	r := testRunner(t, nil)
	requireCgroup(t, r, ctrlMemory)
	ws := testWorkspace(t, r)
	s := testSpec(r, ws, "python3", "-c", "b = bytearray(600 << 20); print('survived', len(b))")
	s.limits.Memory, s.asked.Memory = 256<<20, 256<<20
	out := mustLaunch(t, r, s)
	step := mustProven(t, out)
	if mech := mechanismOf(out.limits, "memory"); !strings.HasPrefix(mech, "cgroup-v") {
		t.Errorf("memory enforced by %q, want a cgroup", mech)
	}
	if !step.OOMKilled {
		t.Errorf("OOMKilled = false; want true (exit %d, output %q)", step.ExitCode, step.Output)
	}
	// bwrap reports its command's death by SIGKILL as 128+9: the hog was
	// the victim, not bwrap.
	if step.ExitCode != 128+9 || strings.Contains(string(step.Output), "survived") {
		t.Errorf("hog exit code %d, output %q; want 137 and no survival", step.ExitCode, step.Output)
	}
	if err := exec.Command("true").Run(); err != nil {
		t.Errorf("vouch cannot start a process after the hog: %v", err)
	}
	requireNamespaceEmpty(t, step)
	requireCgroupsGone(t, out)
}

// TestCgroupMemoryWithinLimit: a step using less than its memory limit is
// not reported OOM-killed.
func TestCgroupMemoryWithinLimit(t *testing.T) {
	r := testRunner(t, nil)
	requireCgroup(t, r, ctrlMemory)
	ws := testWorkspace(t, r)
	s := testSpec(r, ws, "python3", "-c", "b = bytearray(64 << 20); print('ok')")
	s.limits.Memory, s.asked.Memory = 256<<20, 256<<20
	out := mustLaunch(t, r, s)
	step := mustProven(t, out)
	if step.ExitCode != 0 || step.OOMKilled {
		t.Errorf("exit %d, OOMKilled %v, output %q; want 0, false", step.ExitCode, step.OOMKilled, step.Output)
	}
	requireCgroupsGone(t, out)
}

// TestCgroupForkBomb: under a pids limit of 32 a fork loop gets at most 32
// tasks in all (bwrap, its init and python count too), a real shell fork
// bomb is stopped while vouch keeps starting processes, and nothing of
// either is left afterwards.
func TestCgroupForkBomb(t *testing.T) {
	r := testRunner(t, nil)
	requireCgroup(t, r, ctrlPids)
	ws := testWorkspace(t, r)

	t.Run("count", func(t *testing.T) {
		s := testSpec(r, ws, "python3", "-c", `
import os, time
n = 0
for i in range(200):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    n += 1
print(n)`)
		s.limits.Pids = 32
		out := mustLaunch(t, r, s)
		step := mustProven(t, out)
		if mech := mechanismOf(out.limits, "pids"); !strings.HasPrefix(mech, "cgroup-v") {
			t.Errorf("pids enforced by %q, want a cgroup", mech)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(step.Output)))
		if step.ExitCode != 0 || err != nil {
			t.Fatalf("fork loop exited %d: %q", step.ExitCode, step.Output)
		}
		// bwrap, the sandbox's init and python itself are three of the 32.
		if n > 32-3 || n < 32-3-4 {
			t.Errorf("forked %d processes under pids.max 32; want about %d", n, 32-3)
		}
		t.Logf("forked %d concurrent processes under pids.max=32", n)
		requireNamespaceEmpty(t, step)
		requireCgroupsGone(t, out)
	})

	t.Run("bomb", func(t *testing.T) {
		s := testSpec(r, ws, "sh", "-c", `f() { f | f & }; f; exec sleep 60`)
		s.limits.Pids = 32
		s.timeout = 2 * time.Second
		done := make(chan struct{})
		var hostRuns, hostFails int
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if err := exec.Command("true").Run(); err != nil {
					hostFails++
				} else {
					hostRuns++
				}
			}
		})
		out := mustLaunch(t, r, s)
		close(done)
		wg.Wait()
		step := mustProven(t, out)
		if !step.TimedOut {
			t.Errorf("TimedOut = false (exit %d); the bomb should run until its timeout", step.ExitCode)
		}
		if hostFails > 0 || hostRuns == 0 {
			t.Errorf("during the bomb vouch started %d processes and failed %d times", hostRuns, hostFails)
		}
		requireNamespaceEmpty(t, step)
		requireCgroupsGone(t, out)
		if left := processesInCgroups(t, out.cgroups); len(left) > 0 {
			t.Errorf("processes of the step's cgroups left: %v", left)
		}
	})
}

// processesInCgroups lists the host processes whose /proc/<pid>/cgroup
// names one of dirs' step cgroups.
func processesInCgroups(tb testing.TB, dirs []string) []int {
	tb.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		tb.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + e.Name() + "/cgroup")
		if err != nil {
			continue
		}
		for _, d := range dirs {
			if strings.Contains(string(data), "/"+filepath.Base(d)+"\n") {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// TestCgroupCPUQuota: two processes spinning for 2 s of wall time under a
// quota of half a CPU consume at most about 1 s of CPU in all, as the
// step's CPU accounting counts it (the spinners' own rusage never reaches
// vouch: bwrap does not reap its sandbox's init). The bound holds whatever
// else loads the host; the same spin without a quota is logged for
// comparison only, since a loaded host may give it little more.
func TestCgroupCPUQuota(t *testing.T) {
	r := testRunner(t, nil)
	requireCgroup(t, r, ctrlCPU)
	ws := testWorkspace(t, r)
	spin := `
import os, time
child = os.fork()
t = time.monotonic()
while time.monotonic() - t < 2:
    pass
if child:
    os.waitpid(child, 0)`

	s := testSpec(r, ws, "python3", "-c", spin)
	s.cpus = 0.5
	out := mustLaunch(t, r, s)
	step := mustProven(t, out)
	if step.ExitCode != 0 {
		t.Fatalf("spin exited %d: %s", step.ExitCode, step.Output)
	}
	if mech := mechanismOf(out.limits, "cpu"); !strings.HasPrefix(mech, "cgroup-v") {
		t.Errorf("cpu enforced by %q, want a cgroup", mech)
	}
	// 0.5 CPU × ~2 s, plus python's start-up and one CFS period of slack.
	if step.Duration < 2*time.Second || step.CPUTime > 1400*time.Millisecond {
		t.Errorf("2 spinners under 0.5 CPU: wall %v, CPU %v; want wall ≥ 2s, CPU ≤ 1.4s", step.Duration, step.CPUTime)
	}
	// The accounting must see the spinners at all.
	if step.CPUTime < 300*time.Millisecond {
		t.Errorf("2 spinners under 0.5 CPU used only %v of CPU: the accounting is not seeing them", step.CPUTime)
	}
	requireCgroupsGone(t, out)

	s.cpus = 0
	free := mustProven(t, mustLaunch(t, r, s))
	t.Logf("CPU time over 2s of wall: %v under 0.5 CPU (wall %v), %v without a quota (wall %v)",
		step.CPUTime, step.Duration, free.CPUTime, free.Duration)
}

// TestCgroupStepRunsInside: the command the step runs (exec'd after the
// release) is already in the step's cgroups, and they are gone afterwards,
// also when the step is killed at its timeout with a background child.
func TestCgroupStepRunsInside(t *testing.T) {
	r := testRunner(t, nil)
	requireCgroup(t, r, ctrlPids)
	ws := testWorkspace(t, r)

	s := testSpec(r, ws, "cat", "/proc/self/cgroup")
	s.cpus = 1
	out := mustLaunch(t, r, s)
	step := mustProven(t, out)
	if len(out.cgroups) == 0 {
		t.Fatalf("no cgroup made; limits %+v", out.limits)
	}
	id := filepath.Base(out.cgroups[0])
	for _, c := range []string{ctrlMemory, ctrlPids, ctrlCPU} {
		found := false
		for line := range strings.SplitSeq(string(step.Output), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) == 3 && (parts[1] == "" || strings.Contains(","+parts[1]+",", ","+c+",")) && strings.HasSuffix(parts[2], "/"+id) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: step not in cgroup %s: /proc/self/cgroup inside:\n%s", c, id, step.Output)
		}
	}
	requireCgroupsGone(t, out)

	s = testSpec(r, ws, "sh", "-c", `trap '' TERM HUP INT; setsid sleep 300 & sleep 300`)
	s.timeout = 300 * time.Millisecond
	out = mustLaunch(t, r, s)
	step = mustProven(t, out)
	if !step.TimedOut {
		t.Errorf("TimedOut = false")
	}
	requireNamespaceEmpty(t, step)
	requireCgroupsGone(t, out)
}

// TestUnenforceableRecipeLimitBlocks: with no cgroup available (CgroupRoot
// points at an empty directory, or at a cgroup2 mount without a memory
// controller), a memory limit the recipe asks for makes the run unproven
// before anything is released, while the operator's default memory limit
// falls back to RLIMIT_AS and is recorded as such.
func TestUnenforceableRecipeLimitBlocks(t *testing.T) {
	roots := map[string]string{"empty": t.TempDir()}
	if ms, err := cgroupMounts("/sys/fs/cgroup/unified"); err == nil && len(ms) > 0 && ms[0].v2 {
		roots["cgroup2 without controllers"] = "/sys/fs/cgroup/unified"
	}
	for name, root := range roots {
		t.Run(name, func(t *testing.T) {
			r := testRunner(t, func(c *Config) { c.CgroupRoot = root })
			if r.cgroups.parent[ctrlMemory] != "" {
				t.Skipf("%s has a memory controller", root)
			}
			marker := filepath.Join(r.cfg.WorkRoot, "..", "ran")
			asked := gate.Recipe{Version: 1, Limits: gate.Limits{Memory: 1 << 30},
				Steps: []gate.Step{{Name: "hog", Run: []string{"touch", "/work/ran"}}}}
			res, err := r.run(t.Context(), r.logger, asked, func(*os.Root) error { return nil })
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			want := "memory limit 1GiB requested but not enforceable here: "
			if res.Unproven == nil || !strings.Contains(res.Unproven.Cause, want) || res.Unproven.Step != "hog" {
				t.Fatalf("Unproven = %+v; want a cause containing %q for step hog", res.Unproven, want)
			}
			if len(res.Steps) != 0 || res.Isolated {
				t.Errorf("Steps = %+v, Isolated = %v; want none, false", res.Steps, res.Isolated)
			}
			t.Logf("cause: %s", res.Unproven.Cause)
			if _, err := os.Stat(marker); !os.IsNotExist(err) {
				t.Errorf("the refused step ran: %v", err)
			}

			def := gate.Recipe{Version: 1, Steps: []gate.Step{{Name: "ok", Run: []string{"true"}}}}
			res, err = r.run(t.Context(), r.logger, def, func(*os.Root) error { return nil })
			if err != nil || res.Unproven != nil || len(res.Steps) != 1 || res.Steps[0].ExitCode != 0 {
				t.Fatalf("default limits: err %v, unproven %v, steps %+v", err, res.Unproven, res.Steps)
			}
			for lim, mech := range map[string]string{"memory": "rlimit:AS", "pids": "rlimit:NPROC", "cpu-time": "rlimit:CPU", "fsize": "rlimit:FSIZE"} {
				if got := mechanismOf(res.Limits, lim); got != mech {
					t.Errorf("%s enforced by %q, want %q (limits %+v)", lim, got, mech, res.Limits)
				}
			}
		})
	}
}

// TestPlanBounds: which mechanism enforces each limit, given the cgroups
// that could be made.
func TestPlanBounds(t *testing.T) {
	s := launchSpec{
		limits:  gate.Limits{Memory: 1 << 30, Pids: 64, Tmp: 1 << 20, Output: 1 << 10},
		cpus:    1.5,
		timeout: 10 * time.Second, fileSize: 1 << 20, noFile: 64,
	}
	v1 := &stepCgroup{version: 1, swap: true, why: map[string]string{},
		dirs: map[string]string{ctrlMemory: "/m", ctrlPids: "/p", ctrlCPU: "/c"}}
	v2 := &stepCgroup{version: 2, why: map[string]string{},
		dirs: map[string]string{ctrlMemory: "/x", ctrlPids: "/x", ctrlCPU: "/x"}}
	none := &stepCgroup{why: map[string]string{ctrlMemory: "no memory here"}}
	askedMem := s
	askedMem.asked.Memory = 1 << 30
	askedPids := s
	askedPids.asked.Pids = 64
	for _, tt := range []struct {
		name    string
		s       launchSpec
		cg      *stepCgroup
		want    map[string]string // limit name → mechanism
		wantErr string
	}{
		{"v1", askedMem, v1, map[string]string{"memory": "cgroup-v1:memory", "swap": "cgroup-v1:memory.memsw", "pids": "cgroup-v1:pids", "cpu": "cgroup-v1:cpu", "fsize": "rlimit:FSIZE", "tmp": "tmpfs-size", "timeout": "vouch:timeout-kill", "output": "vouch:output-kill"}, ""},
		{"v2", askedMem, v2, map[string]string{"memory": "cgroup-v2:memory.max", "swap": "", "pids": "cgroup-v2:pids.max", "cpu": "cgroup-v2:cpu.max", "cpu-time": ""}, ""},
		{"defaults without cgroups", s, nil, map[string]string{"memory": "rlimit:AS", "pids": "rlimit:NPROC", "cpu": "", "cpu-time": "rlimit:CPU"}, ""},
		{"asked pids without cgroups", askedPids, none, map[string]string{"pids": "rlimit:NPROC"}, ""},
		{"asked memory without cgroups", askedMem, none, nil, "memory limit 1GiB requested but not enforceable here: no memory here"},
		{"asked memory, nil cgroups", askedMem, nil, nil, "memory limit 1GiB requested but not enforceable here"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := planBounds(tt.s, tt.cg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("planBounds err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("planBounds: %v", err)
			}
			for name, mech := range tt.want {
				if got := mechanismOf(b.applied, name); got != mech {
					t.Errorf("planBounds: %s by %q, want %q (%+v)", name, got, mech, b.applied)
				}
			}
			for _, r := range b.rlimits {
				if !strings.HasPrefix(r.applied.Mechanism, "rlimit:") {
					t.Errorf("rlimit %+v recorded as %q", r, r.applied.Mechanism)
				}
			}
		})
	}
	b, _ := planBounds(s, nil)
	for _, a := range b.applied {
		if a.Name == "cpu-time" && a.Value != 15000 {
			t.Errorf("cpu-time = %d ms, want 1.5 CPUs × 10s = 15000", a.Value)
		}
	}
}

func TestSizeText(t *testing.T) {
	for n, want := range map[int64]string{1 << 30: "1GiB", 256 << 20: "256MiB", 1536 << 20: "1536MiB", 1000: "1000B", 3 << 40: "3TiB"} {
		if got := sizeText(n); got != want {
			t.Errorf("sizeText(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestDetectCgroupsEmptyRoot: a directory without cgroup mounts offers no
// controller, and says why.
func TestDetectCgroupsEmptyRoot(t *testing.T) {
	h := detectCgroups(t.TempDir(), "")
	if h.version != 0 || len(h.parent) != 0 {
		t.Errorf("detectCgroups(empty) = version %d, parents %v; want none", h.version, h.parent)
	}
	for _, c := range stepControllers {
		if h.why[c] == "" {
			t.Errorf("no reason recorded for %s", c)
		}
	}
	sc := h.create(cgroupWant{memory: 1 << 20, pids: 8, cpus: 1})
	if len(sc.made) != 0 || len(sc.dirs) != 0 || len(sc.why) != 3 {
		t.Errorf("create on no cgroups = %+v; want nothing made, three reasons", sc)
	}
}

// TestCgroupSweepStale: New removes an empty step cgroup left by a vouch
// process that is gone, and keeps one of a live process.
func TestCgroupSweepStale(t *testing.T) {
	r := testRunner(t, nil)
	requireCgroup(t, r, ctrlPids)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	parent := r.cgroups.parent[ctrlPids]
	stale := filepath.Join(parent, strconv.Itoa(dead.Process.Pid)+"-1-test")
	live := filepath.Join(parent, strconv.Itoa(os.Getpid())+"-0-test")
	for _, d := range []string{stale, live} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { os.Remove(live); os.Remove(stale) })
	testRunner(t, nil)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale cgroup %s not swept: %v", stale, err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("live process's cgroup %s swept: %v", live, err)
	}
}

func TestConfigValidateLimits(t *testing.T) {
	for _, tt := range []struct {
		name  string
		mod   func(*Config)
		field string
	}{
		{"negative cpus", func(c *Config) { c.CPUs = -1 }, "CPUs"},
		{"tiny cpus", func(c *Config) { c.CPUs = 0.001 }, "CPUs"},
		{"negative fsize", func(c *Config) { c.FileSize = -1 }, "FileSize"},
		{"relative cgroup root", func(c *Config) { c.CgroupRoot = "sys/fs/cgroup" }, "CgroupRoot"},
		{"escaping parent", func(c *Config) { c.CgroupParent = "a/../../b" }, "CgroupParent"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.mod(&c)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.field+":") {
				t.Errorf("Validate() = %v, want an error naming %s", err, tt.field)
			}
		})
	}
	c := DefaultConfig()
	c.CPUs, c.FileSize, c.CgroupParent = 0, 0, "system.slice/vouch.service"
	if err := c.Validate(); err != nil {
		t.Errorf("Validate() = %v for no quota, no fsize, a parent", err)
	}
}
