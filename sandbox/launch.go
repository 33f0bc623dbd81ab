package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"vouch.dev/vouch/gate"
)

// maxStderr bounds the provider's stderr kept in a ProofError.
const maxStderr = 8 << 10

// reapTimeout bounds the wait for the sandbox to be gone after a kill.
const reapTimeout = 10 * time.Second

// launchSpec is everything one sandboxed step needs.
type launchSpec struct {
	name      string
	argv      []string
	env       []string    // sorted KEY=VALUE, the whole environment
	workspace string      // host directory bound at WorkDir
	limits    gate.Limits // effective: recipe, else operator default, capped
	asked     gate.Limits // what the recipe itself asked for: must be enforced
	cpus      float64     // CPU quota in CPUs, 0 for none
	fileSize  int64       // RLIMIT_FSIZE, 0 for none
	timeout   time.Duration
	binds     []roBind
	noFile    uint64
}

// launchOutcome is what one launch observed. When proof is set the step was
// never released: nothing of it ran.
type launchOutcome struct {
	step   StepResult
	limits []AppliedLimit
	proof  *ProofError
	// cgroups lists the step cgroup directories that were made (and are
	// removed by the time launch returns).
	cgroups []string
}

// launcher is the host side of one bwrap: the process, its pipes and, once
// known, the sandbox child.
type launcher struct {
	logger   *slog.Logger
	cmd      *exec.Cmd
	waited   chan struct{} // closed once cmd.Wait returned
	infoR    *os.File
	blockW   *os.File // writing one byte releases the child; closing it does too
	out      *capture
	childPid int
	pidfd    int // -1 until opened
	uid, gid int // host ids bwrap runs as
	cgroups  *cgroupHost
	cg       *stepCgroup // the step's cgroups once made, nil when none
	cgDirs   []string    // every cgroup directory made for the step
}

// launch starts bwrap blocked, proves the isolation of its child, applies
// the limits, releases the child and reaps it. A Go error means vouch itself
// failed before anything was started, or ctx was cancelled (the step is then
// killed and reaped first); every other failure is in the outcome.
func (r *Runner) launch(ctx context.Context, bwrap string, s launchSpec) (launchOutcome, error) {
	hostNS, err := namespaceLinks("self")
	if err != nil {
		return launchOutcome{}, fmt.Errorf("launch step %q: %w", s.name, err)
	}
	l, perr, err := r.start(bwrap, s)
	if err != nil || perr != nil {
		return launchOutcome{proof: perr}, err
	}
	log := r.logger.With("step", s.name, "bwrap_pid", l.cmd.Process.Pid)

	pairs, b, perr := l.prove(ctx, hostNS, s, r.cfg.ProofTimeout)
	if perr != nil {
		l.kill()
		l.finish()
		stderr, _ := l.out.result()
		perr.Stderr = string(stderr[:min(len(stderr), maxStderr)])
		log.Warn("isolation unproven, step not released", "cause", perr.Cause)
		return launchOutcome{proof: perr, cgroups: l.cgDirs}, nil
	}

	// Release: the child proceeds to exec the step.
	released := time.Now()
	_, werr := l.blockW.Write([]byte{1})
	l.blockW.Close()
	l.blockW = nil
	step := StepResult{Name: s.name, Namespaces: pairs}
	out := launchOutcome{limits: b.applied, cgroups: l.cgDirs}
	if werr != nil {
		// The child is gone (EPIPE): it cannot run anything any more.
		log.Warn("release failed", "err", werr)
	}

	timer := time.NewTimer(s.timeout)
	defer timer.Stop()
	killed := false
	var cancelled error
	select {
	case <-l.waited:
	case <-timer.C:
		step.TimedOut, killed = true, true
	case <-l.out.exceeded:
		step.OutputLimited, killed = true, true
	case <-ctx.Done():
		cancelled, killed = ctx.Err(), true
	}
	if killed {
		l.kill()
	}
	st := l.finish()
	step.Duration = time.Since(released)
	step.OOMKilled, step.CPUTime = st.oomKilled, st.cpu
	if !st.cpuKnown {
		// A lower bound: bwrap exits without reaping its sandbox's init,
		// so the step's own processes are often missing from this.
		step.CPUTime = l.cmd.ProcessState.UserTime() + l.cmd.ProcessState.SystemTime()
	}
	step.Output, step.OutputBytes = l.out.result()
	if step.OutputBytes > s.limits.Output {
		step.OutputLimited = true
	}
	step.ExitCode = l.cmd.ProcessState.ExitCode()
	if killed {
		step.ExitCode = -1
	}
	out.step = step
	log.Info("step reaped", "exit_code", step.ExitCode, "timed_out", step.TimedOut,
		"output_limited", step.OutputLimited, "oom_killed", step.OOMKilled,
		"duration", step.Duration, "cpu_time", step.CPUTime)
	if cancelled != nil {
		return out, fmt.Errorf("step %q: %w", s.name, cancelled)
	}
	return out, nil
}

