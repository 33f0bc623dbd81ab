package gate_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"vouch.dev/vouch/fixtures"
	"vouch.dev/vouch/gate"
)

const recipeYAML = `version: 1
protected: ["ci/**"]
steps:
  - name: check
    run: ["sh", "scripts/check.sh"]
  - name: unit
    run: ["./run-tests.sh", "-v"]
  - name: shell
    run: ["sh", "-c", "tools/lint.sh --strict && echo ok"]
`

// baseTree is a small project whose recipe runs two scripts of its own.
func baseTree() fixtures.Tree {
	return fixtures.Files(map[string]string{
		gate.RecipePath:    recipeYAML,
		"scripts/check.sh": "#!/bin/sh\ngo test ./...\n",
		"scripts/other.sh": "#!/bin/sh\n",
		"tools/lint.sh":    "#!/bin/sh\n",
		"lib/check.sh":     "#!/bin/sh\necho evil\n",
		"src/main.go":      "package main\n",
		"ci/config":        "x\n",
		"README":           "hello\n",
	}).With(fixtures.Tree{"run-tests.sh": fixtures.Exec("#!/bin/sh\n")})
}

func decide(t *testing.T, r *fixtures.TestRepo, base, head string, p gate.Policy) *gate.Decision {
	t.Helper()
	d, err := gate.Decide(t.Context(), r.Git(), base, head, p)
	if err != nil {
		t.Fatalf("Decide(%s, %s) error = %v", base, head, err)
	}
	return d
}

