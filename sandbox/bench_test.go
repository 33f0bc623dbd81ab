package sandbox

import (
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"
)

// BenchmarkLaunchProveReap measures one step of `true` through the whole
// launcher: start blocked, prove seven namespaces, set rlimits, release,
// reap. Each iteration also runs the bare bwrap (outside the timer) and the
// benchmark reports both per-launch costs and their difference as
// bare-ns/op and overhead-ns/op (target: overhead at most 20 ms).
func BenchmarkLaunchProveReap(b *testing.B) {
	r := testRunner(b, nil)
	ws := testWorkspace(b, r)
	bwrap := requireBwrap(b)
	s := testSpec(r, ws, "true")
	bare := bareBwrap(r, bwrap, s)
	var bareTotal time.Duration
	n := 0
	for b.Loop() {
		out, err := r.launch(b.Context(), bwrap, s)
		if err != nil || out.proof != nil || out.step.ExitCode != 0 {
			b.Fatalf("launch: %v %v %+v", err, out.proof, out.step)
		}
		b.StopTimer()
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
}

// BenchmarkBareBwrap runs the same bwrap argv, minus --info-fd and
// --block-fd, with the same credentials and the same synthesized /etc, and
// just waits for it: the cost of bubblewrap itself.
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
		cmd := exec.Command(bwrap, args...)
		cmd.Env = []string{}
		cmd.ExtraFiles = append([]*os.File{nil, nil}, etc...)
		cmd.SysProcAttr = r.sysProcAttr()
		return cmd.Run()
	}
}
