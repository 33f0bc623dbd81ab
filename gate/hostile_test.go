package gate_test

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"vouch.dev/vouch/fixtures"
	"vouch.dev/vouch/gate"
)

// bigTree writes a tree object of n entries "100644 f<i>" pointing at blob,
// streaming it into git, and returns its hash. salt makes trees of the same
// size differ.
func bigTree(tb testing.TB, dir string, n int, blob, salt string) string {
	tb.Helper()
	h, err := hexHash(blob)
	if err != nil {
		tb.Fatal(err)
	}
	pr, pw := io.Pipe()
	go func() {
		w := bufio.NewWriterSize(pw, 1<<20)
		prefix := []byte("100644 f" + salt)
		var num [8]byte
		for i := range n {
			w.Write(prefix)
			for k, v := len(num)-1, i; k >= 0; k, v = k-1, v/10 {
				num[k] = byte('0' + v%10)
			}
			w.Write(num[:])
			w.WriteByte(0)
			w.Write(h)
		}
		pw.CloseWithError(w.Flush())
	}()
	return strings.TrimSpace(string(gitOut(tb, dir, pr, "hash-object", "--literally", "-t", "tree", "-w", "--stdin")))
}

func hexHash(s string) ([]byte, error) { return hex.DecodeString(s) }

// measure runs f and returns how long it took, the bytes it allocated and
// the peak heap in use while it ran, sampled every millisecond.
func measure(f func()) (time.Duration, uint64, uint64) {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var peak atomic.Uint64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak.Load() {
				peak.Store(m.HeapInuse)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	start := time.Now()
	f()
	took := time.Since(start)
	close(done)
	<-sampled
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	return took, after.TotalAlloc - before.TotalAlloc, peak.Load()
}

// TestDecideHugeTrees: trees far larger than the policy allows are refused
// from their object headers, quickly and without reading them into memory,
// loose and then packed, with one tree or several for the prefetchers to
// race on.
func TestDecideHugeTrees(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 90 MB of tree objects")
	}
	tests := []struct {
		name  string
		trees []int // entries of each big tree
		procs int
		rule  string
	}{
		{name: "one tree of 2M entries", trees: []int{2_000_000}, rule: "max-tree-bytes"},
		{name: "four trees of 600k entries, five procs", trees: []int{600_000, 600_000, 600_000, 600_000}, procs: 5, rule: "max-tree-bytes"},
		// 16 MB: within the byte bound, so it is read, but its parse
		// stops at 2 × MaxFiles entries.
		{name: "one tree of 420k entries", trees: []int{420_000}, rule: "max-files"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := fixtures.NewRepo(t)
			base := r.Commit("base", baseTree())
			blob := gitLine(t, r.Dir, "rev-parse", base+":README")
			var extra []rawEntry
			for i, n := range tt.trees {
				extra = append(extra, rawEntry{"40000", fmt.Sprintf("zz-huge%d", i), bigTree(t, r.Dir, n, blob, fmt.Sprint(i))})
			}
			head := headWith(t, r.Dir, base, extra...)
			if tt.procs > 0 {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(tt.procs))
			}
			for _, packed := range []bool{false, true} {
				if packed {
					packAll(t, r.Dir)
				}
				var (
					d   *gate.Decision
					err error
				)
				repo := reopen(t, r.Dir)
				took, alloc, peak := measure(func() { d, err = gate.Decide(t.Context(), repo, base, head, gate.DefaultPolicy()) })
				t.Logf("packed=%v: Decide took %v, allocated %d MB, peak heap %d MB", packed, took, alloc>>20, peak>>20)
				if err != nil {
					t.Fatalf("packed=%v: Decide() error = %v", packed, err)
				}
				want := []gate.Violation{{Path: "zz-huge0", Rule: tt.rule}}
				if d.Refusal != gate.RefusalUnsafeTree || !cmp.Equal(want, d.Violations) {
					t.Errorf("packed=%v: Decide() = %s %v (%s), want %s %v", packed, d.Refusal, d.Violations, d.Detail, gate.RefusalUnsafeTree, want)
				}
				if _, ok := d.Admitted(); ok || len(d.Changed) != 0 {
					t.Errorf("packed=%v: Decide() admitted or listed %d changed paths; want refused before any diff", packed, len(d.Changed))
				}
				if took > 5*time.Second {
					t.Errorf("packed=%v: Decide() took %v, want a refusal from the headers in well under 5s", packed, took)
				}
				if alloc > 64<<20 || peak > 200<<20 {
					t.Errorf("packed=%v: Decide() allocated %d MB with a peak heap of %d MB; want under 64 MB and 200 MB", packed, alloc>>20, peak>>20)
				}
			}
		})
	}
}