// start creates the pipes and starts bwrap. A *ProofError means bwrap could
// not be started (nothing ran); an error means vouch could not make its pipes.
func (r *Runner) start(bwrap string, s launchSpec) (*launcher, *ProofError, error) {
	var opened []*os.File
	closeAll := func() {
		for _, f := range opened {
			f.Close()
		}
	}
	pipe := func() (*os.File, *os.File, error) {
		pr, pw, err := os.Pipe()
		if err != nil {
			return nil, nil, fmt.Errorf("launch step %q: pipe: %w", s.name, err)
		}
		opened = append(opened, pr, pw)
		return pr, pw, nil
	}
	infoR, infoW, err := pipe()
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	blockR, blockW, err := pipe()
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	etc, err := etcPipes()
	if err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("launch step %q: %w", s.name, err)
	}
	opened = append(opened, etc...)
	filterR, err := dataPipe(r.filter.Bytes)
	if err != nil {
		closeAll()
		return nil, nil, fmt.Errorf("launch step %q: seccomp: %w", s.name, err)
	}
	opened = append(opened, filterR)

	cmd := exec.Command(bwrap, bwrapArgs(s, r.links)...)
	cmd.Env = []string{} // empty, not inherited: /proc/1/environ inside is bwrap's
	cmd.Stdout, cmd.Stderr = outW, outW
	cmd.ExtraFiles = append(append([]*os.File{infoW, blockR}, etc...), filterR)
	cmd.SysProcAttr = r.sysProcAttr()
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, &ProofError{Cause: fmt.Sprintf("start %s: %v", bwrap, err)}, nil
	}
	// Keep only our ends: the info reader, the block writer, the output reader.
	for _, f := range append([]*os.File{infoW, blockR, outW, filterR}, etc...) {
		f.Close()
	}
	l := &launcher{
		logger: r.logger, cmd: cmd, waited: make(chan struct{}),
		infoR: infoR, blockW: blockW, out: newCapture(outR, s.limits.Output), pidfd: -1,
		uid: os.Getuid(), gid: os.Getgid(), cgroups: r.cgroups,
	}
	if os.Geteuid() == 0 {
		l.uid, l.gid = r.cfg.UID, r.cfg.GID
	}
	go func() {
		cmd.Wait() // the exit status is read from cmd.ProcessState
		close(l.waited)
	}()
	return l, nil, nil
}

// sysProcAttr runs bwrap as the dedicated unprivileged ids when vouch is
// root, with no supplementary groups, in its own process group.
func (r *Runner) sysProcAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() == 0 {
		a.Credential = &syscall.Credential{Uid: uint32(r.cfg.UID), Gid: uint32(r.cfg.GID), Groups: []uint32{}}
	}
	return a
}

// etcPipes returns one read end per synthesized /etc file, its content
// already written and the write end closed.
func etcPipes() ([]*os.File, error) {
	var rs []*os.File
	for _, f := range etcFiles {
		pr, err := dataPipe([]byte(f.data))
		if err != nil {
			closeFiles(rs)
			return nil, fmt.Errorf("%s: %w", f.path, err)
		}
		rs = append(rs, pr)
	}
	return rs, nil
}

