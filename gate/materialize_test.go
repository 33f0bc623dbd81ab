package gate_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"vouch.dev/vouch/fixtures"
	"vouch.dev/vouch/gate"
)

// admit builds a repository whose head is tree and returns the admitted plan.
func admit(t *testing.T, tree fixtures.Tree) *gate.Plan {
	t.Helper()
	r := fixtures.NewRepo(t)
	base := r.Commit("base", baseTree())
	head := r.Commit("head", tree, base)
	d := decide(t, r, base, head, gate.DefaultPolicy())
	plan, ok := d.Admitted()
	if !ok {
		t.Fatalf("Decide() = %s %v (%s), want admitted", d.Refusal, d.Violations, d.Detail)
	}
	return plan
}

func openRoot(t *testing.T, dir string) *os.Root {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root
}

func TestMaterialize(t *testing.T) {
	old := setUmask(0o077) // the tree's modes must not depend on the caller's umask
	t.Cleanup(func() { setUmask(old) })
	plan := admit(t, baseTree().With(fixtures.Tree{
		"src/link":      fixtures.Symlink("main.go"),
		"src/up":        fixtures.Symlink("../README"),
		"dirlink":       fixtures.Symlink("src"),
		"deep/er/x.txt": {Content: "x"},
	}))
	dir := t.TempDir()
	if err := plan.Materialize(t.Context(), openRoot(t, dir)); err != nil {
		t.Fatalf("Materialize() error = %v", err)
	}
	files := []struct {
		path, content string
		mode          fs.FileMode
	}{
		{"README", "hello\n", 0o644},
		{"run-tests.sh", "#!/bin/sh\n", 0o755},
		{"scripts/check.sh", "#!/bin/sh\ngo test ./...\n", 0o644},
		{"deep/er/x.txt", "x", 0o644},
		{".vouch.yml", recipeYAML, 0o644},
	}
	for _, f := range files {
		p := filepath.Join(dir, f.path)
		got, err := os.ReadFile(p)
		if err != nil || string(got) != f.content {
			t.Errorf("ReadFile(%s) = %q, %v; want %q", f.path, got, err, f.content)
		}
		if fi, err := os.Lstat(p); err != nil || fi.Mode() != f.mode {
			t.Errorf("Lstat(%s) mode = %v, %v; want %v", f.path, fi.Mode(), err, f.mode)
		}
	}
	for _, d := range []string{"src", "deep", "deep/er"} {
		if fi, err := os.Lstat(filepath.Join(dir, d)); err != nil || fi.Mode() != fs.ModeDir|0o755 {
			t.Errorf("Lstat(%s) = %v, %v; want a 0755 directory", d, fi, err)
		}
	}
	links := map[string]string{"src/link": "main.go", "src/up": "../README", "dirlink": "src"}
	for p, want := range links {
		if got, err := os.Readlink(filepath.Join(dir, p)); err != nil || got != want {
			t.Errorf("Readlink(%s) = %q, %v; want %q", p, got, err, want)
		}
	}
	if got, err := os.ReadFile(filepath.Join(dir, "dirlink/up")); err != nil || string(got) != "hello\n" {
		t.Errorf("ReadFile(dirlink/up) = %q, %v; want the README through two links", got, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, ".git")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Lstat(.git) error = %v, want not exist", err)
	}
}

// TestMaterializePlantedSymlink: a symlink already in the workspace cannot
// carry a write outside it, whether it stands for a directory or a file.
func TestMaterializePlantedSymlink(t *testing.T) {
	tests := []struct {
		name    string
		tree    fixtures.Tree
		planted string
	}{
		{name: "directory", tree: baseTree().With(fixtures.Files(map[string]string{"x/y": "pwned"})), planted: "x"},
		{name: "file", tree: baseTree().With(fixtures.Files(map[string]string{"x": "pwned"})), planted: "x"},
		{name: "nested", tree: baseTree().With(fixtures.Files(map[string]string{"src/x/y": "pwned"})), planted: "src"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := admit(t, tt.tree)
			outside, dir := t.TempDir(), t.TempDir()
			if err := os.Symlink(outside, filepath.Join(dir, tt.planted)); err != nil {
				t.Fatal(err)
			}
			if err := plan.Materialize(t.Context(), openRoot(t, dir)); err == nil {
				t.Errorf("Materialize() over a planted symlink succeeded, want an error")
			}
			if es, err := os.ReadDir(outside); err != nil || len(es) != 0 {
				t.Errorf("outside directory holds %v (%v), want it untouched", es, err)
			}
		})
	}
}

func TestMaterializeCanceled(t *testing.T) {
	plan := admit(t, baseTree())
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := plan.Materialize(ctx, openRoot(t, t.TempDir())); !errors.Is(err, context.Canceled) {
		t.Errorf("Materialize(canceled) = %v, want context.Canceled", err)
	}
}

func TestZeroPlan(t *testing.T) {
	var p gate.Plan
	if p.Valid() {
		t.Errorf("zero Plan.Valid() = true, want false")
	}
	var np *gate.Plan
	if np.Valid() {
		t.Errorf("nil Plan.Valid() = true, want false")
	}
	if err := p.Materialize(t.Context(), openRoot(t, t.TempDir())); err == nil {
		t.Errorf("zero Plan.Materialize() = nil, want an error")
	}
	var d gate.Decision
	if plan, ok := d.Admitted(); ok || plan != nil {
		t.Errorf("zero Decision.Admitted() = %v, %v; want nil, false", plan, ok)
	}
}

func TestPlanRecipeIsACopy(t *testing.T) {
	plan := admit(t, baseTree())
	rc := plan.Recipe()
	rc.Steps[0].Run[0] = "evil"
	if got := plan.Recipe().Steps[0].Run[0]; got != "sh" {
		t.Errorf("Plan.Recipe() after editing a copy: argv[0] = %q, want sh", got)
	}
}

func setUmask(m int) int { return syscall.Umask(m) }