// TestDecideTreeBounds: the bounds a policy puts on tree objects, each met
// by a head built for it, stop the walk there.
func TestDecideTreeBounds(t *testing.T) {
	long := strings.Repeat("n", 4000) // under the 4096-byte path bound
	tests := []struct {
		name   string
		policy gate.Policy
		build  func(t *testing.T, dir, blob string) []rawEntry
		want   []gate.Violation
	}{
		{
			name:   "trees together over MaxFiles × 300 bytes",
			policy: gate.Policy{MaxFiles: 100}, // 64 KiB of trees at most
			build: func(t *testing.T, dir, blob string) []rawEntry {
				var es []rawEntry
				for i := range 17 {
					sub := writeObject(t, dir, "tree", treeBody(rawEntry{"100644", fmt.Sprintf("%s%d", long, i), blob}))
					es = append(es, rawEntry{"40000", fmt.Sprintf("zz%02d", i), sub})
				}
				return es
			},
			want: []gate.Violation{{Path: "zz16", Rule: "max-tree-bytes"}}, // 17 × 4 kB > 64 KiB
		},
		{
			name:   "one tree with more entries than files and directories allowed",
			policy: gate.Policy{MaxFiles: 20},
			build: func(t *testing.T, dir, blob string) []rawEntry {
				var body []rawEntry
				for i := range 41 {
					body = append(body, rawEntry{"100644", fmt.Sprintf("f%02d", i), blob})
				}
				return []rawEntry{{"40000", "zz", writeObject(t, dir, "tree", treeBody(body...))}}
			},
			want: []gate.Violation{{Path: "zz", Rule: "max-files"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := fixtures.NewRepo(t)
			base := r.Commit("base", baseTree())
			head := headWith(t, r.Dir, base, tt.build(t, r.Dir, gitLine(t, r.Dir, "rev-parse", base+":README"))...)
			d := decide(t, r, base, head, tt.policy)
			if d.Refusal != gate.RefusalUnsafeTree {
				t.Errorf("Decide().Refusal = %s (%s), want %s", d.Refusal, d.Detail, gate.RefusalUnsafeTree)
			}
			if diff := cmp.Diff(tt.want, d.Violations); diff != "" {
				t.Errorf("Decide().Violations (-want +got):\n%s", diff)
			}
			if len(d.Changed) != 0 {
				t.Errorf("Decide().Changed = %d paths, want none: the walk stopped", len(d.Changed))
			}
		})
	}
}

// TestDecideLooseObjectsCloseFiles: sizing thousands of loose blobs, some
// named by thousands of entries, leaves no file open; with a low limit on
// open files the decision is still reached.
func TestDecideLooseObjectsCloseFiles(t *testing.T) {
	r := fixtures.NewRepo(t)
	base := r.Commit("base", baseTree())
	files := map[string]string{}
	for i := range 1000 {
		files[fmt.Sprintf("zz/distinct/%04d", i)] = fmt.Sprintf("blob %d\n", i)
	}
	mid := r.Commit("many loose blobs", baseTree().With(fixtures.Files(files)), base)
	blob := gitLine(t, r.Dir, "rev-parse", base+":README")
	head := headWith(t, r.Dir, mid, rawEntry{"40000", "zzz-same", bigTree(t, r.Dir, 5000, blob, "")})
	if n := len(glob(t, filepath.Join(r.Dir, ".git/objects/??/*"))); n < 1000 {
		t.Fatalf("%d loose objects, want the blobs loose", n)
	}

	repo := reopen(t, r.Dir)
	open := func() int { return len(glob(t, "/proc/self/fd/*")) }
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	before := open()
	low := old
	low.Cur = uint64(before + 64)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	d, err := gate.Decide(t.Context(), repo, base, head, gate.DefaultPolicy())
	after := open()
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("Decide() with %d files allowed open: %v", low.Cur, err)
	}
	plan, ok := d.Admitted()
	if !ok {
		t.Fatalf("Decide() = %s %v, want admitted", d.Refusal, d.Violations)
	}
	if files, _ := plan.Size(); files != len(baseTree())+1000+5000 {
		t.Errorf("Plan.Size() files = %d, want %d", files, len(baseTree())+1000+5000)
	}
	if after > before {
		t.Errorf("%d files open after Decide(), %d before", after, before)
	}
}

