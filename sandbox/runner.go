package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"vouch.dev/vouch/gate"
	"vouch.dev/vouch/sandbox/seccomp"
)

// ErrInvalidPlan is returned by Run for a plan the gate did not admit.
var ErrInvalidPlan = errors.New("sandbox: plan not admitted by the gate")

// ErrInvalidStep is returned by Run for a step that cannot be launched as
// written (empty argv, NUL bytes, unknown toolchain).
var ErrInvalidStep = errors.New("sandbox: invalid step")

// Runner runs admitted plans in bubblewrap, one proven sandbox per step.
type Runner struct {
	cfg    Config
	logger *slog.Logger
	links  []rootLink
	// filter is the seccomp program every step runs under.
	filter seccomp.Filter
	// cgroups is what this host offers for per-step cgroups.
	cgroups *cgroupHost
}

// New returns a Runner for cfg. A missing bwrap is not an error here: Run
// reports it as unproven isolation.
func New(cfg Config, logger *slog.Logger) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("sandbox config: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	filter, err := seccomp.Program()
	if err != nil {
		return nil, fmt.Errorf("sandbox seccomp filter: %w", err)
	}
	cg := detectCgroups(cfg.CgroupRoot, cfg.CgroupParent)
	logger.Debug("cgroups", "version", cg.version, "parents", cg.parent, "unavailable", cg.why)
	return &Runner{cfg: cfg, logger: logger, links: hostRootLinks(), filter: filter, cgroups: cg}, nil
}

// Run materializes plan's head tree into a fresh workspace and runs the
// recipe's steps in order, each in its own bwrap whose isolation is proven
// before the step is released. A failing step (exit ≠ 0, timeout, output
// limit) ends the run; so does unproven isolation, reported in
// Result.Unproven and never as a Go error. A Go error means vouch itself
// failed (workspace, materialization, cancellation) or the plan is invalid.
func (r *Runner) Run(ctx context.Context, plan *gate.Plan) (*Result, error) {
	if !plan.Valid() {
		return nil, ErrInvalidPlan
	}
	log := r.logger.With("head", plan.Head())
	return r.run(ctx, log, plan.Recipe(), func(root *os.Root) error {
		return plan.Materialize(ctx, root)
	})
}

// Probe proves the sandbox on this host, as `vouch doctor` does: it runs
// `cat /proc/self/status` in an empty workspace, so the step's output shows
// the child's own view of its ids, capabilities, NoNewPrivs and seccomp mode.
func (r *Runner) Probe(ctx context.Context) (*Result, error) {
	recipe := gate.Recipe{Version: 1, Steps: []gate.Step{{Name: "probe", Run: []string{"cat", "/proc/self/status"}, Timeout: 30 * time.Second}}}
	return r.run(ctx, r.logger, recipe, func(*os.Root) error { return nil })
}

// run is Run after the plan check: fill is what writes the workspace.
func (r *Runner) run(ctx context.Context, log *slog.Logger, recipe gate.Recipe, fill func(*os.Root) error) (*Result, error) {
	res := &Result{Provider: "bubblewrap", Seccomp: SeccompFacts{SHA256: r.filter.SHA256, Denied: slices.Clone(r.filter.Denied)}}
	tcs, err := r.toolchains(recipe.Toolchains)
	if err != nil {
		return nil, err
	}
	var binds []roBind
	for _, tc := range tcs {
		for _, p := range tc.Paths {
			binds = append(binds, roBind{path: p})
		}
	}
	env, err := stepEnv(recipe.Env, tcs)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidStep, err)
	}
	for _, st := range recipe.Steps {
		if len(st.Run) == 0 || slices.ContainsFunc(st.Run, func(a string) bool { return strings.ContainsRune(a, 0) }) {
			return nil, fmt.Errorf("%w: step %q: empty argv or NUL byte", ErrInvalidStep, st.Name)
		}
	}
	if r.cfg.Mode == ModeTrustedDevelopment {
		return r.runTrusted(ctx, log, recipe, fill, env)
	}
	path, version, perr := r.provider(ctx)
	res.Path, res.Version = path, version
	if path != "" {
		res.SHA256 = fileSHA256(path)
	}
	if perr != nil {
		log.Warn("sandbox unavailable", "cause", perr.Cause)
		res.Unproven = perr
		return res, nil
	}

	limits := effectiveLimits(recipe.Limits, r.cfg.Defaults, r.cfg.Max)
	for _, st := range recipe.Steps {
		// Every step starts from the head tree itself: a step runs head
		// code, so what it leaves behind (a rewritten protected script, a
		// planted symlink) must not reach the next step.
		ws, err := r.prepare(fill)
		if err != nil {
			return nil, err
		}
		timeout := st.Deadline()
		spec := launchSpec{
			name: st.Name, argv: st.Run, env: env, workspace: ws.dir,
			limits: limits, asked: recipe.Limits, cpus: r.cfg.CPUs, fileSize: r.cfg.FileSize,
			timeout: timeout, binds: binds, noFile: r.cfg.NoFile,
		}
		out, err := r.launch(ctx, path, spec)
		r.discard(log, ws)
		if out.proof != nil {
			if ctx.Err() != nil { // cancelled while proving: no verdict, not unproven
				return res, fmt.Errorf("step %q: %w", st.Name, ctx.Err())
			}
			out.proof.Step = st.Name
			res.Unproven = out.proof
			break
		}
		if out.step.Name != "" {
			res.Steps = append(res.Steps, out.step)
			if res.Namespaces == nil {
				res.Namespaces = out.step.Namespaces
			}
			for _, al := range out.limits {
				if !slices.Contains(res.Limits, al) {
					res.Limits = append(res.Limits, al)
				}
			}
		}
		if err != nil {
			return res, err
		}
		if s := out.step; s.ExitCode != 0 || s.TimedOut || s.OutputLimited {
			break
		}
	}
	res.Isolated = res.Unproven == nil && len(res.Steps) > 0
	return res, nil
}