// dataPipe returns the read end of a pipe holding data, its write end
// closed so the reader sees EOF. data must fit the pipe buffer (64 KiB).
func dataPipe(data []byte) (*os.File, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("pipe: %w", err)
	}
	_, err = pw.Write(data)
	pw.Close()
	if err != nil {
		pr.Close()
		return nil, fmt.Errorf("write pipe: %w", err)
	}
	return pr, nil
}

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// prove reads the child pid bwrap reports, pins the child with a pidfd,
// checks it descends from our bwrap and that none of its namespaces is the
// host's, and bounds it: bwrap and the child are moved into the step's
// cgroups and the child's rlimits are set. The child stays blocked
// throughout, so everything the step starts is born inside those bounds. A
// limit the recipe asked for that cannot be enforced is a proof failure.
func (l *launcher) prove(ctx context.Context, hostNS map[string]string, s launchSpec, wait time.Duration) (map[string]NamespacePair, bounds, *ProofError) {
	type info struct {
		pid int
		err error
	}
	ch := make(chan info, 1)
	go func() {
		pid, err := readChildPid(l.infoR)
		ch <- info{pid, err}
	}()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var got info
	select {
	case got = <-ch:
	case <-timer.C:
		got.err = fmt.Errorf("no child pid from bwrap within %v", wait)
	case <-ctx.Done():
		got.err = fmt.Errorf("waiting for bwrap's child pid: %w", ctx.Err())
	}
	// infoR stays open until finish: a provider writing more to it must not
	// die of SIGPIPE and orphan a half-made child out of reach of kill.
	if got.err != nil {
		return nil, bounds{}, &ProofError{Cause: got.err.Error()}
	}
	fd, err := unix.PidfdOpen(got.pid, 0)
	if err != nil {
		return nil, bounds{}, &ProofError{Cause: fmt.Sprintf("pidfd_open child %d: %v", got.pid, err)}
	}
	// Only a process bwrap started is ever signalled through the pidfd: a
	// provider that reports pid 1, vouch's own pid or its own must not make
	// vouch kill it.
	if err := checkDescendant(got.pid, l.cmd.Process.Pid); err != nil {
		unix.Close(fd)
		return nil, bounds{}, &ProofError{Cause: err.Error()}
	}
	l.childPid, l.pidfd = got.pid, fd
	childNS, err := namespaceLinks(strconv.Itoa(got.pid))
	if err != nil {
		return nil, bounds{}, &ProofError{Cause: err.Error()}
	}
	// The pidfd still names a live process, so every /proc read above was
	// about it and not about a process that reused its pid.
	if err := unix.PidfdSendSignal(fd, 0, nil, 0); err != nil {
		return nil, bounds{}, &ProofError{Cause: fmt.Sprintf("child %d exited before release: %v", got.pid, err)}
	}
	pairs, perr := compareNamespaces(hostNS, childNS)
	if perr != nil {
		return nil, bounds{}, perr
	}
	b, perr := l.bound(s)
	if perr != nil {
		return nil, bounds{}, perr
	}
	if err := applyRlimitsAs(got.pid, l.uid, l.gid, b.rlimits); err != nil {
		return nil, bounds{}, &ProofError{Cause: err.Error()}
	}
	return pairs, b, nil
}

// bound makes the step's cgroups, moves bwrap and its blocked child into
// them, and decides what enforces each limit.
func (l *launcher) bound(s launchSpec) (bounds, *ProofError) {
	var cg *stepCgroup
	if l.cgroups != nil {
		cg = l.cgroups.create(cgroupWant{memory: s.limits.Memory, pids: s.limits.Pids, cpus: s.cpus})
		l.cg = cg // finish removes whatever was made, even on failure
		l.cgDirs = slices.Clone(cg.made)
		if err := cg.add(l.cmd.Process.Pid, l.childPid); err != nil {
			return bounds{}, &ProofError{Cause: err.Error()}
		}
	}
	b, err := planBounds(s, cg)
	if err != nil {
		return bounds{}, &ProofError{Cause: err.Error()}
	}
	// When memory runs out in a cgroup vouch shares (its own, or the host),
	// the kernel must pick the step, not vouch: tmpfs pages belong to no
	// process, so without this the largest process — vouch — dies.
	if err := preferOOMKill(l.childPid, l.cmd.Process.Pid); err != nil {
		return bounds{}, &ProofError{Cause: err.Error()}
	}
	for _, a := range b.applied {
		if a.Mechanism == "rlimit:AS" || a.Mechanism == "rlimit:CPU" || (a.Name == "pids" && a.Mechanism == "rlimit:NPROC") {
			l.logger.Info("limit falls back to an rlimit", "limit", a.Name, "mechanism", a.Mechanism, "why", cg.whyFor(a.Name))
		}
	}
	return b, nil
}