func glob(tb testing.TB, pattern string) []string {
	tb.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// TestDecideMalformedHead: problems of head's own objects are UNSAFE_TREE
// refusals (rule bad-tree) with a detail, not errors.
func TestDecideMalformedHead(t *testing.T) {
	const missing = "0123456789abcdef0123456789abcdef01234567"
	tests := []struct {
		name  string
		extra func(t *testing.T, dir, blob, tree string) []rawEntry
		root  func(t *testing.T, dir, blob string) string // replaces head's root tree
		want  gate.Violation
		diff  bool // the walk goes on, and the diff is listed
	}{
		{
			name: "mode with a non-octal digit",
			extra: func(t *testing.T, dir, blob, _ string) []rawEntry {
				return []rawEntry{{"40000", "zz", writeObject(t, dir, "tree", treeBody(rawEntry{"10064x", "a", blob}))}}
			},
			want: gate.Violation{Path: "zz", Rule: "bad-tree"},
		},
		{
			name: "truncated entry",
			extra: func(t *testing.T, dir, blob, _ string) []rawEntry {
				body := treeBody(rawEntry{"100644", "a", blob})
				return []rawEntry{{"40000", "zz", writeObject(t, dir, "tree", body[:len(body)-7])}}
			},
			want: gate.Violation{Path: "zz", Rule: "bad-tree"},
		},
		{
			name:  "file mode names a tree",
			extra: func(_ *testing.T, _, _, tree string) []rawEntry { return []rawEntry{{"100644", "zz", tree}} },
			want:  gate.Violation{Path: "zz", Rule: "bad-tree"},
			diff:  true,
		},
		{
			name:  "symlink mode names a tree",
			extra: func(_ *testing.T, _, _, tree string) []rawEntry { return []rawEntry{{"120000", "zz", tree}} },
			want:  gate.Violation{Path: "zz", Rule: "bad-tree"},
			diff:  true,
		},
		{
			name:  "directory mode names a blob",
			extra: func(_ *testing.T, _, blob, _ string) []rawEntry { return []rawEntry{{"40000", "zz", blob}} },
			want:  gate.Violation{Path: "zz", Rule: "bad-tree"},
		},
		{
			name:  "missing blob",
			extra: func(_ *testing.T, _, _, _ string) []rawEntry { return []rawEntry{{"100644", "zz", missing}} },
			want:  gate.Violation{Path: "zz", Rule: "bad-tree"},
			diff:  true,
		},
		{
			name:  "missing tree",
			extra: func(_ *testing.T, _, _, _ string) []rawEntry { return []rawEntry{{"40000", "zz", missing}} },
			want:  gate.Violation{Path: "zz", Rule: "bad-tree"},
		},
		{
			name: "root tree does not parse",
			root: func(t *testing.T, dir, blob string) string {
				return writeObject(t, dir, "tree", []byte("100644 README"))
			},
			want: gate.Violation{Path: "", Rule: "bad-tree"},
		},
	}
	for _, tt := range tests {
		for _, packed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/packed=%v", tt.name, packed), func(t *testing.T) {
				r := fixtures.NewRepo(t)
				base := r.Commit("base", baseTree())
				blob := gitLine(t, r.Dir, "rev-parse", base+":README")
				tree := gitLine(t, r.Dir, "rev-parse", base+":src")
				var head string
				if tt.root != nil {
					head = commitTree(t, r.Dir, tt.root(t, r.Dir, blob), base)
				} else {
					head = headWith(t, r.Dir, base, tt.extra(t, r.Dir, blob, tree)...)
				}
				if packed {
					// git repack refuses what does not parse; pack the objects as they are.
					objs := gitOut(t, r.Dir, nil, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
					gitOut(t, r.Dir, strings.NewReader(string(objs)), "pack-objects", "-q", ".git/objects/pack/pack")
					gitOut(t, r.Dir, nil, "prune-packed")
				}
				d, err := gate.Decide(t.Context(), reopen(t, r.Dir), base, head, gate.DefaultPolicy())
				if err != nil {
					t.Fatalf("Decide() error = %v, want an UNSAFE_TREE decision", err)
				}
				if d.Refusal != gate.RefusalUnsafeTree || !cmp.Equal([]gate.Violation{tt.want}, d.Violations) || d.Detail == "" {
					t.Errorf("Decide() = %s %v (%q), want %s [%v] with a detail", d.Refusal, d.Violations, d.Detail, gate.RefusalUnsafeTree, tt.want)
				}
				if _, ok := d.Admitted(); ok {
					t.Errorf("Decide() admitted a malformed head")
				}
				if got := len(d.Changed) > 0; got != tt.diff {
					t.Errorf("Decide().Changed = %v, want a diff listed: %v", d.Changed, tt.diff)
				}
			})
		}
	}
}

