package sandbox

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"vouch.dev/vouch/gate"
)

// runTrusted runs the recipe's steps WITHOUT isolation, for the operator's
// explicit trusted-development mode: each step still gets a fresh workspace,
// a clean environment, the unprivileged uid when vouch is root, its timeout
// and its output cap, but no namespaces, seccomp or read-only root. The
// result says so: Isolated is false, Mode is trusted-development.
func (r *Runner) runTrusted(ctx context.Context, log *slog.Logger, recipe gate.Recipe, fill func(*os.Root) error, env []string) (*Result, error) {
	res := &Result{Provider: "none", Mode: ModeTrustedDevelopment}
	log.Warn("trusted-development mode: steps run WITHOUT isolation")
	if recipe.Limits.Memory > 0 || recipe.Limits.Pids > 0 || recipe.Limits.Tmp > 0 {
		res.Unproven = &ProofError{Cause: "the recipe asks for memory, pids or tmp limits, which trusted-development mode cannot enforce"}
		return res, nil
	}
	limits := effectiveLimits(recipe.Limits, r.cfg.Defaults, r.cfg.Max)
	res.Limits = []AppliedLimit{
		{Name: "output", Value: limits.Output, Mechanism: "vouch:output-kill"},
	}
	for _, st := range recipe.Steps {
		ws, err := r.prepare(fill)
		if err != nil {
			return nil, err
		}
		timeout := st.Deadline()
		step, err := r.direct(ctx, st, ws, env, limits.Output, timeout)
		r.discard(log, ws)
		if err != nil {
			return res, err
		}
		res.Steps = append(res.Steps, step)
		if step.ExitCode != 0 || step.TimedOut || step.OutputLimited {
			break
		}
	}
	return res, nil
}

// direct runs one step as a plain child process group in ws.
func (r *Runner) direct(ctx context.Context, st gate.Step, ws *workspace, env []string, outCap int64, timeout time.Duration) (StepResult, error) {
	home, err := os.MkdirTemp(filepath.Dir(ws.dir), "home-")
	if err != nil {
		return StepResult{}, fmt.Errorf("step %q: home: %w", st.Name, err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(home, r.cfg.UID, r.cfg.GID); err != nil {
			return StepResult{}, fmt.Errorf("step %q: home: %w", st.Name, err)
		}
	}
	stepEnv := make([]string, 0, len(env))
	for _, kv := range env {
		switch {
		case strings.HasPrefix(kv, "HOME="):
			kv = "HOME=" + home
		case strings.HasPrefix(kv, "PWD="):
			kv = "PWD=" + ws.dir
		}
		stepEnv = append(stepEnv, kv)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return StepResult{}, fmt.Errorf("step %q: pipe: %w", st.Name, err)
	}
	cmd := exec.Command(st.Run[0], st.Run[1:]...)
	cmd.Dir, cmd.Env = ws.dir, stepEnv
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(r.cfg.UID), Gid: uint32(r.cfg.GID), Groups: []uint32{}}
	}
	out := newCapture(pr, outCap)
	step := StepResult{Name: st.Name}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		pw.Close()
		<-out.done
		step.ExitCode = 127
		step.Output = []byte(err.Error() + "\n")
		step.OutputBytes = int64(len(step.Output))
		return step, nil
	}
	pw.Close()
	waited := make(chan struct{})
	go func() { cmd.Wait(); close(waited) }() //nolint:errcheck // status read from ProcessState
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var cancelled error
	select {
	case <-waited:
	case <-timer.C:
		step.TimedOut = true
	case <-out.exceeded:
		step.OutputLimited = true
	case <-ctx.Done():
		cancelled = ctx.Err()
	}
	// The whole process group goes, whether or not the step ended by itself.
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck // may be gone
	<-waited
	select {
	case <-out.done:
	case <-time.After(time.Second): // a descendant that left the group may hold the pipe
		pr.Close()
	}
	step.Duration = time.Since(started)
	step.Output, step.OutputBytes = out.result()
	step.ExitCode = cmd.ProcessState.ExitCode()
	if step.TimedOut || step.OutputLimited {
		step.ExitCode = -1
	}
	if cancelled != nil {
		return step, fmt.Errorf("step %q: %w", st.Name, cancelled)
	}
	return step, nil
}
