package gate

import (
	"bytes"
	"encoding/binary"
	"go/parser"
	"go/token"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/storage/memory"
	"github.com/google/go-cmp/cmp"
)

func TestSymlinkEscape(t *testing.T) {
	tests := []struct {
		depth  int
		target string
		escape bool
	}{
		{1, "../x", false},
		{1, "../../x", true},
		{0, "x", false},
		{0, "./x/./y", false},
		{0, "..", true},
		{2, "../../a/b", false},
		{2, "../../../a", true},
		{0, "/etc/passwd", true},
		{0, "", true},
		{3, "a/../b", true}, // ".." after a named component that may be a link
		{0, "a//b", false},
	}
	for _, tt := range tests {
		if got := symlinkEscape(tt.depth, tt.target) != ""; got != tt.escape {
			t.Errorf("symlinkEscape(%d, %q) = %v, want %v", tt.depth, tt.target, got, tt.escape)
		}
	}
}

func TestArgPaths(t *testing.T) {
	tests := []struct {
		arg  string
		want []string
	}{
		{"./check.sh", []string{"check.sh"}},
		{"scripts/check.sh", []string{"scripts/check.sh"}},
		{"/usr/bin/go", nil},
		{"../x", nil},
		{"a/../b", nil},
		{".", nil},
		{"-v", []string{"-v"}},
		{"--config=ci/x.yml", []string{"--config=ci/x.yml", "--config", "ci/x.yml"}},
		{"./a.sh && b/c.sh", []string{"a.sh && b/c.sh", "a.sh", "b/c.sh"}},
	}
	for _, tt := range tests {
		got := argPaths(tt.arg)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("argPaths(%q) (-want +got):\n%s", tt.arg, diff)
		}
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1GiB", 1 << 30, true},
		{"256MiB", 256 << 20, true},
		{"512KiB", 512 << 10, true},
		{"4096", 4096, true},
		{"10B", 10, true},
		{"1GB", 0, false},
		{"-1", 0, false},
		{"0", 0, false},
		{"9999999999TiB", 0, false},
		{"lots", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

// TestImports: gate is pure; it neither logs nor knows the packages that
// use it.
func TestImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	forbidden := []string{"vouch.dev/vouch/bot", "vouch.dev/vouch/forge", "vouch.dev/vouch/sandbox", "vouch.dev/vouch/evidence", "vouch.dev/vouch/cmd", "log", "log/slog", "testing", "os/exec"}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		pf, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range pf.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			for _, bad := range forbidden {
				if p == bad || strings.HasPrefix(p, bad+"/") && strings.HasPrefix(bad, "vouch.dev/") {
					t.Errorf("%s imports %s", f, p)
				}
			}
		}
	}
}

// TestPackPosition checks the index lookup, guess walk and fallback, on a
// synthetic version-2 index.
func TestPackPosition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	hs := make([]plumbing.Hash, 20000)
	for i := range hs {
		for j := range hs[i] {
			hs[i][j] = byte(rng.Uint32())
		}
	}
	slices.SortFunc(hs, func(a, b plumbing.Hash) int { return bytes.Compare(a[:], b[:]) })
	idx := []byte("\xfftOc\x00\x00\x00\x02")
	for b := range 256 {
		n := sort.Search(len(hs), func(i int) bool { return int(hs[i][0]) > b })
		idx = binary.BigEndian.AppendUint32(idx, uint32(n))
	}
	for _, h := range hs {
		idx = append(idx, h[:]...)
	}
	idx = append(idx, make([]byte, 4*len(hs))...) // CRCs
	for i := range hs {
		idx = binary.BigEndian.AppendUint32(idx, uint32(12+i))
	}
	idx = append(idx, make([]byte, 40)...)
	p := &pack{idx: idx, data: append([]byte("PACK\x00\x00\x00\x02"), make([]byte, 32)...)}
	if err := p.check(); err != nil {
		t.Fatal(err)
	}
	for i, h := range hs {
		if got := p.position(h); got != i {
			t.Fatalf("position(%s) = %d, want %d", h, got, i)
		}
		if off, ok := p.offset(h); !ok || off != int64(12+i) {
			t.Fatalf("offset(%s) = %d, %v; want %d", h, off, ok, 12+i)
		}
		missing := h
		missing[19] ^= 1
		if _, found := slices.BinarySearchFunc(hs, missing, func(a, b plumbing.Hash) int { return bytes.Compare(a[:], b[:]) }); !found {
			if got := p.position(missing); got != -1 {
				t.Fatalf("position(%s) = %d, want -1", missing, got)
			}
		}
	}
}