// TestDecideMalformedBase: what is wrong outside head's tree is an error.
func TestDecideMalformedBase(t *testing.T) {
	r := fixtures.NewRepo(t)
	good := r.Commit("good", baseTree())
	root := gitOut(t, r.Dir, nil, "cat-file", "tree", good+"^{tree}")
	// Point .vouch.yml (the first entry) at a missing blob.
	const missing = "0123456789abcdef0123456789abcdef01234567"
	i := strings.Index(string(root), "\x00")
	h, _ := hexHash(missing)
	bad := append(append(append([]byte{}, root[:i+1]...), h...), root[i+21:]...)
	base := commitTree(t, r.Dir, writeObject(t, r.Dir, "tree", bad), good)
	head := r.Commit("head repairs it", baseTree(), base)
	_, err := gate.Decide(t.Context(), reopen(t, r.Dir), base, head, gate.DefaultPolicy())
	if err == nil || !strings.Contains(err.Error(), "read recipe of base") || !strings.Contains(err.Error(), gate.RecipePath) {
		t.Errorf("Decide() with base's recipe missing = %v, want a read recipe error", err)
	}
}

// countdownCtx is a context whose Err reports Canceled once it has been
// asked n times: it shows that a long call keeps checking.
type countdownCtx struct {
	context.Context
	left atomic.Int64
}

func (c *countdownCtx) Err() error {
	if c.left.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// TestDecideHonoursContext: Decide stops with ctx's error, before and
// while it walks, never turning it into a decision.
func TestDecideHonoursContext(t *testing.T) {
	r := fixtures.NewRepo(t)
	base := r.Commit("base", baseTree())
	files := map[string]string{}
	for i := range 300 {
		files[fmt.Sprintf("d%02d/f%03d", i%30, i)] = fmt.Sprint(i)
	}
	head := r.Commit("head", baseTree().With(fixtures.Files(files)), base)
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	late := &countdownCtx{Context: t.Context()}
	late.left.Store(40) // enough to resolve both commits, not to walk 31 trees
	tests := []struct {
		name string
		ctx  context.Context
		want string // where Decide stopped
	}{
		{name: "canceled", ctx: canceled, want: "resolve --base"},
		{name: "canceled while walking", ctx: late, want: "check head tree"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := gate.Decide(tt.ctx, r.Git(), base, head, gate.DefaultPolicy())
			if !errors.Is(err, context.Canceled) || d != nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Decide() = %v, %v; want no decision and context.Canceled in %q", d, err, tt.want)
			}
		})
	}
}

