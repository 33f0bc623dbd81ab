package gate_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5"

	"vouch.dev/vouch/gate"
)

// The generated repository: 100 top directories × 10 subdirectories × 100
// files, a recipe at the root; head changes 10 files of it.
const (
	benchTop, benchSub, benchFiles = 100, 10, 100
	benchChanged                   = 10
)

var bench struct {
	once            sync.Once
	dir, base, head string
	err             error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if bench.dir != "" {
		os.RemoveAll(bench.dir)
	}
	os.Exit(code)
}

// benchRepo generates the repository once per test binary, with
// `git fast-import` (the fastest way to write 100k objects), and returns it
// with the base and head SHAs.
func benchRepo(b *testing.B) (dir, base, head string) {
	b.Helper()
	bench.once.Do(func() { bench.dir, bench.base, bench.head, bench.err = generate() })
	if bench.err != nil {
		b.Fatalf("generate benchmark repository: %v", bench.err)
	}
	return bench.dir, bench.base, bench.head
}

func generate() (dir, base, head string, err error) {
	dir, err = os.MkdirTemp("", "vouch-gate-bench-")
	if err != nil {
		return "", "", "", err
	}
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		return dir, "", "", fmt.Errorf("git init: %v: %s", err, out)
	}
	var s bytes.Buffer
	w := bufio.NewWriter(&s)
	inline := func(mode, path, content string) {
		fmt.Fprintf(w, "M %s inline %s\ndata %d\n%s\n", mode, path, len(content), content)
	}
	fmt.Fprintf(w, "commit refs/heads/main\nmark :1\ncommitter Bench <b@vouch.invalid> 1767225600 +0000\ndata 4\nbase\n")
	inline("100644", gate.RecipePath, "version: 1\nprotected: [\"ci/**\"]\nsteps:\n  - name: unit\n    run: [\"sh\", \"ci/test.sh\"]\n")
	inline("100755", "ci/test.sh", "#!/bin/sh\nexec go test ./...\n")
	for d := range benchTop {
		for sd := range benchSub {
			for f := range benchFiles {
				inline("100644", benchPath(d, sd, f), benchContent(d, sd, f, "v1"))
			}
		}
	}
	fmt.Fprintf(w, "commit refs/heads/feature\nmark :2\ncommitter Bench <b@vouch.invalid> 1767225660 +0000\ndata 4\nhead\nfrom :1\n")
	for i := range benchChanged {
		d, sd, f := i*9, i%benchSub, i*7
		inline("100644", benchPath(d, sd, f), benchContent(d, sd, f, "v2"))
	}
	if err := w.Flush(); err != nil {
		return dir, "", "", err
	}
	cmd := exec.Command("git", "-C", dir, "fast-import", "--quiet")
	cmd.Stdin = &s
	if out, err := cmd.CombinedOutput(); err != nil {
		return dir, "", "", fmt.Errorf("git fast-import: %v: %s", err, out)
	}
	out, err := exec.Command("git", "-C", dir, "rev-parse", "main", "feature").Output()
	if err != nil {
		return dir, "", "", fmt.Errorf("git rev-parse: %v", err)
	}
	shas := strings.Fields(string(out))
	return dir, shas[0], shas[1], nil
}

func benchPath(d, sd, f int) string { return fmt.Sprintf("pkg%03d/sub%02d/file%03d.go", d, sd, f) }

func benchContent(d, sd, f int, v string) string {
	return fmt.Sprintf("package sub%02d\n\n// File %d of %d/%d, %s.\nfunc F%d() int { return %d }\n", sd, f, d, sd, v, f, d*sd*f)
}

// BenchmarkDecide100k measures the gate on a 100k-file repository with a
// 10-file change, next to `git diff --name-only merge-base head` on the same
// repository; the Decide sub-benchmark reports its ratio to git as x-git.
func BenchmarkDecide100k(b *testing.B) {
	dir, base, head := benchRepo(b)
	var gitNsPerOp float64
	b.Run("GitDiffNameOnly", func(b *testing.B) {
		for b.Loop() {
			out, err := exec.Command("git", "-C", dir, "diff", "--name-only", base, head).Output()
			if err != nil {
				b.Fatalf("git diff: %v", err)
			}
			if n := bytes.Count(out, []byte{'\n'}); n != benchChanged {
				b.Fatalf("git diff listed %d paths, want %d", n, benchChanged)
			}
		}
		gitNsPerOp = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	// The gate also walks head's whole tree with blob sizes (tree safety,
	// max-files, max-bytes); `git ls-tree -r -l` is git doing that walk.
	b.Run("GitLsTreeLong", func(b *testing.B) {
		for b.Loop() {
			out, err := exec.Command("git", "-C", dir, "ls-tree", "-r", "-l", head).Output()
			if err != nil {
				b.Fatalf("git ls-tree: %v", err)
			}
			if n := bytes.Count(out, []byte{'\n'}); n < benchTop*benchSub*benchFiles {
				b.Fatalf("git ls-tree listed %d entries", n)
			}
		}
	})
	policy := gate.DefaultPolicy()
	policy.MaxFiles = 2 * benchTop * benchSub * benchFiles
	decide := func(b *testing.B, repo *git.Repository) {
		d, err := gate.Decide(b.Context(), repo, base, head, policy)
		if err != nil {
			b.Fatalf("Decide() error = %v", err)
		}
		if _, ok := d.Admitted(); !ok || len(d.Changed) != benchChanged {
			b.Fatalf("Decide() = %s %v, %d changed; want admitted, %d changed", d.Refusal, d.Violations, len(d.Changed), benchChanged)
		}
	}
	report := func(b *testing.B) {
		if gitNsPerOp > 0 {
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/gitNsPerOp, "x-git")
		}
	}
	b.Run("Decide", func(b *testing.B) {
		repo, err := git.PlainOpen(dir)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			decide(b, repo)
		}
		report(b)
	})
	b.Run("OpenAndDecide", func(b *testing.B) {
		for b.Loop() {
			repo, err := git.PlainOpen(dir)
			if err != nil {
				b.Fatal(err)
			}
			decide(b, repo)
		}
		report(b)
	})
}
