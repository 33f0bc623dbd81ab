package main

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"vouch.dev/vouch/fixtures"
)

const marker = "STEP-RAN-MARKER"

func requireBwrap(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("bwrap")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("bwrap is required under CI=true: %v", err)
		}
		t.Skipf("bwrap not installed: %v", err)
	}
	return p
}

// traversable makes a temp dir reachable by the sandbox's unprivileged uid.
func traversable(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	for _, p := range []string{filepath.Dir(d), d} {
		if err := os.Chmod(p, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

func vouch(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(t.Context(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func demoRepo(t *testing.T) (dir, base, head string) {
	t.Helper()
	r := fixtures.NewRepo(t)
	tree := fixtures.Files(map[string]string{
		".vouch.yml": "version: 1\nsteps:\n  - name: mark\n    run: [\"touch\", \"" + marker + "\"]\n",
		"a.txt":      "a\n",
	})
	base = r.Commit("base", tree)
	head = r.Commit("head", tree.With(fixtures.Files(map[string]string{"a.txt": "b\n"})), base)
	return r.Dir, base, head
}

func TestVerifyBadInput(t *testing.T) {
	dir, base, head := demoRepo(t)

	// A repository whose recipe blob is gone: the recipe exists but cannot be read.
	broken, bbase, bhead := demoRepo(t)
	out, err := exec.Command("git", "-C", broken, "rev-parse", bbase+":.vouch.yml").Output()
	if err != nil {
		t.Fatal(err)
	}
	blob := strings.TrimSpace(string(out))
	if err := os.Remove(filepath.Join(broken, ".git", "objects", blob[:2], blob[2:])); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no flags", []string{"verify"}, "required"},
		{"missing repo", []string{"verify", "--repo", filepath.Join(dir, "nope"), "--base", base, "--head", head}, "nope"},
		{"not a repo", []string{"verify", "--repo", t.TempDir(), "--base", base, "--head", head}, "repository"},
		{"unknown base", []string{"verify", "--repo", dir, "--base", "no-such-branch", "--head", head}, "no-such-branch"},
		{"unknown head", []string{"verify", "--repo", dir, "--base", base, "--head", "0000000000000000000000000000000000000bad"}, "0000000000000000000000000000000000000bad"},
		{"unreadable recipe", []string{"verify", "--repo", broken, "--base", bbase, "--head", bhead}, ".vouch.yml"},
		{"unknown command", []string{"frobnicate"}, "frobnicate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := vouch(t, tt.args...)
			if code != exitUsage {
				t.Errorf("exit = %d, want %d; stdout=%q", code, exitUsage, stdout)
			}
			first, _, _ := strings.Cut(stderr, "\n")
			if !strings.Contains(first, tt.want) {
				t.Errorf("first stderr line %q does not name %q", first, tt.want)
			}
			if strings.Contains(stdout, "OUTCOME=") {
				t.Errorf("a verdict was printed for bad input: %q", stdout)
			}
		})
	}
}

// lyingProviders are fake bwraps: each must end BLOCKED ISOLATION_UNPROVEN
// with the step's marker absent.
func lyingProviders(real string) map[string]string {
	drop := func(flag string) string {
		return "#!/bin/sh\nfor a in \"$@\"; do shift; [ \"$a\" = " + flag + " ] || set -- \"$@\" \"$a\"; done\nexec " + real + " \"$@\"\n"
	}
	return map[string]string{
		"drops --unshare-net": drop("--unshare-net"),
		"drops --unshare-pid": drop("--unshare-pid"),
		"exits 0":             "#!/bin/sh\nexit 0\n",
	}
}

func TestVerifyLyingProvider(t *testing.T) {
	real := requireBwrap(t)
	for name, script := range lyingProviders(real) {
		t.Run(name, func(t *testing.T) {
			bin := traversable(t)
			fake := filepath.Join(bin, "bwrap")
			if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			t.Setenv("VOUCH_BWRAP", fake)
			work := traversable(t)
			dir, base, head := demoRepo(t)
			receipt := filepath.Join(t.TempDir(), "receipt.json")

			code, stdout, stderr := vouch(t, "verify", "--repo", dir, "--base", base, "--head", head,
				"--work-root", work, "--keep-workspace", "--receipt", receipt)
			if code != 4 || !strings.HasSuffix(stdout, "OUTCOME=BLOCKED\nREASON=ISOLATION_UNPROVEN\n") {
				t.Errorf("exit %d, stdout ends %q, stderr %q; want 4 BLOCKED ISOLATION_UNPROVEN", code, tail(stdout), stderr)
			}
			var rc struct {
				Executed bool `json:"executed"`
				Sandbox  struct {
					Isolated bool `json:"isolated"`
				} `json:"sandbox"`
			}
			data, err := os.ReadFile(receipt)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(data, &rc); err != nil {
				t.Fatal(err)
			}
			if rc.Sandbox.Isolated {
				t.Error("receipt claims isolated: true")
			}
			_ = filepath.WalkDir(work, func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.Name() == marker {
					t.Errorf("the step ran under a lying provider: %s exists", p)
				}
				return nil
			})
		})
	}
}

func TestVerifyPassWritesReceiptAndComment(t *testing.T) {
	requireBwrap(t)
	dir, base, head := demoRepo(t)
	out := t.TempDir()
	code, stdout, stderr := vouch(t, "verify", "--repo", dir, "--base", base, "--head", head,
		"--work-root", traversable(t), "--receipt", filepath.Join(out, "r.json"), "--comment", filepath.Join(out, "c.md"))
	if code != 0 || !strings.HasSuffix(stdout, "OUTCOME=PASS\nREASON=ALL_STEPS_PASSED\n") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want PASS", code, stdout, stderr)
	}
	var rc map[string]any
	data, err := os.ReadFile(filepath.Join(out, "r.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rc); err != nil {
		t.Fatalf("receipt is not JSON: %v", err)
	}
	if rc["head"] != head || rc["base"] != base || rc["executed"] != true {
		t.Errorf("receipt head=%v base=%v executed=%v", rc["head"], rc["base"], rc["executed"])
	}
	comment, err := os.ReadFile(filepath.Join(out, "c.md"))
	if err != nil || !strings.Contains(string(comment), head) {
		t.Errorf("comment lacks the head SHA (%v): %s", err, comment)
	}
}

func tail(s string) string {
	if len(s) > 200 {
		return s[len(s)-200:]
	}
	return s
}

// TestVerifyTrustedDevelopment: only the explicit flag runs steps without a
// sandbox, and then the summary and the receipt say so.
func TestVerifyTrustedDevelopment(t *testing.T) {
	t.Setenv("VOUCH_BWRAP", filepath.Join(t.TempDir(), "no-bwrap"))
	dir, base, head := demoRepo(t)
	receipt := filepath.Join(t.TempDir(), "r.json")
	code, stdout, stderr := vouch(t, "verify", "--repo", dir, "--base", base, "--head", head,
		"--work-root", traversable(t), "--receipt", receipt, "--trusted-development")
	if code != 0 || !strings.Contains(stdout, "NOT ISOLATED") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want PASS saying NOT ISOLATED", code, stdout, stderr)
	}
	data, err := os.ReadFile(receipt)
	if err != nil {
		t.Fatal(err)
	}
	var rc struct {
		Sandbox struct {
			Isolated bool   `json:"isolated"`
			Mode     string `json:"mode"`
		} `json:"sandbox"`
	}
	if err := json.Unmarshal(data, &rc); err != nil {
		t.Fatal(err)
	}
	if rc.Sandbox.Isolated || rc.Sandbox.Mode != "trusted-development" {
		t.Errorf("receipt sandbox = %+v, want isolated false, mode trusted-development", rc.Sandbox)
	}
	// Without the flag the same missing bwrap is BLOCKED, never a fallback.
	code, stdout, _ = vouch(t, "verify", "--repo", dir, "--base", base, "--head", head, "--work-root", traversable(t))
	if code != 4 || !strings.HasSuffix(stdout, "OUTCOME=BLOCKED\nREASON=ISOLATION_UNPROVEN\n") {
		t.Errorf("without the flag: exit %d, stdout ends %q; want BLOCKED ISOLATION_UNPROVEN", code, tail(stdout))
	}
}

// TestVerifySignedReceiptRoundTrip: verify signs, receipt verify accepts the
// envelope with the written public key and refuses it once a byte changes.
func TestVerifySignedReceiptRoundTrip(t *testing.T) {
	requireBwrap(t)
	dir, base, head := demoRepo(t)
	out := t.TempDir()
	key, env := filepath.Join(out, "vouch.key"), filepath.Join(out, "receipt.dsse.json")
	code, stdout, stderr := vouch(t, "verify", "--repo", dir, "--base", base, "--head", head,
		"--work-root", traversable(t), "--sign-key", key, "--signed-receipt", env)
	if code != 0 {
		t.Fatalf("verify exit %d: %s %s", code, stdout, stderr)
	}
	if code, stdout, stderr := vouch(t, "receipt", "verify", env, "--key", key+".pub"); code != 0 || !strings.Contains(stdout, head) {
		t.Fatalf("receipt verify exit %d: %s %s", code, stdout, stderr)
	}
	data, err := os.ReadFile(env)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(data), `"payload"`) + 20
	data[i] ^= 1
	if err := os.WriteFile(env, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := vouch(t, "receipt", "verify", env, "--key", key+".pub"); code != 1 {
		t.Errorf("tampered envelope: receipt verify exit %d, want 1", code)
	}
}
