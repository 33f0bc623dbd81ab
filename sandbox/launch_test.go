package sandbox

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestProofAllNamespacesDiffer: every one of the seven namespaces of the
// released child was observed and differs from vouch's own.
func TestProofAllNamespacesDiffer(t *testing.T) {
	r := testRunner(t, nil)
	ws := testWorkspace(t, r)
	step := mustProven(t, mustLaunch(t, r, testSpec(r, ws, "true")))
	if step.ExitCode != 0 {
		t.Fatalf("true exited %d: %s", step.ExitCode, step.Output)
	}
	host, err := namespaceLinks("self")
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range Namespaces {
		p, ok := step.Namespaces[kind]
		if !ok {
			t.Errorf("namespace %s not recorded", kind)
			continue
		}
		if p.Host != host[kind] {
			t.Errorf("%s host = %q, want %q", kind, p.Host, host[kind])
		}
		if p.Child == "" || p.Child == p.Host || !strings.HasPrefix(p.Child, kind+":[") {
			t.Errorf("%s child = %q, host %q: not a distinct namespace", kind, p.Child, p.Host)
		}
	}
	requireNamespaceEmpty(t, step)
}

// TestExitCodePropagated: the step's exit status reaches the result.
func TestExitCodePropagated(t *testing.T) {
	r := testRunner(t, nil)
	ws := testWorkspace(t, r)
	for _, tt := range []struct {
		name string
		argv []string
		want int
	}{
		{"zero", []string{"true"}, 0},
		{"one", []string{"false"}, 1},
		{"forty-two", []string{"sh", "-c", "exit 42"}, 42},
		{"missing command", []string{"/work/does-not-exist"}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			step := mustProven(t, mustLaunch(t, r, testSpec(r, ws, tt.argv...)))
			if step.ExitCode != tt.want {
				t.Errorf("exit code of %q = %d, want %d (output %q)", tt.argv, step.ExitCode, tt.want, step.Output)
			}
		})
	}
}

// TestEnvironmentOnlyWhatWasPassed: the step's environment is exactly the
// one passed, and vouch's own environment is not readable anywhere inside,
// not even at /proc/1/environ (bwrap's init).
func TestEnvironmentOnlyWhatWasPassed(t *testing.T) {
	const canary = "vouch-canary-7f3a9c"
	t.Setenv("VOUCH_SECRET_CANARY", canary)
	r := testRunner(t, nil)
	ws := testWorkspace(t, r)
	spec := testSpec(r, ws, "cat", "/proc/self/environ")
	step := mustProven(t, mustLaunch(t, r, spec))
	got := strings.Split(strings.TrimSuffix(string(step.Output), "\x00"), "\x00")
	slices.Sort(got)
	if !slices.Equal(got, spec.env) {
		t.Errorf("environment = %q, want %q", got, spec.env)
	}

	step = mustProven(t, mustLaunch(t, r, testSpec(r, ws, "sh", "-c",
		`for f in /proc/[0-9]*/environ; do cat "$f"; done; env`)))
	if step.ExitCode != 0 {
		t.Fatalf("step exited %d: %s", step.ExitCode, step.Output)
	}
	if strings.Contains(string(step.Output), canary) {
		t.Errorf("canary visible inside the sandbox: %q", step.Output)
	}
}

// TestHostSecretsUnreadable: a root-owned 0600 file inside the workspace
// cannot be read by the step (it runs as an unprivileged host uid), and the
// host's /etc/shadow, /root, /home, /var and /run are not in the sandbox.
func TestHostSecretsUnreadable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a root-owned canary and to run as the sandbox uid")
	}
	r := testRunner(t, nil)
	ws := testWorkspace(t, r)
	const canary = "root-only-canary-91be"
	if err := os.WriteFile(filepath.Join(ws.dir, "secret"), []byte(canary), 0o600); err != nil {
		t.Fatal(err)
	}
	step := mustProven(t, mustLaunch(t, r, testSpec(r, ws, "sh", "-c",
		`if cat /work/secret; then exit 10; fi
		 for p in /etc/shadow /root /var /run /home/root /usr/../root; do
		   if [ -e "$p" ]; then echo "present: $p"; exit 11; fi
		 done`)))
	if step.ExitCode != 0 {
		t.Fatalf("step exited %d (10: canary read, 11: host path present): %s", step.ExitCode, step.Output)
	}
	if strings.Contains(string(step.Output), canary) {
		t.Fatalf("canary read: %q", step.Output)
	}
	step = mustProven(t, mustLaunch(t, r, testSpec(r, ws, "ls", "-A", "/")))
	top := strings.Fields(string(step.Output))
	want := []string{"dev", "etc", "home", "proc", "tmp", "usr", "work"}
	for _, l := range r.links {
		want = append(want, strings.TrimPrefix(l.path, "/"))
	}
	slices.Sort(want)
	slices.Sort(top)
	if !slices.Equal(top, want) {
		t.Errorf("sandbox / = %q, want %q", top, want)
	}
}

// TestSandboxProfile: the step sees the identity, hostname, writable
// directories and synthesized /etc the profile promises.
func TestSandboxProfile(t *testing.T) {
	r := testRunner(t, nil)
	ws := testWorkspace(t, r)
	step := mustProven(t, mustLaunch(t, r, testSpec(r, ws, "sh", "-c",
		`set -e
		 test "$(id -u):$(id -g)" = 1000:1000
		 test "$(id -un)" = vouch
		 test "$(hostname)" = vouch
		 test "$(pwd)" = /work
		 touch /work/w "$HOME/h" /tmp/t
		 if touch /usr/x 2>/dev/null || touch /x 2>/dev/null || touch /etc/x 2>/dev/null; then exit 12; fi
		 grep -q '^127.0.0.1' /etc/hosts
		 getent hosts localhost >/dev/null
		 grep -q CapEff:.0000000000000000 /proc/self/status
		 echo ok`)))
	if step.ExitCode != 0 || !strings.Contains(string(step.Output), "ok") {
		t.Fatalf("profile check exited %d: %s", step.ExitCode, step.Output)
	}
}
