package gate_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/google/go-cmp/cmp"

	"vouch.dev/vouch/fixtures"
	"vouch.dev/vouch/gate"
)

// TestDecidePacked: the gate reads packs itself (index lookups, entry
// headers, deltas); on a repacked repository with delta chains it must
// decide and materialize exactly as on loose objects.
func TestDecidePacked(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
	}{
		{name: "ofs-delta", args: []string{"repack", "-a", "-d", "-f", "-q", "--window=50", "--depth=50"}},
		{name: "ref-delta", args: []string{"-c", "repack.useDeltaBaseOffset=false", "repack", "-a", "-d", "-f", "-q", "--window=50", "--depth=50"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := fixtures.NewRepo(t)
			long := strings.Repeat("a line that deltas well against its neighbours\n", 200)
			tree := baseTree()
			var shas []string
			for v := range 6 {
				files := map[string]string{}
				for i := range 30 {
					files[fmt.Sprintf("big/f%02d.txt", i)] = fmt.Sprintf("%s version %d of %d\n", long, v, i)
				}
				tree = tree.With(fixtures.Files(files)).With(fixtures.Tree{fmt.Sprintf("src/l%d", v): fixtures.Symlink("../README")})
				shas = append(shas, r.Commit(fmt.Sprintf("v%d", v), tree, shas...))
				shas = shas[len(shas)-1:]
			}
			head := shas[0]
			r.Branch("main", head)
			// The base is an early commit, so the diff spans several versions.
			first := r.Commit("base", baseTree())
			headOnBase := r.Commit("head", tree, first)
			r.Branch("pr", headOnBase)

			loose := decide(t, r, first, headOnBase, gate.DefaultPolicy())
			for _, args := range [][]string{tt.args, {"prune-packed"}} {
				if out, err := exec.Command("git", append([]string{"-C", r.Dir}, args...)...).CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v\n%s", args, err, out)
				}
			}
			idx, _ := filepath.Glob(filepath.Join(r.Dir, ".git/objects/pack/*.idx"))
			if out, err := exec.Command("git", append([]string{"-C", r.Dir, "verify-pack", "-v"}, idx...)...).Output(); err != nil || !strings.Contains(string(out), "chain length = 2") {
				t.Fatalf("repack made no delta chains (%v); the test would not cover them:\n%s", err, out)
			}
			if loose, _ := filepath.Glob(filepath.Join(r.Dir, ".git/objects/??/*")); len(loose) != 0 {
				t.Fatalf("%d loose objects left after repack", len(loose))
			}
			repo, err := git.PlainOpen(r.Dir)
			if err != nil {
				t.Fatal(err)
			}
			packed, err := gate.Decide(t.Context(), repo, first, "pr", gate.DefaultPolicy())
			if err != nil {
				t.Fatalf("Decide() on packed repository: %v", err)
			}
			if diff := cmp.Diff(loose, packed, cmp.AllowUnexported(gate.Decision{}), cmp.Comparer(func(a, b *gate.Plan) bool {
				return a.Head() == b.Head() && cmp.Equal(a.Recipe(), b.Recipe())
			})); diff != "" {
				t.Errorf("Decide() loose vs packed (-loose +packed):\n%s", diff)
			}
			plan, ok := packed.Admitted()
			if !ok {
				t.Fatalf("Decide() = %s %v, want admitted", packed.Refusal, packed.Violations)
			}
			dir := t.TempDir()
			if err := plan.Materialize(t.Context(), openRoot(t, dir)); err != nil {
				t.Fatalf("Materialize() from packs: %v", err)
			}
			for p, f := range tree {
				p := filepath.Join(dir, p)
				var got string
				if f.Mode == 0o120000 {
					got, err = os.Readlink(p)
				} else {
					var b []byte
					b, err = os.ReadFile(p)
					got = string(b)
				}
				if err != nil || got != f.Content {
					t.Errorf("materialized %s = %.40q, %v; want %.40q", p, got, err, f.Content)
				}
			}
		})
	}
}
