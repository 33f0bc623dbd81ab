package sandbox

import (
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"vouch.dev/vouch/gate"
)

func TestEffectiveLimits(t *testing.T) {
	def := gate.Limits{Output: 100, Pids: 10, Tmp: 1000}
	for _, tt := range []struct {
		name       string
		asked, max gate.Limits
		want       gate.Limits
	}{
		{"defaults", gate.Limits{}, gate.Limits{}, def},
		{"asked", gate.Limits{Memory: 5, Pids: 3}, gate.Limits{}, gate.Limits{Memory: 5, Output: 100, Pids: 3, Tmp: 1000}},
		{"capped", gate.Limits{Output: 500, Pids: 50}, gate.Limits{Output: 200, Pids: 20, Memory: 7}, gate.Limits{Memory: 7, Output: 200, Pids: 20, Tmp: 1000}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := effectiveLimits(tt.asked, def, tt.max); got != tt.want {
				t.Errorf("effectiveLimits(%+v, %+v, %+v) = %+v, want %+v", tt.asked, def, tt.max, got, tt.want)
			}
		})
	}
}

// TestTimeoutKillsEverything: a step that ignores SIGTERM and leaves a
// background child is killed at its timeout, and nothing of it survives.
func TestTimeoutKillsEverything(t *testing.T) {
	r := testRunner(t, nil)
	ws := testWorkspace(t, r)
	s := testSpec(r, ws, "sh", "-c", `trap '' TERM HUP INT; sleep 300 & sleep 300`)
	s.timeout = 300 * time.Millisecond
	start := time.Now()
	step := mustProven(t, mustLaunch(t, r, s))
	if !step.TimedOut || step.ExitCode != -1 {
		t.Errorf("TimedOut = %v, ExitCode = %d; want true, -1", step.TimedOut, step.ExitCode)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("launch took %v after a 300ms timeout", took)
	}
	requireNamespaceEmpty(t, step)
}

// TestOutputFloodBounded: a step writing 1 GiB is killed once it passes the
// cap; vouch keeps at most the cap and its heap stays small meanwhile.
func TestOutputFloodBounded(t *testing.T) {
	r := testRunner(t, nil)
	ws := testWorkspace(t, r)
	s := testSpec(r, ws, "head", "-c", "1G", "/dev/zero")

	var peak uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	step := mustProven(t, mustLaunch(t, r, s))
	close(stop)
	wg.Wait()

	if !step.OutputLimited || step.ExitCode != -1 {
		t.Errorf("OutputLimited = %v, ExitCode = %d; want true, -1", step.OutputLimited, step.ExitCode)
	}
	if int64(len(step.Output)) > s.limits.Output || step.OutputBytes <= s.limits.Output {
		t.Errorf("kept %d of %d bytes; want at most %d kept of more than %d", len(step.Output), step.OutputBytes, s.limits.Output, s.limits.Output)
	}
	if peak > 64<<20 {
		t.Errorf("heap in use peaked at %d MiB during the flood", peak>>20)
	}
	t.Logf("flood: %d bytes seen, %d kept, heap peak %d KiB", step.OutputBytes, len(step.Output), peak>>10)
	requireNamespaceEmpty(t, step)
}

// TestSetsidOrphanReaped: a double-forked, setsid'd background process does
// not outlive a step that exits 0.
func TestSetsidOrphanReaped(t *testing.T) {
	r := testRunner(t, nil)
	ws := testWorkspace(t, r)
	step := mustProven(t, mustLaunch(t, r, testSpec(r, ws, "sh", "-c",
		`setsid sh -c 'trap "" TERM HUP; sleep 300 &' ; exit 0`)))
	if step.ExitCode != 0 || step.TimedOut {
		t.Fatalf("ExitCode = %d, TimedOut = %v; want 0, false (%s)", step.ExitCode, step.TimedOut, step.Output)
	}
	requireNamespaceEmpty(t, step)
}

// TestNprocEnforced: a fork loop cannot exceed the pids limit.
func TestNprocEnforced(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("linux only")
	}
	r := testRunner(t, nil)
	ws := testWorkspace(t, r)
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
	s.limits.Pids = 16
	step := mustProven(t, mustLaunch(t, r, s))
	if step.ExitCode != 0 {
		t.Fatalf("fork loop exited %d: %s", step.ExitCode, step.Output)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(step.Output)))
	if err != nil {
		t.Fatalf("fork loop printed %q", step.Output)
	}
	// bwrap's init and python itself count too.
	if n < 1 || n > s.limits.Pids {
		t.Errorf("forked %d processes under a pids limit of %d", n, s.limits.Pids)
	}
	t.Logf("forked %d processes under RLIMIT_NPROC=%d", n, s.limits.Pids)
	requireNamespaceEmpty(t, step)
}
