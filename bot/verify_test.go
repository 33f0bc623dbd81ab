package bot

import (
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"vouch.dev/vouch/evidence"
	"vouch.dev/vouch/fixtures"
	"vouch.dev/vouch/gate"
	"vouch.dev/vouch/sandbox"
)

// marker is what a hostile script would create in its working directory.
const marker = "HOSTILE-CODE-RAN"

// requireBwrap fails under CI=true and skips elsewhere when bwrap is missing.
func requireBwrap(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("bwrap is required under CI=true: %v", err)
		}
		t.Skipf("bwrap not installed: %v", err)
	}
}

// testRunner returns a sandbox runner that keeps its workspaces under a
// fresh directory, so a test can look for what a step left behind.
func testRunner(t *testing.T) (*sandbox.Runner, string) {
	t.Helper()
	requireBwrap(t)
	root := t.TempDir()
	// The sandbox uid must be able to traverse to its workspace.
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	cfg := sandbox.DefaultConfig()
	cfg.WorkRoot = root
	cfg.KeepWorkspace = true
	r, err := sandbox.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("sandbox.New: %v", err)
	}
	return r, root
}

// findMarker reports whether any file named marker exists under root.
func findMarker(t *testing.T, root string) bool {
	t.Helper()
	found := false
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == marker {
			found = true
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	return found
}

const recipe = `version: 1
protected: ["tools/**"]
steps:
  - name: check
    run: ["sh", "check.sh"]
    timeout: 30s
`

// verifyOneChange builds a repository whose base holds recipe and whose
// head changes one unrelated file, and verifies it.
func verifyOneChange(t *testing.T, runner *sandbox.Runner, recipe string) (rc evidence.Receipt, base, head string) {
	t.Helper()
	repo := fixtures.NewRepo(t)
	files := map[string]string{".vouch.yml": recipe, "a.txt": "a\n"}
	base = repo.Commit("base", fixtures.Files(files))
	files["a.txt"] = "b\n"
	head = repo.Commit("head", fixtures.Files(files), base)
	return verify(t, runner, repo.Dir, base, head), base, head
}

// verify runs the pipeline with the default policy and fails on an error.
func verify(t *testing.T, runner *sandbox.Runner, dir, base, head string) evidence.Receipt {
	t.Helper()
	rc, err := Verify(t.Context(), slog.New(slog.NewTextHandler(io.Discard, nil)), runner,
		VerifyRequest{RepoDir: dir, Base: base, Head: head, Policy: gate.DefaultPolicy()})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	return rc
}

// honestCheck passes; hostileCheck creates the marker, then lies about passing.
const (
	honestCheck  = "echo checked\n"
	hostileCheck = "touch " + marker + "\necho checked\n"
)

func baseTree() fixtures.Tree {
	return fixtures.Files(map[string]string{
		".vouch.yml":    recipe,
		"check.sh":      honestCheck,
		"tools/lint.sh": "echo lint\n",
		"src/main.txt":  "hello\n",
	})
}

func TestVerifyRefusedHeadsNeverRun(t *testing.T) {
	tests := []struct {
		name   string
		head   func(base fixtures.Tree) fixtures.Tree
		reason evidence.Reason
	}{
		{"edit argv script", func(b fixtures.Tree) fixtures.Tree {
			return b.With(fixtures.Files(map[string]string{"check.sh": hostileCheck}))
		}, evidence.ReasonProtectedPathChanged},
		{"rename argv script away", func(b fixtures.Tree) fixtures.Tree {
			return b.Without("check.sh").With(fixtures.Files(map[string]string{"check2.sh": honestCheck, "src/x": hostileCheck}))
		}, evidence.ReasonProtectedPathChanged},
		{"delete argv script", func(b fixtures.Tree) fixtures.Tree {
			return b.Without("check.sh").With(fixtures.Files(map[string]string{"src/x": hostileCheck}))
		}, evidence.ReasonProtectedPathChanged},
		{"chmod argv script", func(b fixtures.Tree) fixtures.Tree {
			return b.With(fixtures.Tree{"check.sh": fixtures.Exec(honestCheck), "src/x": fixtures.File{Content: hostileCheck}})
		}, evidence.ReasonProtectedPathChanged},
		{"argv script replaced by symlink", func(b fixtures.Tree) fixtures.Tree {
			return b.With(fixtures.Tree{"check.sh": fixtures.Symlink("src/evil.sh"), "src/evil.sh": fixtures.File{Content: hostileCheck}})
		}, evidence.ReasonProtectedPathChanged},
		{"recipe glob", func(b fixtures.Tree) fixtures.Tree {
			return b.With(fixtures.Files(map[string]string{"tools/lint.sh": hostileCheck}))
		}, evidence.ReasonProtectedPathChanged},
		{"recipe edited to add a hostile step", func(b fixtures.Tree) fixtures.Tree {
			return b.With(fixtures.Files(map[string]string{
				".vouch.yml": recipe + "  - name: evil\n    run: [\"touch\", \"" + marker + "\"]\n",
			}))
		}, evidence.ReasonProtectedPathChanged},
		{"symlink escape absolute", func(b fixtures.Tree) fixtures.Tree {
			return b.With(fixtures.Tree{"src/passwd": fixtures.Symlink("/etc/passwd")})
		}, evidence.ReasonUnsafeTree},
		{"symlink escape relative", func(b fixtures.Tree) fixtures.Tree {
			return b.With(fixtures.Tree{"src/up": fixtures.Symlink("../../outside")})
		}, evidence.ReasonUnsafeTree},
		{"gitlink", func(b fixtures.Tree) fixtures.Tree {
			return b.With(fixtures.Tree{"vendor/sub": fixtures.Gitlink("0123456789abcdef0123456789abcdef01234567")})
		}, evidence.ReasonUnsafeTree},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runner, work := testRunner(t)
			repo := fixtures.NewRepo(t)
			base := repo.Commit("base", baseTree())
			head := repo.Commit("head", tt.head(baseTree()), base)

			rc := verify(t, runner, repo.Dir, base, head)
			if rc.Outcome != evidence.StopAndAsk || rc.Reason != tt.reason {
				t.Errorf("Verify = %s %s, want STOP_AND_ASK %s", rc.Outcome, rc.Reason, tt.reason)
			}
			if rc.Executed {
				t.Error("receipt says executed: true")
			}
			if len(rc.Gate.Violations) == 0 {
				t.Error("receipt lists no violation")
			}
			if findMarker(t, work) {
				t.Error("the hostile code ran: marker found in a workspace")
			}
			if entries, _ := os.ReadDir(work); len(entries) != 0 {
				t.Errorf("a workspace was created for a refused head: %v", entries)
			}
		})
	}
}