// TestDecideStaleFork: head forked before base fixed protected tooling and
// does not touch it; running head would run the old tooling.
func TestDecideStaleFork(t *testing.T) {
	tests := []struct {
		name    string
		fix     map[string]string
		want    []gate.Violation
		control bool
	}{
		{name: "recipe glob fixed since", fix: map[string]string{"ci/config": "fixed\n"}, want: []gate.Violation{{Path: "ci/config", Rule: "recipe:ci/** (differs from base)"}}},
		{name: "step script fixed since", fix: map[string]string{"scripts/check.sh": "#!/bin/sh\nfixed\n"}, want: []gate.Violation{{Path: "scripts/check.sh", Rule: "step:check (differs from base)"}}},
		{name: "protected file added since", fix: map[string]string{"ci/lint.sh": "new\n"}, want: []gate.Violation{{Path: "ci/lint.sh", Rule: "recipe:ci/** (differs from base)"}}},
		{name: "unprotected file changed since", fix: map[string]string{"README": "v2\n"}, control: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := fixtures.NewRepo(t)
			fork := r.Commit("fork", baseTree())
			base := r.Commit("fix", baseTree().With(fixtures.Files(tt.fix)), fork)
			head := r.Commit("feature", baseTree().With(fixtures.Files(map[string]string{"src/feature.go": "package main\n"})), fork)
			d := decide(t, r, base, head, gate.DefaultPolicy())
			if d.MergeBase != fork {
				t.Fatalf("Decide().MergeBase = %s, want the fork %s", d.MergeBase, fork)
			}
			if diff := cmp.Diff([]string{"src/feature.go"}, d.Changed); diff != "" {
				t.Errorf("Decide().Changed, still merge-base..head (-want +got):\n%s", diff)
			}
			if tt.control {
				if _, ok := d.Admitted(); !ok {
					t.Errorf("Decide() = %s %v, want admitted", d.Refusal, d.Violations)
				}
				return
			}
			if d.Refusal != gate.RefusalProtectedPath {
				t.Errorf("Decide().Refusal = %s, want %s", d.Refusal, gate.RefusalProtectedPath)
			}
			if diff := cmp.Diff(tt.want, d.Violations); diff != "" {
				t.Errorf("Decide().Violations (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecideProtectedThroughBaseSymlinks: a glob protects what base's
// symlinks make reachable through it.
func TestDecideProtectedThroughBaseSymlinks(t *testing.T) {
	recipe := func(protected string) string {
		return "version: 1\nprotected: [" + protected + "]\nsteps:\n  - name: check\n    run: [make, check]\n"
	}
	tests := []struct {
		name string
		base fixtures.Tree
		head fixtures.Tree // changes to base
		want []gate.Violation
	}{
		{
			name: "directory symlink named by the glob",
			base: fixtures.Tree{gate.RecipePath: {Content: recipe(`"ci/**"`)}, "ci": fixtures.Symlink("tools"), "tools/common.mk": {Content: "ok:\n"}},
			head: fixtures.Files(map[string]string{"tools/common.mk": "ok:\n\ttouch PWNED\n"}),
			want: []gate.Violation{{Path: "tools/common.mk", Rule: "recipe:ci/** via symlink ci -> tools"}},
		},
		{
			name: "file added behind the symlink",
			base: fixtures.Tree{gate.RecipePath: {Content: recipe(`"ci/**"`)}, "ci": fixtures.Symlink("tools"), "tools/common.mk": {Content: "ok:\n"}},
			head: fixtures.Files(map[string]string{"tools/extra.mk": "evil"}),
			want: []gate.Violation{{Path: "tools/extra.mk", Rule: "recipe:ci/** via symlink ci -> tools"}},
		},
		{
			name: "chain of symlinks",
			base: fixtures.Tree{gate.RecipePath: {Content: recipe(`"ci/**"`)}, "ci": fixtures.Symlink("build/ci"), "build": fixtures.Symlink("tools"), "tools/ci/x.mk": {Content: "x"}},
			head: fixtures.Files(map[string]string{"tools/ci/x.mk": "evil"}),
			want: []gate.Violation{{Path: "tools/ci/x.mk", Rule: "recipe:ci/** via symlink ci -> tools/ci"}},
		},
		{
			name: "retarget a link in the chain",
			base: fixtures.Tree{gate.RecipePath: {Content: recipe(`"ci/**"`)}, "ci": fixtures.Symlink("build/ci"), "build": fixtures.Symlink("tools"), "tools/ci/x.mk": {Content: "x"}},
			head: fixtures.Tree{"build": fixtures.Symlink("evil"), "evil/ci/x.mk": {Content: "evil"}},
			want: []gate.Violation{{Path: "build", Rule: "recipe:ci/** via symlink ci -> tools/ci"}},
		},
		{
			name: "file symlink inside the protected directory",
			base: fixtures.Tree{gate.RecipePath: {Content: recipe(`"ci/**"`)}, "ci/hook": fixtures.Symlink("../lib/hook.sh"), "lib/hook.sh": {Content: "ok"}},
			head: fixtures.Files(map[string]string{"lib/hook.sh": "evil"}),
			want: []gate.Violation{{Path: "lib/hook.sh", Rule: "recipe:ci/** via symlink ci/hook -> lib/hook.sh"}},
		},
		{
			name: "dangling symlink whose target head adds",
			base: fixtures.Tree{gate.RecipePath: {Content: recipe(`"ci/**"`)}, "ci/hook": fixtures.Symlink("../lib/hook.sh"), "lib/other": {Content: "x"}},
			head: fixtures.Files(map[string]string{"lib/hook.sh": "evil"}),
			want: []gate.Violation{{Path: "lib/hook.sh", Rule: "recipe:ci/** via symlink ci/hook -> lib/hook.sh"}},
		},
		{
			name: "directory symlink under a pattern glob",
			base: fixtures.Tree{gate.RecipePath: {Content: recipe(`"ci/**/*.sh"`)}, "ci/vendored": fixtures.Symlink("../third_party/v"), "third_party/v/run.sh": {Content: "ok"}, "third_party/v/notes": {Content: "n"}},
			head: fixtures.Files(map[string]string{"third_party/v/run.sh": "evil", "third_party/v/notes": "fine"}),
			want: []gate.Violation{{Path: "third_party/v/run.sh", Rule: "recipe:ci/**/*.sh via symlink ci/vendored -> third_party/v"}},
		},
		{
			name: "literal glob that is a symlink to a file",
			base: fixtures.Tree{gate.RecipePath: {Content: recipe(`"Makefile"`)}, "Makefile": fixtures.Symlink("build/Makefile"), "build/Makefile": {Content: "check:\n"}},
			head: fixtures.Files(map[string]string{"build/Makefile": "check:\n\ttouch PWNED\n"}),
			want: []gate.Violation{{Path: "build/Makefile", Rule: "recipe:Makefile via symlink Makefile -> build/Makefile"}},
		},
		{
			name: "glob reaching under a directory symlink",
			base: fixtures.Tree{gate.RecipePath: {Content: recipe(`"ci/*.mk"`)}, "ci": fixtures.Symlink("tools"), "tools/a.mk": {Content: "a"}, "tools/notes.txt": {Content: "n"}},
			head: fixtures.Files(map[string]string{"tools/a.mk": "evil", "tools/notes.txt": "fine"}),
			want: []gate.Violation{{Path: "tools/a.mk", Rule: "recipe:ci/*.mk via symlink ci -> tools"}},
		},
		{
			name: "unrelated change admitted",
			base: fixtures.Tree{gate.RecipePath: {Content: recipe(`"ci/**"`)}, "ci": fixtures.Symlink("tools"), "tools/common.mk": {Content: "ok:\n"}, "src/a.go": {Content: "a"}},
			head: fixtures.Files(map[string]string{"src/a.go": "b"}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := fixtures.NewRepo(t)
			b := tt.base.With(fixtures.Files(map[string]string{"Makefile": "check:\n"}))
			if _, ok := tt.base["Makefile"]; ok {
				b = tt.base
			}
			base := r.Commit("base", b)
			head := r.Commit("head", b.With(tt.head), base)
			d := decide(t, r, base, head, gate.DefaultPolicy())
			if tt.want == nil {
				if _, ok := d.Admitted(); !ok {
					t.Errorf("Decide() = %s %v (%s), want admitted", d.Refusal, d.Violations, d.Detail)
				}
				return
			}
			if d.Refusal != gate.RefusalProtectedPath {
				t.Errorf("Decide().Refusal = %s (%s), want %s", d.Refusal, d.Detail, gate.RefusalProtectedPath)
			}
			if diff := cmp.Diff(tt.want, d.Violations); diff != "" {
				t.Errorf("Decide().Violations (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecideStepDirectoriesAndMake: a directory a step names is protected
// whole, files head adds there included, and make's default makefiles are
// protected whether or not base has them.
func TestDecideStepDirectoriesAndMake(t *testing.T) {
	base := fixtures.Files(map[string]string{
		"checks/10-lint":  "#!/bin/sh\n",
		"cmd/x/main.go":   "package main\n",
		"pytools/lint.py": "print()\n",
		"sub/Makefile":    "all:\n",
		"Makefile":        "check:\n",
		"build.mk":        "check:\n",
		"src/a.go":        "package a\n",
	})
	tests := []struct {
		name string
		run  string
		head map[string]string
		want []gate.Violation // nil: admitted
	}{
		{name: "run-parts directory, file added", run: `["run-parts", "checks"]`, head: map[string]string{"checks/20-evil": "evil"}, want: []gate.Violation{{Path: "checks/20-evil", Rule: "step:s"}}},
		{name: "go run package directory", run: `["go", "run", "./cmd/x"]`, head: map[string]string{"cmd/x/main.go": "evil"}, want: []gate.Violation{{Path: "cmd/x/main.go", Rule: "step:s"}}},
		{name: "interpreter on a directory", run: `["python3", "pytools/"]`, head: map[string]string{"pytools/__main__.py": "evil"}, want: []gate.Violation{{Path: "pytools/__main__.py", Rule: "step:s"}}},
		{name: "directory in sh -c", run: `["sh", "-c", "run-parts checks"]`, head: map[string]string{"checks/20-evil": "evil"}, want: []gate.Violation{{Path: "checks/20-evil", Rule: "step:s"}}},
		{name: "make, GNUmakefile added", run: `["make", "check"]`, head: map[string]string{"GNUmakefile": "check:\n\ttouch PWNED\n"}, want: []gate.Violation{{Path: "GNUmakefile", Rule: "step:s"}}},
		{name: "make, makefile added", run: `["/usr/bin/make", "check"]`, head: map[string]string{"makefile": "evil"}, want: []gate.Violation{{Path: "makefile", Rule: "step:s"}}},
		{name: "make, Makefile edited", run: `["make", "check"]`, head: map[string]string{"Makefile": "evil"}, want: []gate.Violation{{Path: "Makefile", Rule: "step:s"}}},
		{name: "make -C attached", run: `["make", "-Csub", "all"]`, head: map[string]string{"sub/GNUmakefile": "evil"}, want: []gate.Violation{{Path: "sub/GNUmakefile", Rule: "step:s"}}},
		{name: "gmake --directory=", run: `["gmake", "--directory=sub"]`, head: map[string]string{"sub/makefile": "evil"}, want: []gate.Violation{{Path: "sub/makefile", Rule: "step:s"}}},
		{name: "make -f attached", run: `["make", "-fbuild.mk", "check"]`, head: map[string]string{"build.mk": "evil"}, want: []gate.Violation{{Path: "build.mk", Rule: "step:s"}}},
		{name: "make -f: default makefiles not read", run: `["make", "-f", "build.mk", "check"]`, head: map[string]string{"GNUmakefile": "unused"}},
		{name: "code under test not named", run: `["go", "test", "./..."]`, head: map[string]string{"src/a.go": "package a // v2\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := fixtures.NewRepo(t)
			b := base.With(fixtures.Files(map[string]string{gate.RecipePath: "version: 1\nsteps:\n  - name: s\n    run: " + tt.run + "\n"}))
			bc := r.Commit("base", b)
			hc := r.Commit("head", b.With(fixtures.Files(tt.head)), bc)
			d := decide(t, r, bc, hc, gate.DefaultPolicy())
			if tt.want == nil {
				if _, ok := d.Admitted(); !ok {
					t.Errorf("Decide() = %s %v (%s), want admitted", d.Refusal, d.Violations, d.Detail)
				}
				return
			}
			if d.Refusal != gate.RefusalProtectedPath {
				t.Errorf("Decide().Refusal = %s (%s), want %s", d.Refusal, d.Detail, gate.RefusalProtectedPath)
			}
			if diff := cmp.Diff(tt.want, d.Violations); diff != "" {
				t.Errorf("Decide().Violations (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMakePrefersGNUmakefile shows, with the real make when the host has
// it, the attack the make rules stop: a GNUmakefile added next to a
// protected Makefile decides what `make check` runs.
func TestMakePrefersGNUmakefile(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		if os.Getenv("CI") == "true" { // make test itself runs through make
			t.Fatalf("make is required under CI=true: %v", err)
		}
		t.Skip("no make on this host")
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "Makefile"), []byte("check:\n\t@echo protected\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "GNUmakefile"), []byte("check:\n\t@echo head\n"), 0o644)
	out, err := exec.Command("make", "-s", "-C", dir, "check").Output()
	if err != nil || strings.TrimSpace(string(out)) != "head" {
		t.Errorf("make check = %q, %v; want head's GNUmakefile to win", out, err)
	}
}
