package seccomp

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	elastic "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/net/bpf"
)

// sandboxUID is the unprivileged uid bwrap runs as when the tests run as
// root, so that the sandbox has no capabilities to lose.
const sandboxUID = 61000

// requireBwrap returns the path of bwrap. A missing bwrap skips the test,
// or fails it under CI=true.
func requireBwrap(tb testing.TB) string {
	tb.Helper()
	if runtime.GOARCH != "amd64" {
		tb.Skipf("filter is x86_64 only; GOARCH=%s", runtime.GOARCH)
	}
	for _, p := range []string{"bwrap", "/usr/bin/bwrap"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		tb.Fatal("bwrap not found and CI=true")
	}
	tb.Skip("bwrap not found")
	return ""
}

// goTool returns the go command that builds the probe.
func goTool(tb testing.TB) string {
	tb.Helper()
	for _, p := range []string{"go", "/usr/local/go/bin/go", filepath.Join(runtime.GOROOT(), "bin", "go")} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	tb.Fatal("no go command to build the probe")
	return ""
}

// buildProbe compiles testdata/probe as a static binary in a fresh module
// under tb.TempDir() and returns the directory holding it, readable and
// traversable by sandboxUID.
func buildProbe(tb testing.TB) string {
	tb.Helper()
	goCmd := goTool(tb)
	root := tb.TempDir()
	src := filepath.Join(root, "src")
	bin := filepath.Join(root, "bin")
	for _, d := range []string{src, bin} {
		if err := os.Mkdir(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	for _, f := range []string{"main.go", "raw_amd64.s"} {
		b, err := os.ReadFile(filepath.Join("testdata", "probe", f))
		if err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, f), b, 0o644); err != nil {
			tb.Fatal(err)
		}
	}

	// The probe's module needs golang.org/x/sys at this module's version,
	// with this module's go.sum lines, so the build stays offline.
	out := func(args ...string) string {
		c := exec.CommandContext(tb.Context(), goCmd, args...)
		c.Env = append(os.Environ(), "GOTOOLCHAIN=local")
		b, err := c.Output()
		if err != nil {
			tb.Fatalf("go %s: %v", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(b))
	}
	version := out("list", "-m", "-f", "{{.Version}}", "golang.org/x/sys")
	sums, err := os.ReadFile(filepath.Join(filepath.Dir(out("env", "GOMOD")), "go.sum"))
	if err != nil {
		tb.Fatal(err)
	}
	var sum strings.Builder
	for line := range strings.Lines(string(sums)) {
		if strings.HasPrefix(line, "golang.org/x/sys "+version+" ") || strings.HasPrefix(line, "golang.org/x/sys "+version+"/") {
			sum.WriteString(line)
		}
	}
	mod := "module probe\n\ngo 1.23\n\nrequire golang.org/x/sys " + version + "\n"
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte(mod), 0o644); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "go.sum"), []byte(sum.String()), 0o644); err != nil {
		tb.Fatal(err)
	}

	build := exec.CommandContext(tb.Context(), goCmd, "build", "-trimpath", "-o", filepath.Join(bin, "probe"), ".")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64",
		"GOTOOLCHAIN=local", "GOFLAGS=-mod=mod", "GOPROXY=off")
	if b, err := build.CombinedOutput(); err != nil {
		tb.Fatalf("build probe: %v\n%s", err, b)
	}

	// t.TempDir's parents are 0700; the sandbox uid must traverse them.
	for d := root; d != filepath.Clean(os.TempDir()) && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o711); err != nil {
			tb.Fatal(err)
		}
	}
	return bin
}

// probeRun is what one sandboxed probe run showed from outside.
type probeRun struct {
	outcome string // "ok", an errno name, or "" when no RESULT line
	detail  string
	reached bool   // printed REACHED before a fatal call
	exit    int    // bwrap's exit status
	stdout  string // everything, for messages
}

// runProbe runs probe case name under bwrap, with filter on fd 3 unless
// filter is nil.
func runProbe(tb testing.TB, bwrap, probeDir string, filter []byte, name string) probeRun {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), 30*time.Second)
	defer cancel()

	args := []string{
		"--unshare-user", "--unshare-net", "--unshare-pid", "--die-with-parent",
		"--ro-bind", "/usr", "/usr",
		"--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
		"--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--ro-bind", probeDir, "/probe",
	}
	cmd := exec.CommandContext(ctx, bwrap)
	if filter != nil {
		r, err := filterFD(filter)
		if err != nil {
			tb.Fatal(err)
		}
		defer r.Close()
		cmd.ExtraFiles = []*os.File{r} // fd 3 in bwrap
		args = append(args, "--seccomp", "3")
	}
	cmd.Args = append(append([]string{bwrap}, args...), "--", "/probe/probe", name)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.Dir = "/"
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: sandboxUID, Gid: sandboxUID}}
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	run := probeRun{stdout: string(stdout)}
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		run.exit = exitErr.ExitCode()
	case err != nil:
		tb.Fatalf("bwrap %s: %v\n%s", name, err, stderr.String())
	}
	sc := bufio.NewScanner(strings.NewReader(run.stdout))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) >= 2 && f[0] == "REACHED" && f[1] == name:
			run.reached = true
		case len(f) >= 3 && f[0] == "RESULT" && f[1] == name:
			run.outcome, run.detail = f[2], strings.Join(f[3:], " ")
		}
	}
	if run.outcome == "" && !run.reached {
		tb.Fatalf("bwrap %s: exit %d, no probe output\nstdout: %s\nstderr: %s", name, run.exit, run.stdout, stderr.String())
	}
	return run
}