// kill stops the sandbox without ever releasing it. bwrap is frozen first
// (SIGSTOP, and seen stopped: a clone in flight completes before the stop
// lands), so it can start nothing new and no child it started can be
// orphaned; then the reported child dies by pidfd, then every other
// descendant of bwrap, and only then bwrap itself. The block pipe is closed
// later, by finish, when nothing that could read it is alive.
func (l *launcher) kill() {
	bwrap := l.cmd.Process.Pid
	l.cmd.Process.Signal(syscall.SIGSTOP) //nolint:errcheck // it may be gone
	if !waitStopped(bwrap, time.Now().Add(time.Second)) {
		l.logger.Warn("bwrap not seen stopped before kill", "pid", bwrap)
	}
	if l.pidfd >= 0 {
		if err := unix.PidfdSendSignal(l.pidfd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
			l.logger.Warn("kill sandbox child", "pid", l.childPid, "err", err)
		}
	}
	killDescendants(l.logger, bwrap)
	if err := l.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		l.logger.Warn("kill bwrap", "err", err)
	}
}

// finish makes sure nothing of the step is left: it kills the sandbox child
// (a no-op after a normal exit), waits until the child has exited (its pid
// namespace is then empty: the kernel reaps a namespace before its pid 1
// finishes exiting), waits for bwrap, closes the block pipe, waits for the
// output pipe to drain, and finally empties and removes the step's
// cgroups, returning what they counted.
func (l *launcher) finish() (st cgroupStats) {
	deadline := time.Now().Add(reapTimeout)
	if l.pidfd >= 0 {
		unix.PidfdSendSignal(l.pidfd, unix.SIGKILL, nil, 0) //nolint:errcheck // ESRCH once gone
		waitPidfd(l.pidfd, deadline)
	}
	select {
	case <-l.waited:
	case <-time.After(time.Until(deadline)):
		l.logger.Error("bwrap not reaped in time", "pid", l.cmd.Process.Pid)
		l.cmd.Process.Kill() //nolint:errcheck // best effort
		<-l.waited
	}
	if l.pidfd >= 0 {
		unix.Close(l.pidfd)
		l.pidfd = -1
	}
	if l.blockW != nil {
		l.blockW.Close()
		l.blockW = nil
	}
	l.infoR.Close()
	select {
	case <-l.out.done:
	case <-time.After(time.Until(deadline) + time.Second):
		l.logger.Error("output pipe still open after the step ended")
	}
	if l.cg != nil {
		var err error
		st, err = l.cg.destroy(time.Now().Add(reapTimeout))
		if err != nil {
			l.logger.Error("remove step cgroup", "err", err)
		}
		l.cg = nil
	}
	return st
}

// killDescendants SIGKILLs, through pidfds, every process whose parent chain
// reaches ancestor.
func killDescendants(logger *slog.Logger, ancestor int) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		logger.Warn("list processes", "err", err)
		return
	}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, err := parentPid(pid); err == nil {
			children[ppid] = append(children[ppid], pid)
		}
	}
	queue := append([]int(nil), children[ancestor]...)
	for len(queue) > 0 {
		pid := queue[0]
		queue = append(queue[1:], children[pid]...)
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // already gone
		}
		unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) //nolint:errcheck // ESRCH once gone
		unix.Close(fd)
	}
}

// waitPidfd polls pidfd until its process has exited or the deadline passes.
func waitPidfd(pidfd int, deadline time.Time) bool {
	for {
		ms := int(time.Until(deadline).Milliseconds())
		if ms <= 0 {
			return false
		}
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, ms)
		if err != nil && errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && n > 0
	}
}