// provider resolves the bwrap binary and asks its version, as the sandbox
// uid would run it. Any failure is unproven isolation, not a Go error.
func (r *Runner) provider(ctx context.Context) (path, version string, perr *ProofError) {
	name := r.cfg.Bwrap
	if name == "" {
		name = "bwrap"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", "", &ProofError{Cause: fmt.Sprintf("bubblewrap not found: %v", err)}
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if perr := trustedBinary(path); perr != nil {
		return path, "", perr
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Env = []string{}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &limitedBuffer{buf: &stdout, n: 512}
	cmd.Stderr = &limitedBuffer{buf: &stderr, n: maxStderr}
	cmd.SysProcAttr = r.sysProcAttr()
	cmd.WaitDelay = time.Second // a provider's leftover child must not hold us on its pipes
	if err := cmd.Run(); err != nil {
		return path, "", &ProofError{Cause: fmt.Sprintf("%s --version: %v", path, err), Stderr: stderr.String()}
	}
	return path, strings.TrimSpace(stdout.String()), nil
}

// toolchains looks up the recipe's toolchain names in the operator's config.
func (r *Runner) toolchains(names []string) ([]Toolchain, error) {
	var tcs []Toolchain
	for _, n := range names {
		tc, ok := r.cfg.Toolchains[n]
		if !ok {
			return nil, fmt.Errorf("%w: toolchain %q is not configured by the operator", ErrInvalidStep, n)
		}
		tcs = append(tcs, tc)
	}
	return tcs, nil
}

// limitedBuffer keeps at most n bytes and discards the rest.
type limitedBuffer struct {
	buf *bytes.Buffer
	n   int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.n - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

var _ io.Writer = (*limitedBuffer)(nil)

// prepare makes a fresh workspace, fills it and gives it to the sandbox uid.
func (r *Runner) prepare(fill func(*os.Root) error) (*workspace, error) {
	gid := -1
	if os.Geteuid() == 0 {
		gid = r.cfg.GID
	}
	ws, err := newWorkspace(r.cfg.WorkRoot, gid)
	if err != nil {
		return nil, err
	}
	if err := fill(ws.root); err != nil {
		ws.remove() //nolint:errcheck // the materialize error is the one to report
		return nil, fmt.Errorf("materialize into %s: %w", ws.dir, err)
	}
	if gid >= 0 {
		if err := ws.chown(r.cfg.UID, r.cfg.GID); err != nil {
			ws.remove() //nolint:errcheck // the chown error is the one to report
			return nil, err
		}
	}
	return ws, nil
}

// discard removes a step's workspace, or only closes it when the operator
// keeps workspaces for debugging.
func (r *Runner) discard(log *slog.Logger, ws *workspace) {
	if r.cfg.KeepWorkspace {
		ws.root.Close()
		return
	}
	if err := ws.remove(); err != nil {
		log.Error("remove workspace", "dir", ws.dir, "err", err)
	}
}