// TestVerifyMarkerControl shows the marker check can fail: the same hostile
// script, trusted at base, does run (in the sandbox) and leaves its marker.
func TestVerifyMarkerControl(t *testing.T) {
	runner, work := testRunner(t)
	repo := fixtures.NewRepo(t)
	tree := baseTree().With(fixtures.Files(map[string]string{"check.sh": hostileCheck}))
	base := repo.Commit("base", tree)
	head := repo.Commit("head", tree.With(fixtures.Files(map[string]string{"src/main.txt": "bye\n"})), base)

	rc := verify(t, runner, repo.Dir, base, head)
	if rc.Outcome != evidence.Pass || !rc.Executed || !rc.Sandbox.Isolated {
		t.Fatalf("Verify = %s %s executed=%v isolated=%v, want an isolated PASS", rc.Outcome, rc.Reason, rc.Executed, rc.Sandbox.Isolated)
	}
	if !findMarker(t, work) {
		t.Error("marker absent although the script ran: the marker check proves nothing")
	}
}

func TestVerifyNoTrustedRecipe(t *testing.T) {
	runner, work := testRunner(t)
	repo := fixtures.NewRepo(t)
	noRecipe := baseTree().Without(".vouch.yml")
	base := repo.Commit("base", noRecipe)
	head := repo.Commit("head adds a recipe", baseTree().With(fixtures.Files(map[string]string{"check.sh": hostileCheck})), base)

	rc := verify(t, runner, repo.Dir, base, head)
	if rc.Outcome != evidence.StopAndAsk || rc.Reason != evidence.ReasonNoTrustedRecipe || rc.Executed {
		t.Errorf("Verify = %s %s executed=%v, want STOP_AND_ASK NO_TRUSTED_RECIPE unexecuted", rc.Outcome, rc.Reason, rc.Executed)
	}
	if findMarker(t, work) {
		t.Error("marker found")
	}
}

