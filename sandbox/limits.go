package sandbox

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

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

// rlimits lists the resource limits for a step. They are set on bwrap's
// sandbox child while it is blocked, so the command and everything it starts
// inherit them. RLIMIT_NPROC binds because the sandbox uid is not root; since
// Linux 5.14 it counts the processes of the sandbox's own user namespace.
// Memory is bounded by address space (RLIMIT_AS) only when a limit is set:
// cgroup v1 offers no unprivileged memory controller.
func rlimits(l gate.Limits, noFile uint64) []rlimit {
	rs := []rlimit{
		{unix.RLIMIT_NPROC, uint64(l.Pids), AppliedLimit{Name: "pids", Value: int64(l.Pids), Mechanism: "rlimit:NPROC"}},
		{unix.RLIMIT_CORE, 0, AppliedLimit{Name: "core", Value: 0, Mechanism: "rlimit:CORE"}},
		{unix.RLIMIT_NOFILE, noFile, AppliedLimit{Name: "nofile", Value: int64(noFile), Mechanism: "rlimit:NOFILE"}},
	}
	if l.Memory > 0 {
		rs = append(rs, rlimit{unix.RLIMIT_AS, uint64(l.Memory), AppliedLimit{Name: "memory", Value: l.Memory, Mechanism: "rlimit:AS"}})
	}
	return rs
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

// stepLimits records every bound a launched step ran under.
func stepLimits(l gate.Limits, timeout time.Duration, rs []rlimit) []AppliedLimit {
	out := []AppliedLimit{
		{Name: "timeout", Value: timeout.Milliseconds(), Mechanism: "vouch:timeout-kill"},
		{Name: "output", Value: l.Output, Mechanism: "vouch:output-kill"},
		{Name: "tmp", Value: l.Tmp, Mechanism: "tmpfs-size"},
	}
	for _, r := range rs {
		out = append(out, r.applied)
	}
	return out
}