// filterFD returns the read end of a pipe holding b, write end closed, so
// that bwrap reads b and then EOF.
func filterFD(b []byte) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	_, err = w.Write(b) // a few hundred bytes: fits the pipe buffer
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// sigsysExit is bwrap's exit status for a child killed by SIGSYS.
const sigsysExit = 128 + int(syscall.SIGSYS)

// TestFilterEffects runs each hostile probe case under real bwrap with the
// filter and again without it, asserting the filtered outcome and, where the
// kernel's own answer does not depend on host policy, that the control run
// differs: the denial is the filter's doing.
func TestFilterEffects(t *testing.T) {
	bwrap := requireBwrap(t)
	f := mustProgram(t)
	probe := buildProbe(t)

	tests := []struct {
		name    string
		want    string // outcome under the filter; "killed" for SIGSYS
		detail  string // required substring of the filtered detail
		control string // outcome without the filter; "" = host policy, recorded only
	}{
		// Positive controls: ordinary work still runs under the filter.
		{name: "getpid", want: "ok", control: "ok"},
		{name: "write_file", want: "ok", detail: "read=hello", control: "ok"},
		{name: "fork", want: "ok", detail: "child_exit=0", control: "ok"},
		{name: "personality_query", want: "ok", control: "ok"},
		{name: "tiocgwinsz", want: "ok", control: "ok"},

		// Denials whose control is fixed by the arguments, not host policy.
		{name: "unshare_user", want: "EPERM", control: "EINVAL"},
		{name: "setns", want: "EPERM", control: "EBADF"},
		{name: "mount", want: "EPERM", control: "EFAULT"},
		{name: "bpf", want: "EPERM", control: "EINVAL"},
		{name: "clone3", want: "ENOSYS", control: "EINVAL"},
		{name: "personality_exec", want: "EPERM", control: "ok"},

		// Denials whose control depends on the host (sysctls, LSMs, caps).
		{name: "clone_newnet", want: "EPERM"},
		{name: "clone_newuser", want: "EPERM"},
		{name: "clone_newuser_hi", want: "EPERM"},
		{name: "ptrace_traceme", want: "EPERM"},
		{name: "ptrace_attach", want: "EPERM"},
		{name: "keyctl", want: "EPERM"},
		{name: "userfaultfd", want: "EPERM"},
		{name: "io_uring_setup", want: "EPERM"},
		{name: "tiocsti", want: "EPERM", detail: "injected=none echoed=none"},
		{name: "tiocsti_hi", want: "EPERM", detail: "injected=none echoed=none"},
		{name: "tioclinux", want: "EPERM"},

		// Foreign ABIs: the process dies in the call.
		{name: "int80", want: "killed"},
		{name: "x32", want: "killed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := runProbe(t, bwrap, probe, f.Bytes, tt.name)
			t.Logf("with filter: %s %s (exit %d)", got.outcome, got.detail, got.exit)
			if tt.want == "killed" {
				if !got.reached || got.outcome != "" || got.exit != sigsysExit {
					t.Errorf("filtered %s: reached=%v outcome=%q exit=%d, want killed by SIGSYS (exit %d) after REACHED\n%s",
						tt.name, got.reached, got.outcome, got.exit, sigsysExit, got.stdout)
				}
			} else if got.outcome != tt.want || !strings.Contains(got.detail, tt.detail) {
				t.Errorf("filtered %s = %s %q, want %s %q", tt.name, got.outcome, got.detail, tt.want, tt.detail)
			}

			ctl := runProbe(t, bwrap, probe, nil, tt.name)
			ctlOutcome := ctl.outcome
			if ctlOutcome == "" {
				ctlOutcome = "killed"
			}
			t.Logf("control without filter: %s %s (exit %d)", ctlOutcome, ctl.detail, ctl.exit)
			switch {
			case tt.control != "" && ctlOutcome != tt.control:
				t.Errorf("unfiltered %s = %s %q, want %s", tt.name, ctlOutcome, ctl.detail, tt.control)
			case tt.control == "" && ctlOutcome == tt.want:
				t.Logf("note: this host denies %s without the filter too", tt.name)
			}
		})
	}
}

// TestSixtyFourBitIoctlRuleIsBypassed shows, with real bwrap, why the ioctl
// rule compares only the low 32 bits: the same rule written with
// go-seccomp-bpf's Equal condition, which compares all 64, stops TIOCSTI
// but lets TIOCSTI|1<<32 inject into the terminal.
func TestSixtyFourBitIoctlRuleIsBypassed(t *testing.T) {
	bwrap := requireBwrap(t)
	probe := buildProbe(t)
	policy := elastic.Policy{
		DefaultAction: elastic.ActionAllow,
		Syscalls: []elastic.SyscallGroup{{
			Action: elastic.ActionErrno,
			NamesWithCondtions: []elastic.NameWithConditions{{
				Name:       "ioctl",
				Conditions: elastic.ArgumentConditions{{Argument: 1, Operation: elastic.Equal, Value: ioctlTIOCSTI}},
			}},
		}},
	}
	ins, err := policy.Assemble()
	if err != nil {
		t.Fatalf("assemble 64-bit policy: %v", err)
	}
	raw, err := bpf.Assemble(ins)
	if err != nil {
		t.Fatalf("encode 64-bit policy: %v", err)
	}
	naive := encode(raw)

	tests := []struct {
		name, want, detail string
	}{
		{"tiocsti", "EPERM", "injected=none"},
		{"tiocsti_hi", "ok", `injected="X"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runProbe(t, bwrap, probe, naive, tt.name)
			t.Logf("64-bit rule: %s %s", got.outcome, got.detail)
			if got.outcome != tt.want || !strings.Contains(got.detail, tt.detail) {
				t.Errorf("64-bit rule, %s = %s %q, want %s %q", tt.name, got.outcome, got.detail, tt.want, tt.detail)
			}
		})
	}
}