func TestVerifyOutcomes(t *testing.T) {
	tests := []struct {
		name    string
		recipe  string
		files   map[string]string
		outcome evidence.Outcome
		reason  evidence.Reason
	}{
		{"pass", "steps:\n  - name: ok\n    run: [\"sh\", \"-c\", \"echo '2 passed, 0 failed'\"]\n    tests: plain\n", nil, evidence.Pass, evidence.ReasonAllStepsPassed},
		{"fail", "steps:\n  - name: no\n    run: [\"sh\", \"-c\", \"exit 3\"]\n", nil, evidence.Fail, evidence.ReasonStepFailed},
		{"skipped tests", "steps:\n  - name: skip\n    run: [\"sh\", \"-c\", \"echo '67 passed, 0 failed, 2 skipped'\"]\n    tests: plain\n", nil, evidence.Blocked, evidence.ReasonRequiredProofNotPassed},
		{"skips allowed", "steps:\n  - name: skip\n    run: [\"sh\", \"-c\", \"echo '67 passed, 0 failed, 2 skipped'\"]\n    tests: plain\n    allow_skips: true\n", nil, evidence.Pass, evidence.ReasonAllStepsPassed},
		{"timeout", "steps:\n  - name: slow\n    run: [\"sleep\", \"60\"]\n    timeout: 1s\n", nil, evidence.Fail, evidence.ReasonTimeout},
		{"output flood", "steps:\n  - name: flood\n    run: [\"sh\", \"-c\", \"yes vouch\"]\nlimits: {output: 64KiB}\n", nil, evidence.Fail, evidence.ReasonOutputLimit},
		{"invalid recipe", "steps:\n  - name: x\n    rnu: [\"true\"]\n", nil, evidence.StopAndAsk, evidence.ReasonInvalidRecipe},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runner, _ := testRunner(t)
			rc, base, head := verifyOneChange(t, runner, "version: 1\n"+tt.recipe)
			if rc.Outcome != tt.outcome || rc.Reason != tt.reason {
				t.Errorf("Verify = %s %s (%s), want %s %s", rc.Outcome, rc.Reason, rc.Detail, tt.outcome, tt.reason)
			}
			if rc.Base != base || rc.Head != head || len(rc.MergeBase) != 40 {
				t.Errorf("receipt SHAs base=%s head=%s merge_base=%s", rc.Base, rc.Head, rc.MergeBase)
			}
		})
	}
}

// TestVerifySeccompInEffect: a step that tries to create a nested user
// namespace (and write the marker from inside it) is refused by the seccomp
// filter; the receipt names the filter's digest.
func TestVerifySeccompInEffect(t *testing.T) {
	runner, work := testRunner(t)
	rc, _, _ := verifyOneChange(t, runner,
		"version: 1\nsteps:\n  - name: nest\n    run: [\"sh\", \"-c\", \"unshare -Ur touch "+marker+"; echo unshare exit $?\"]\n")
	if rc.Outcome != evidence.Pass || len(rc.Steps) != 1 {
		t.Fatalf("Verify = %s %s, want PASS with one step", rc.Outcome, rc.Reason)
	}
	if findMarker(t, work) {
		t.Error("a nested user namespace was created: marker found")
	}
	if !strings.Contains(rc.Steps[0].OutputTail, "Operation not permitted") {
		t.Errorf("unshare output %q does not show EPERM", rc.Steps[0].OutputTail)
	}
	if rc.Sandbox.Seccomp == nil || len(rc.Sandbox.Seccomp.SHA256) != 64 {
		t.Errorf("receipt seccomp = %+v, want the filter's sha256", rc.Sandbox.Seccomp)
	}
}

