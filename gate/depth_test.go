package gate_test

import (
	"strings"
	"testing"

	"vouch.dev/vouch/fixtures"
	"vouch.dev/vouch/gate"
)

// TestDecideDeepOrLongPaths: a small head of deeply nested or very long
// paths is refused as UNSAFE_TREE before anything lists its paths.
func TestDecideDeepOrLongPaths(t *testing.T) {
	recipe := "version: 1\nsteps:\n  - name: s\n    run: [\"true\"]\n"
	deep := strings.Repeat("d/", 300) + "f"
	long := strings.Repeat(strings.Repeat("x", 250)+"/", 20) + "f"
	tests := []struct {
		name, path, rule string
	}{
		{"deeper than 256", deep, "max-depth"},
		{"path over 4096 bytes", long, "path-too-long"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := fixtures.NewRepo(t)
			base := r.Commit("base", fixtures.Files(map[string]string{".vouch.yml": recipe}))
			head := r.Commit("head", fixtures.Files(map[string]string{".vouch.yml": recipe, tt.path: "x"}), base)
			d, err := gate.Decide(t.Context(), r.Git(), base, head, gate.DefaultPolicy())
			if err != nil {
				t.Fatalf("Decide: %v", err)
			}
			if _, ok := d.Admitted(); ok || d.Refusal != gate.RefusalUnsafeTree {
				t.Fatalf("Decide = %q admitted=%v, want UNSAFE_TREE", d.Refusal, ok)
			}
			if len(d.Violations) == 0 || d.Violations[0].Rule != tt.rule {
				t.Errorf("violations = %v, want rule %s", d.Violations, tt.rule)
			}
			if len(d.Changed) != 0 {
				t.Errorf("Changed lists %d paths of a refused oversized tree", len(d.Changed))
			}
		})
	}
}

// TestMakeStartedIndirectly: make run through `sh -c`, `env` or `nice`
// still protects the makefiles it would read, even ones base lacks.
func TestMakeStartedIndirectly(t *testing.T) {
	for _, run := range []string{
		`["sh", "-c", "make -j2 test"]`,
		`["env", "make", "test"]`,
		`["nice", "-n", "5", "gmake", "test"]`,
		`["sh", "-c", "cd . && bmake test"]`,
	} {
		for _, file := range []string{"Makefile", "GNUmakefile", "BSDmakefile"} {
			t.Run(run+" "+file, func(t *testing.T) {
				recipe := "version: 1\nsteps:\n  - name: s\n    run: " + run + "\n"
				r := fixtures.NewRepo(t)
				tree := fixtures.Files(map[string]string{".vouch.yml": recipe, "Makefile": "test:\n\tfalse\n"})
				base := r.Commit("base", tree)
				head := r.Commit("head", tree.With(fixtures.Files(map[string]string{file: "test: ; true\n"})), base)
				d, err := gate.Decide(t.Context(), r.Git(), base, head, gate.DefaultPolicy())
				if err != nil {
					t.Fatalf("Decide: %v", err)
				}
				if d.Refusal != gate.RefusalProtectedPath {
					t.Errorf("head changing %s under %s: refusal %q, want PROTECTED_PATH_CHANGED", file, run, d.Refusal)
				}
			})
		}
	}
}