func TestDecideProtected(t *testing.T) {
	tests := []struct {
		name   string
		head   func(fixtures.Tree) fixtures.Tree
		policy func(*gate.Policy)
		want   []gate.Violation // nil means admitted
	}{
		{
			name: "clean change admitted",
			head: func(b fixtures.Tree) fixtures.Tree {
				return b.With(fixtures.Files(map[string]string{"src/main.go": "package main // v2\n"}))
			},
		},
		{
			name: "edit step script",
			head: func(b fixtures.Tree) fixtures.Tree {
				return b.With(fixtures.Files(map[string]string{"scripts/check.sh": "#!/bin/sh\ntouch MARKER\n"}))
			},
			want: []gate.Violation{{Path: "scripts/check.sh", Rule: "step:check"}},
		},
		{
			name: "rename step script away",
			head: func(b fixtures.Tree) fixtures.Tree {
				return b.Without("scripts/check.sh").With(fixtures.Tree{"scripts/check2.sh": b["scripts/check.sh"]})
			},
			want: []gate.Violation{{Path: "scripts/check.sh", Rule: "step:check"}},
		},
		{
			name: "delete step script",
			head: func(b fixtures.Tree) fixtures.Tree { return b.Without("scripts/check.sh") },
			want: []gate.Violation{{Path: "scripts/check.sh", Rule: "step:check"}},
		},
		{
			name: "chmod drops exec bit of argv[0]",
			head: func(b fixtures.Tree) fixtures.Tree {
				return b.With(fixtures.Files(map[string]string{"run-tests.sh": "#!/bin/sh\n"}))
			},
			want: []gate.Violation{{Path: "run-tests.sh", Rule: "step:unit"}},
		},
		{
			name: "chmod adds exec bit",
			head: func(b fixtures.Tree) fixtures.Tree {
				return b.With(fixtures.Tree{"scripts/check.sh": fixtures.Exec(b["scripts/check.sh"].Content)})
			},
			want: []gate.Violation{{Path: "scripts/check.sh", Rule: "step:check"}},
		},
		{
			name: "replace step script by a symlink",
			head: func(b fixtures.Tree) fixtures.Tree {
				return b.With(fixtures.Tree{"scripts/check.sh": fixtures.Symlink("../lib/check.sh")})
			},
			want: []gate.Violation{{Path: "scripts/check.sh", Rule: "step:check"}},
		},
		{
			name: "replace parent directory by a symlink",
			head: func(b fixtures.Tree) fixtures.Tree {
				return b.Without("scripts/check.sh", "scripts/other.sh").With(fixtures.Tree{"scripts": fixtures.Symlink("lib")})
			},
			want: []gate.Violation{{Path: "scripts/check.sh", Rule: "step:check"}},
		},
		{
			name: "word inside sh -c",
			head: func(b fixtures.Tree) fixtures.Tree {
				return b.With(fixtures.Files(map[string]string{"tools/lint.sh": "#!/bin/sh\nrm -rf /\n"}))
			},
			want: []gate.Violation{{Path: "tools/lint.sh", Rule: "step:shell"}},
		},
		{
			name: "recipe glob, added file",
			head: func(b fixtures.Tree) fixtures.Tree { return b.With(fixtures.Files(map[string]string{"ci/new": "y"})) },
			want: []gate.Violation{{Path: "ci/new", Rule: "recipe:ci/**"}},
		},
		{
			name: "operator glob",
			head: func(b fixtures.Tree) fixtures.Tree {
				return b.With(fixtures.Files(map[string]string{"README": "bye\n"}))
			},
			policy: func(p *gate.Policy) { p.Protected = []string{"READ*"} },
			want:   []gate.Violation{{Path: "README", Rule: "operator:READ*"}},
		},
		{
			name: "recipe edited in head",
			head: func(b fixtures.Tree) fixtures.Tree {
				return b.With(fixtures.Files(map[string]string{gate.RecipePath: recipeYAML + "  - name: evil\n    run: [touch, MARKER]\n"}))
			},
			want: []gate.Violation{{Path: ".vouch.yml", Rule: "always:.vouch.yml"}},
		},
		{
			name: "several, sorted by path, first rule wins",
			head: func(b fixtures.Tree) fixtures.Tree {
				return b.Without("ci/config", "scripts/check.sh").With(fixtures.Files(map[string]string{gate.RecipePath: "version: 1\n"}))
			},
			policy: func(p *gate.Policy) { p.Protected = []string{"**"} },
			want: []gate.Violation{
				{Path: ".vouch.yml", Rule: "always:.vouch.yml"},
				{Path: "ci/config", Rule: "recipe:ci/**"},
				{Path: "scripts/check.sh", Rule: "step:check"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := fixtures.NewRepo(t)
			base := r.Commit("base", baseTree())
			head := r.Commit("head", tt.head(baseTree()), base)
			p := gate.DefaultPolicy()
			if tt.policy != nil {
				tt.policy(&p)
			}
			d := decide(t, r, base, head, p)
			if d.Base != base || d.Head != head || d.MergeBase != base {
				t.Errorf("Decide() SHAs = %s %s %s, want %s %s %s", d.Base, d.Head, d.MergeBase, base, head, base)
			}
			if d.Recipe == nil || len(d.Recipe.Steps) != 3 {
				t.Errorf("Decide().Recipe = %+v, want base's recipe with 3 steps", d.Recipe)
			}
			plan, ok := d.Admitted()
			if tt.want == nil {
				if !ok || d.Refusal != gate.RefusalNone || !plan.Valid() || plan.Head() != head {
					t.Fatalf("Decide() = %s %v (%s), want admitted", d.Refusal, d.Violations, d.Detail)
				}
				return
			}
			if ok || plan != nil {
				t.Errorf("Admitted() = %v, true on a refused decision", plan)
			}
			if d.Refusal != gate.RefusalProtectedPath {
				t.Errorf("Decide().Refusal = %q (%s), want %q", d.Refusal, d.Detail, gate.RefusalProtectedPath)
			}
			if diff := cmp.Diff(tt.want, d.Violations); diff != "" {
				t.Errorf("Decide().Violations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecideRecipe(t *testing.T) {
	bad := "version: 1\nsteps: [{name: t, run: [make]}]\nstpes: []\n"
	sum := sha256.Sum256([]byte(bad))
	tests := []struct {
		name       string
		base       fixtures.Tree
		want       gate.Refusal
		wantDetail string
		wantSHA    string
	}{
		{name: "no recipe at base, head adds one", base: baseTree().Without(gate.RecipePath), want: gate.RefusalNoTrustedRecipe},
		{
			name: "invalid recipe", base: baseTree().With(fixtures.Files(map[string]string{gate.RecipePath: bad})),
			want: gate.RefusalInvalidRecipe, wantDetail: `.vouch.yml:3: unknown key "stpes"`, wantSHA: hex.EncodeToString(sum[:]),
		},
		{
			name: "recipe is a symlink", base: baseTree().With(fixtures.Tree{gate.RecipePath: fixtures.Symlink("README")}),
			want: gate.RefusalInvalidRecipe, wantDetail: "not a regular file",
		},
		{
			name: "recipe is a directory", base: baseTree().Without(gate.RecipePath).With(fixtures.Files(map[string]string{gate.RecipePath + "/x": "y"})),
			want: gate.RefusalInvalidRecipe, wantDetail: "not a regular file",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := fixtures.NewRepo(t)
			base := r.Commit("base", tt.base)
			head := r.Commit("head", baseTree().With(fixtures.Files(map[string]string{"src/main.go": "package main // v2\n"})), base)
			d := decide(t, r, base, head, gate.DefaultPolicy())
			if d.Refusal != tt.want || !strings.Contains(d.Detail, tt.wantDetail) {
				t.Errorf("Decide() = %s %q, want %s containing %q", d.Refusal, d.Detail, tt.want, tt.wantDetail)
			}
			if _, ok := d.Admitted(); ok || d.Recipe != nil {
				t.Errorf("Decide() admitted or has a recipe: %+v", d)
			}
			if tt.wantSHA != "" && d.RecipeSHA256 != tt.wantSHA {
				t.Errorf("Decide().RecipeSHA256 = %q, want %q", d.RecipeSHA256, tt.wantSHA)
			}
			if len(d.Changed) == 0 {
				t.Errorf("Decide().Changed is empty, want the diff as evidence")
			}
		})
	}
}

func TestDecideRecipeDigest(t *testing.T) {
	r := fixtures.NewRepo(t)
	base := r.Commit("base", baseTree())
	d := decide(t, r, base, base, gate.DefaultPolicy())
	sum := sha256.Sum256([]byte(recipeYAML))
	if d.RecipeSHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("Decide().RecipeSHA256 = %q, want %x", d.RecipeSHA256, sum)
	}
	if _, ok := d.Admitted(); !ok || len(d.Changed) != 0 {
		t.Errorf("Decide(base, base) = %s %v, want admitted with no change", d.Refusal, d.Changed)
	}
}

func TestDecideUnsafeTree(t *testing.T) {
	tests := []struct {
		name   string
		add    fixtures.Tree
		policy gate.Policy
		want   []gate.Violation // nil means admitted
	}{
		{name: "symlink absolute", add: fixtures.Tree{"src/l": fixtures.Symlink("/etc/passwd")}, want: []gate.Violation{{Path: "src/l", Rule: "symlink-escape"}}},
		{name: "symlink ../ escape", add: fixtures.Tree{"a/b": fixtures.Symlink("../../x")}, want: []gate.Violation{{Path: "a/b", Rule: "symlink-escape"}}},
		{name: "symlink ../ inside", add: fixtures.Tree{"a/b": fixtures.Symlink("../README")}},
		{name: "symlink .. at root", add: fixtures.Tree{"up": fixtures.Symlink("..")}, want: []gate.Violation{{Path: "up", Rule: "symlink-escape"}}},
		{
			name: "symlink chain through a link",
			add:  fixtures.Tree{"a/up": fixtures.Symlink(".."), "x": fixtures.Symlink("a/up/..")},
			want: []gate.Violation{{Path: "x", Rule: "symlink-escape"}},
		},
		{name: "gitlink", add: fixtures.Tree{"vendor/sub": fixtures.Gitlink(strings.Repeat("ab", 20))}, want: []gate.Violation{{Path: "vendor/sub", Rule: "gitlink"}}},
		{name: "dotdot component", add: fixtures.Files(map[string]string{"a/../b": "x"}), want: []gate.Violation{{Path: "a/..", Rule: "dotdot"}}},
		{name: "dot component", add: fixtures.Files(map[string]string{"a/./b": "x"}), want: []gate.Violation{{Path: "a/.", Rule: "dotdot"}}},
		{name: "dotgit component", add: fixtures.Files(map[string]string{"x/.git/config": "x"}), want: []gate.Violation{{Path: "x/.git", Rule: "dotgit"}}},
		{name: "dotgit any case", add: fixtures.Files(map[string]string{".GiT": "x"}), want: []gate.Violation{{Path: ".GiT", Rule: "dotgit"}}},
		{
			name:   "too many files",
			add:    fixtures.Files(map[string]string{"z/1": "1", "z/2": "2"}),
			policy: gate.Policy{MaxFiles: 10},
			want:   []gate.Violation{{Path: "z/2", Rule: "max-files"}},
		},
		{
			name:   "too many bytes",
			add:    fixtures.Files(map[string]string{"zz": strings.Repeat("x", 1000)}),
			policy: gate.Policy{MaxBytes: 600},
			want:   []gate.Violation{{Path: "zz", Rule: "max-bytes"}},
		},
		{
			name: "all listed, sorted",
			add: fixtures.Tree{
				"m/sub": fixtures.Gitlink(strings.Repeat("cd", 20)),
				"b":     fixtures.Symlink("/"),
			},
			want: []gate.Violation{{Path: "b", Rule: "symlink-escape"}, {Path: "m/sub", Rule: "gitlink"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := fixtures.NewRepo(t)
			base := r.Commit("base", baseTree())
			head := r.Commit("head", baseTree().With(tt.add), base)
			d := decide(t, r, base, head, tt.policy)
			if tt.want == nil {
				if _, ok := d.Admitted(); !ok {
					t.Fatalf("Decide() = %s %v (%s), want admitted", d.Refusal, d.Violations, d.Detail)
				}
				return
			}
			if _, ok := d.Admitted(); ok || d.Refusal != gate.RefusalUnsafeTree || d.Detail == "" {
				t.Errorf("Decide() = %s (%q), want %s with a detail", d.Refusal, d.Detail, gate.RefusalUnsafeTree)
			}
			if diff := cmp.Diff(tt.want, d.Violations); diff != "" {
				t.Errorf("Decide().Violations (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecideProtectedBeforeUnsafe: both checks run, the protected refusal
// wins and lists only its own kind.
func TestDecideProtectedBeforeUnsafe(t *testing.T) {
	r := fixtures.NewRepo(t)
	base := r.Commit("base", baseTree())
	head := r.Commit("head", baseTree().With(fixtures.Tree{
		"scripts/check.sh": fixtures.Symlink("/bin/true"),
		"sub":              fixtures.Gitlink(strings.Repeat("ab", 20)),
	}), base)
	d := decide(t, r, base, head, gate.DefaultPolicy())
	want := []gate.Violation{{Path: "scripts/check.sh", Rule: "step:check"}}
	if d.Refusal != gate.RefusalProtectedPath {
		t.Errorf("Decide().Refusal = %s, want %s", d.Refusal, gate.RefusalProtectedPath)
	}
	if diff := cmp.Diff(want, d.Violations); diff != "" {
		t.Errorf("Decide().Violations (-want +got):\n%s", diff)
	}
}

// TestDecideMergeBase: head forked from an older commit than base; what base
// changed since the fork (outside protected paths) is not head's change.
func TestDecideMergeBase(t *testing.T) {
	r := fixtures.NewRepo(t)
	fork := r.Commit("fork", baseTree())
	base := r.Commit("base moves on", baseTree().With(fixtures.Files(map[string]string{"README": "v2", "docs/new": "d"})), fork)
	head := r.Commit("head", baseTree().With(fixtures.Files(map[string]string{"src/feature.go": "package main\n"})), fork)
	r.Branch("main", base)
	r.Branch("feature", head)
	d := decide(t, r, "main", "feature", gate.DefaultPolicy())
	if d.Base != base || d.Head != head || d.MergeBase != fork {
		t.Errorf("Decide(main, feature) SHAs = %s %s %s, want %s %s %s", d.Base, d.Head, d.MergeBase, base, head, fork)
	}
	if diff := cmp.Diff([]string{"src/feature.go"}, d.Changed); diff != "" {
		t.Errorf("Decide().Changed (-want +got):\n%s", diff)
	}
	if _, ok := d.Admitted(); !ok {
		t.Errorf("Decide() = %s %v, want admitted", d.Refusal, d.Violations)
	}
}

func TestDecideErrors(t *testing.T) {
	r := fixtures.NewRepo(t)
	base := r.Commit("base", baseTree())
	other := r.Commit("unrelated", fixtures.Files(map[string]string{"x": "y"}))
	tests := []struct {
		name, base, head string
		policy           gate.Policy
		want             string
	}{
		{name: "unknown head", base: base, head: "nope", want: `resolve --head "nope": reference not found`},
		{name: "unknown base", base: "nope", head: base, want: `resolve --base "nope"`},
		{name: "missing sha", base: base, head: strings.Repeat("1", 40), want: "resolve --head"},
		{name: "empty", base: "", head: base, want: "resolve --base: empty revision"},
		{name: "no common ancestor", base: base, head: other, want: "no common ancestor"},
		{name: "bad operator glob", base: base, head: base, policy: gate.Policy{Protected: []string{"a/["}}, want: "policy protected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := gate.Decide(t.Context(), r.Git(), tt.base, tt.head, tt.policy)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Decide(%q, %q) = %v, %v; want error containing %q", tt.base, tt.head, d, err, tt.want)
			}
		})
	}
}

// TestChangedMatchesGit compares the gate's diff with git's own on a change
// of every kind.
func TestChangedMatchesGit(t *testing.T) {
	r := fixtures.NewRepo(t)
	b := baseTree().With(fixtures.Tree{
		"deep/a/b/c/d.txt": {Content: "d"},
		"deep/a/e.txt":     {Content: "e"},
		"file2dir":         {Content: "f"},
		"dir2file/x":       {Content: "x"},
		"dir2file/y/z":     {Content: "z"},
		"link":             fixtures.Symlink("README"),
		"mod":              fixtures.Gitlink(strings.Repeat("ab", 20)),
	})
	base := r.Commit("base", b)
	h := b.Without("file2dir", "dir2file/x", "dir2file/y/z", "src/main.go").With(fixtures.Tree{
		"deep/a/b/c/d.txt": {Content: "d2"},
		"file2dir/inner":   {Content: "f"},
		"dir2file":         {Content: "now a file"},
		"link":             {Content: "README"},
		"run-tests.sh":     {Content: "#!/bin/sh\n"},
		"mod":              fixtures.Gitlink(strings.Repeat("cd", 20)),
		"src/renamed.go":   b["src/main.go"],
		"new/dir/f":        {Content: "n"},
	})
	head := r.Commit("head", h, base)
	d := decide(t, r, base, head, gate.DefaultPolicy())
	out, err := exec.Command("git", "-C", r.Dir, "diff", "--no-renames", "--name-only", base, head).Output()
	if err != nil {
		t.Fatalf("git diff: %v", err)
	}
	want := strings.Fields(string(out))
	if diff := cmp.Diff(want, d.Changed); diff != "" {
		t.Errorf("Decide().Changed vs git diff --name-only (-want +got):\n%s", diff)
	}
}

// TestDecideStepFileThroughSymlink: a step names its script through a
// symlink in base; the link and the file it reaches are both protected.
func TestDecideStepFileThroughSymlink(t *testing.T) {
	recipe := "version: 1\nsteps:\n  - name: check\n    run: [bin/check.sh]\n"
	b := fixtures.Files(map[string]string{gate.RecipePath: recipe, "scripts/check.sh": "ok", "README": "r"}).
		With(fixtures.Tree{"bin": fixtures.Symlink("scripts")})
	tests := []struct {
		name string
		head fixtures.Tree
		want []gate.Violation
	}{
		{name: "edit the target", head: b.With(fixtures.Files(map[string]string{"scripts/check.sh": "evil"})), want: []gate.Violation{{Path: "scripts/check.sh", Rule: "step:check"}}},
		{name: "retarget the link", head: b.With(fixtures.Tree{"bin": fixtures.Symlink("."), "check.sh": {Content: "evil"}}), want: []gate.Violation{{Path: "bin", Rule: "step:check"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := fixtures.NewRepo(t)
			base := r.Commit("base", b)
			head := r.Commit("head", tt.head, base)
			d := decide(t, r, base, head, gate.DefaultPolicy())
			if d.Refusal != gate.RefusalProtectedPath {
				t.Errorf("Decide().Refusal = %s, want %s", d.Refusal, gate.RefusalProtectedPath)
			}
			if diff := cmp.Diff(tt.want, d.Violations); diff != "" {
				t.Errorf("Decide().Violations (-want +got):\n%s", diff)
			}
		})
	}
}
