package sandbox

import (
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"
)

// BenchmarkLaunchProveReap measures one step of `true` through the whole
// launcher: start blocked, prove seven namespaces, bound it (cgroups and
// rlimits), release, reap, remove its cgroups. Each iteration also runs the
// bare bwrap (outside the timer) and the benchmark reports both per-launch
// costs and their difference as bare-ns/op and overhead-ns/op (target:
// overhead at most 20 ms). "cgroups" uses the per-step cgroups this host
// gives (memory, pids, CPU quota and CPU accounting; none where there are
// none), "rlimits" turns them off so every limit is an rlimit.
func BenchmarkLaunchProveReap(b *testing.B) {
	b.Run("cgroups", func(b *testing.B) { benchLaunch(b, nil) })
	b.Run("rlimits", func(b *testing.B) {
		empty := b.TempDir()
		benchLaunch(b, func(c *Config) { c.CgroupRoot = empty })
	})
}

func benchLaunch(b *testing.B, mod func(*Config)) {
	r := testRunner(b, mod)
	ws := testWorkspace(b, r)
	bwrap := requireBwrap(b)
	s := testSpec(r, ws, "true")
	s.cpus, s.fileSize = r.cfg.CPUs, r.cfg.FileSize
	bare := bareBwrap(r, bwrap, s)
	var bareTotal time.Duration
	n, cgroups := 0, 0
	for b.Loop() {
		out, err := r.launch(b.Context(), bwrap, s)
		if err != nil || out.proof != nil || out.step.ExitCode != 0 {
			b.Fatalf("launch: %v %v %+v", err, out.proof, out.step)
		}
		b.StopTimer()
		cgroups = len(out.cgroups)
		start := time.Now()
		if err := bare(); err != nil {
			b.Fatal(err)
		}
		bareTotal += time.Since(start)
		n++
		b.StartTimer()
	}
	full := b.Elapsed() / time.Duration(n)
	barePer := bareTotal / time.Duration(n)
	b.ReportMetric(float64(barePer.Nanoseconds()), "bare-ns/op")
	b.ReportMetric(float64((full - barePer).Nanoseconds()), "overhead-ns/op")
	b.ReportMetric(float64(cgroups), "cgroups/op")
}

// BenchmarkBareBwrap runs the same bwrap argv, minus --info-fd and
// --block-fd, with the same credentials, the same synthesized /etc and the
// same seccomp program, and just waits for it: the cost of bubblewrap itself.
func BenchmarkBareBwrap(b *testing.B) {
	r := testRunner(b, nil)
	ws := testWorkspace(b, r)
	bwrap := requireBwrap(b)
	bare := bareBwrap(r, bwrap, testSpec(r, ws, "true"))
	for b.Loop() {
		if err := bare(); err != nil {
			b.Fatal(err)
		}
	}
}

// bareBwrap returns a function running s's bwrap argv without the proof
// machinery.
func bareBwrap(r *Runner, bwrap string, s launchSpec) func() error {
	args := bwrapArgs(s, r.links)
	for _, flag := range []string{"--info-fd", "--block-fd"} {
		i := slices.Index(args, flag)
		args = slices.Delete(args, i, i+2)
	}
	return func() error {
		etc, err := etcPipes()
		if err != nil {
			return err
		}
		defer closeFiles(etc)
		filter, err := dataPipe(r.filter.Bytes)
		if err != nil {
			return err
		}
		defer filter.Close()
		cmd := exec.Command(bwrap, args...)
		cmd.Env = []string{}
		cmd.ExtraFiles = append(append([]*os.File{nil, nil}, etc...), filter)
		cmd.SysProcAttr = r.sysProcAttr()
		return cmd.Run()
	}
}