// TestVerifyStepCannotTamperWithLaterStep: head code run by an earlier step
// (a hook the base recipe runs) rewrites the protected lint script a later
// step runs; the later step still runs base's lint, because each step gets a
// fresh head tree, and it fails on the head's code.
func TestVerifyStepCannotTamperWithLaterStep(t *testing.T) {
	runner, _ := testRunner(t)
	repo := fixtures.NewRepo(t)
	tree := fixtures.Files(map[string]string{
		".vouch.yml": "version: 1\nprotected: [\"ci/**\"]\nsteps:\n" +
			"  - name: hooks\n    run: [\"sh\", \"-c\", \"for f in hooks/*.sh; do sh $f; done\"]\n" +
			"  - name: lint\n    run: [\"sh\", \"ci/lint.sh\"]\n",
		"hooks/00-noop.sh": "true\n",
		"ci/lint.sh":       "if grep -q EVIL src/*.c; then echo 'lint: EVIL found'; exit 1; fi\necho lint ok\n",
		"src/a.c":          "int a;\n",
	})
	base := repo.Commit("base", tree)
	head := repo.Commit("head", tree.With(fixtures.Files(map[string]string{
		"hooks/10-evil.sh": "printf 'echo lint ok TAMPERED\\n' > ci/lint.sh\n",
		"src/a.c":          "int a; /* EVIL */\n",
	})), base)

	rc := verify(t, runner, repo.Dir, base, head)
	if rc.Outcome != evidence.Fail || rc.Reason != evidence.ReasonStepFailed || len(rc.Steps) != 2 {
		t.Fatalf("Verify = %s %s with %d steps, want FAIL STEP_FAILED after two steps", rc.Outcome, rc.Reason, len(rc.Steps))
	}
	if out := rc.Steps[1].OutputTail; !strings.Contains(out, "EVIL found") || strings.Contains(out, "TAMPERED") {
		t.Errorf("lint output %q: want base's lint to have run and found EVIL", out)
	}
}

// TestVerifyGoToolchain runs the contract's own example recipe, `go test`
// with `tests: go`, through the operator's Go toolchain: the toolchain is
// bound read-only, the build cache lives in the sandbox's HOME, and every
// test is counted from -json output.
func TestVerifyGoToolchain(t *testing.T) {
	requireBwrap(t)
	goroot := "/usr/local/go"
	if _, err := os.Stat(filepath.Join(goroot, "bin", "go")); err != nil {
		t.Fatalf("the Go toolchain this test binds is missing: %v", err)
	}
	root := t.TempDir()
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	cfg := sandbox.DefaultConfig()
	cfg.WorkRoot = root
	cfg.Defaults.Tmp = 512 << 20
	cfg.Toolchains = map[string]sandbox.Toolchain{"go": {
		Paths: []string{goroot},
		Env:   map[string]string{"GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod", "GOPROXY": "off"},
	}}
	runner, err := sandbox.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	repo := fixtures.NewRepo(t)
	tree := fixtures.Files(map[string]string{
		".vouch.yml": "version: 1\ntoolchains: [go]\nsteps:\n  - name: unit\n    run: [\"go\", \"test\", \"./...\"]\n    timeout: 5m\n    tests: go\n",
		"go.mod":     "module example.com/demo\n\ngo 1.22\n",
		"add.go":     "package demo\n\nfunc Add(a, b int) int { return a + b }\n",
		"add_test.go": "package demo\n\nimport \"testing\"\n\n" +
			"func TestAdd(t *testing.T) { if Add(2, 3) != 5 { t.Fatal(\"add\") } }\n" +
			"func TestAddZero(t *testing.T) { if Add(0, 0) != 0 { t.Fatal(\"zero\") } }\n",
	})
	base := repo.Commit("base", tree)
	head := repo.Commit("head", tree.With(fixtures.Files(map[string]string{"README": "x\n"})), base)
	rc := verify(t, runner, repo.Dir, base, head)
	if rc.Outcome != evidence.Pass || len(rc.Steps) != 1 {
		t.Fatalf("Verify = %s %s (%s), want PASS; output:\n%s", rc.Outcome, rc.Reason, rc.Detail, tailOf(rc))
	}
	if c := rc.Steps[0].Tests; c == nil || c.Passed != 2 || c.Failed != 0 || c.Skipped != 0 {
		t.Errorf("tests = %+v, want 2 passed", c)
	}
}

func tailOf(rc evidence.Receipt) string {
	if len(rc.Steps) == 0 {
		return ""
	}
	return rc.Steps[len(rc.Steps)-1].OutputTail
}