// FuzzApplyDelta: hostile deltas fail, they never panic or overrun.
func FuzzApplyDelta(f *testing.F) {
	f.Add([]byte("base object"), []byte{11, 5, 0x91, 0, 4, 1, '!'})
	f.Add([]byte(""), []byte{0, 0})
	f.Add([]byte("abc"), []byte{3, 0xff, 0xff, 0xff, 0xff, 0x0f, 0xb0})
	f.Fuzz(func(t *testing.T, base, delta []byte) {
		out, err := applyDelta(base, delta, 1<<20)
		if err == nil && int64(len(out)) > 1<<20 {
			t.Errorf("applyDelta made %d bytes, more than the bound", len(out))
		}
	})
}

// FuzzPackEntry: a hostile pack entry fails, it never panics.
func FuzzPackEntry(f *testing.F) {
	f.Add([]byte{0x35, 0x78, 0x9c, 0x4b, 0x4c, 0x4a, 0x06, 0x00, 0x02, 0x4d, 0x01, 0x27})
	f.Add([]byte{0x65, 0x0c})
	f.Add([]byte{0x75})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, entry []byte) {
		data := append([]byte("PACK\x00\x00\x00\x02\x00\x00\x00\x01"), entry...)
		data = append(data, make([]byte, 20)...)
		p := &pack{data: data}
		r := (&objects{ctx: t.Context(), s: memory.NewStorage()}).reader(1<<20, 1<<20)
		_, _, _ = r.readAt(p, 12, 1<<20, 0)
		_, _ = r.statAt(p, 12)
	})
}

func TestMakeInputs(t *testing.T) {
	all := func(dir string) []string {
		var out []string
		for _, f := range makefiles {
			out = append(out, strings.TrimPrefix(dir+"/"+f, "/"))
		}
		return out
	}
	tests := []struct {
		args []string
		want []string
	}{
		{nil, all("")},
		{[]string{"check", "V=1"}, all("")},
		{[]string{"-C", "sub", "all"}, all("sub")},
		{[]string{"-Csub", "-C", "deeper"}, all("sub/deeper")},
		{[]string{"-sC", "sub"}, all("sub")},
		{[]string{"--directory=sub"}, all("sub")},
		{[]string{"--dir", "sub"}, all("sub")}, // getopt takes unambiguous prefixes
		{[]string{"-C", "sub", "-C", ".."}, all("")},
		{[]string{"-C", "../elsewhere"}, nil},
		{[]string{"-C", "/abs"}, nil},
		{[]string{"-f", "ci/build.mk"}, []string{"ci/build.mk"}},
		{[]string{"-fci/build.mk", "-C", "sub"}, []string{"sub/ci/build.mk"}},
		{[]string{"--file=a.mk", "--makefile", "b.mk"}, []string{"a.mk", "b.mk"}},
		{[]string{"-j4", "-Oline", "check"}, all("")}, // optional arguments are attached
		{[]string{"-o", "Makefile", "check"}, all("")},
		{[]string{"--", "-f", "x"}, all("")},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, makeInputs(tt.args)); diff != "" {
			t.Errorf("makeInputs(%q) (-want +got):\n%s", tt.args, diff)
		}
	}
}

func TestGlobBelow(t *testing.T) {
	tests := []struct {
		glob, dir string
		want      []string
	}{
		{"ci/**", "ci", []string{"**"}},
		{"ci/**", "tools", nil},
		{"ci/*.mk", "ci", []string{"*.mk"}},
		{"ci/*.mk", "ci/sub", nil},
		{"ci/**/*.sh", "ci/a/b", []string{"**/*.sh"}},
		{"**/*.sh", "lib", []string{"**/*.sh"}},
		{"Makefile", "Makefile", nil},
		{"{a/b,c}/x", "a", []string{"**"}}, // a brace spanning a slash: everything
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, globBelow(tt.glob, tt.dir)); diff != "" {
			t.Errorf("globBelow(%q, %q) (-want +got):\n%s", tt.glob, tt.dir, diff)
		}
	}
}
