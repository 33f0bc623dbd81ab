package sandbox

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"

	"golang.org/x/sys/unix"

	"vouch.dev/vouch/gate"
)

// effectiveLimits fills what the recipe left unset from the operator's
// defaults and caps every field by the operator's maximum.
func effectiveLimits(asked, defaults, max gate.Limits) gate.Limits {
	pick64 := func(a, d, m int64) int64 {
		v := a
		if v <= 0 {
			v = d
		}
		if m > 0 && (v <= 0 || v > m) {
			v = m
		}
		return v
	}
	return gate.Limits{
		Memory: pick64(asked.Memory, defaults.Memory, max.Memory),
		Pids:   int(pick64(int64(asked.Pids), int64(defaults.Pids), int64(max.Pids))),
		Tmp:    pick64(asked.Tmp, defaults.Tmp, max.Tmp),
		Output: pick64(asked.Output, defaults.Output, max.Output),
	}
}

// rlimit is one resource limit to set on the blocked sandbox child.
type rlimit struct {
	resource int
	value    uint64
	applied  AppliedLimit
}

// bounds is how one step's limits are enforced: the rlimits set on its
// blocked child (the cgroups are the launcher's), and the record of every
// limit with its mechanism.
type bounds struct {
	rlimits []rlimit
	applied []AppliedLimit
}

// planBounds picks, for each limit of s, what enforces it given the step
// cgroups cg that could be made (nil: none). Memory, pids and CPU go to
// their cgroup controller when it took the limit. Otherwise pids fall back
// to RLIMIT_NPROC, which binds because the sandbox uid is not root (since
// Linux 5.14 it counts the processes of the sandbox's own user namespace);
// CPU falls back to RLIMIT_CPU at the quota's share of the timeout. Memory
// falls back to RLIMIT_AS only for the operator's default: a memory limit
// the recipe asked for and no cgroup can enforce is an error, and the step
// must not run.
func planBounds(s launchSpec, cg *stepCgroup) (bounds, error) {
	if cg == nil {
		cg = &stepCgroup{why: map[string]string{}}
	}
	var b bounds
	rl := func(resource int, value uint64, name string, shown int64, mech string) {
		b.rlimits = append(b.rlimits, rlimit{resource, value, AppliedLimit{Name: name, Value: shown, Mechanism: mech}})
	}
	rec := func(name string, value int64, mech string) {
		b.applied = append(b.applied, AppliedLimit{Name: name, Value: value, Mechanism: mech})
	}
	rec("timeout", s.timeout.Milliseconds(), "vouch:timeout-kill")
	rec("output", s.limits.Output, "vouch:output-kill")
	rec("tmp", s.limits.Tmp, "tmpfs-size")

	if m := s.limits.Memory; m > 0 {
		switch {
		case cg.enforced(ctrlMemory):
			rec("memory", m, cg.mechanism(ctrlMemory))
			if cg.swap {
				rec("swap", 0, cg.mechanism("swap"))
			}
		case s.asked.Memory > 0:
			return bounds{}, fmt.Errorf("memory limit %s requested but not enforceable here: %s", sizeText(m), cg.why[ctrlMemory])
		default:
			rl(unix.RLIMIT_AS, uint64(m), "memory", m, "rlimit:AS")
		}
	}
	if p := s.limits.Pids; p > 0 {
		if cg.enforced(ctrlPids) {
			rec("pids", int64(p), cg.mechanism(ctrlPids))
		} else {
			rl(unix.RLIMIT_NPROC, uint64(p), "pids", int64(p), "rlimit:NPROC")
		}
	}
	if c := s.cpus; c > 0 {
		if cg.enforced(ctrlCPU) {
			rec("cpu", int64(c*1000), cg.mechanism(ctrlCPU))
		} else {
			secs := uint64(math.Ceil(c * s.timeout.Seconds()))
			rl(unix.RLIMIT_CPU, max(secs, 1), "cpu-time", int64(max(secs, 1))*1000, "rlimit:CPU")
		}
	}
	if f := s.fileSize; f > 0 {
		rl(unix.RLIMIT_FSIZE, uint64(f), "fsize", f, "rlimit:FSIZE")
	}
	rl(unix.RLIMIT_CORE, 0, "core", 0, "rlimit:CORE")
	rl(unix.RLIMIT_NOFILE, s.noFile, "nofile", int64(s.noFile), "rlimit:NOFILE")
	for _, r := range b.rlimits {
		b.applied = append(b.applied, r.applied)
	}
	return b, nil
}

// sizeText renders n bytes in the largest binary unit that divides it, as a
// recipe writes sizes ("1GiB").
func sizeText(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d%s", n>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%dB", n)
}

// applyRlimitsAs sets rs on pid, which runs as uid:gid. prlimit(2) on another
// user's process needs CAP_SYS_RESOURCE, which a root vouch may lack (this
// host's root has every capability but that one: measured). When the direct
// call is refused, the limits are set from one locked OS thread that
// temporarily takes the target's ids: credentials are per thread in Linux,
// and a caller whose ids match the target's may lower its limits. The
// thread then returns to its own ids; if it cannot, it is never unlocked and
// the Go runtime discards it.
func applyRlimitsAs(pid, uid, gid int, rs []rlimit) error {
	err := applyRlimits(pid, rs)
	if !errors.Is(err, unix.EPERM) || os.Geteuid() != 0 {
		return err
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		done <- asIDs(uid, gid, func() error { return applyRlimits(pid, rs) })
	}()
	return <-done
}

// asIDs runs fn on the current (locked) OS thread with real and effective
// ids uid:gid, keeping the saved ids so the thread can switch back. It
// unlocks the thread only once its own ids are restored.
func asIDs(uid, gid int, fn func() error) error {
	ruid, euid, suid := unix.Getresuid()
	rgid, egid, sgid := unix.Getresgid()
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(sgid)); e != 0 {
		runtime.UnlockOSThread()
		return fmt.Errorf("thread setresgid %d: %w", gid, e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(suid)); e != 0 {
		if _, _, e2 := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(rgid), uintptr(egid), uintptr(sgid)); e2 == 0 {
			runtime.UnlockOSThread()
		}
		return fmt.Errorf("thread setresuid %d: %w", uid, e)
	}
	err := fn()
	_, _, e1 := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(ruid), uintptr(euid), uintptr(suid))
	_, _, e2 := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(rgid), uintptr(egid), uintptr(sgid))
	if e1 == 0 && e2 == 0 {
		runtime.UnlockOSThread()
	}
	return err
}

// applyRlimits sets each limit (soft and hard) on pid.
func applyRlimits(pid int, rs []rlimit) error {
	for _, r := range rs {
		lim := unix.Rlimit{Cur: r.value, Max: r.value}
		if err := unix.Prlimit(pid, r.resource, &lim, nil); err != nil {
			return fmt.Errorf("prlimit %s=%d on pid %d: %w", r.applied.Mechanism, r.value, pid, err)
		}
	}
	return nil
}
