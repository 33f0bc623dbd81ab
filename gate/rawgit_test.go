package gate_test

import (
	"bytes"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
)

// gitOut runs git in dir with stdin and returns its stdout.
func gitOut(tb testing.TB, dir string, stdin io.Reader, args ...string) []byte {
	tb.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Stdin = stdin
	cmd.Env = append(os.Environ(),
		"GIT_AUTHOR_NAME=Hostile", "GIT_AUTHOR_EMAIL=h@vouch.invalid", "GIT_AUTHOR_DATE=1767225600 +0000",
		"GIT_COMMITTER_NAME=Hostile", "GIT_COMMITTER_EMAIL=h@vouch.invalid", "GIT_COMMITTER_DATE=1767225600 +0000")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// git is gitOut without stdin, its output trimmed.
func gitLine(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	return strings.TrimSpace(string(gitOut(tb, dir, nil, args...)))
}

// rawEntry is one entry of a tree object written byte by byte: mode and
// name as git stores them, hash in hex.
type rawEntry struct{ mode, name, hash string }

func treeBody(es ...rawEntry) []byte {
	var b []byte
	for _, e := range es {
		h, err := hex.DecodeString(e.hash)
		if err != nil || len(h) != 20 {
			panic("rawEntry hash " + e.hash)
		}
		b = append(b, e.mode+" "+e.name+"\x00"...)
		b = append(b, h...)
	}
	return b
}

// writeObject stores body as a loose object of type typ, without the
// checks git would make, and returns its hash.
func writeObject(tb testing.TB, dir, typ string, body []byte) string {
	tb.Helper()
	return strings.TrimSpace(string(gitOut(tb, dir, bytes.NewReader(body), "hash-object", "--literally", "-t", typ, "-w", "--stdin")))
}

// commitTree commits tree with the given parents.
func commitTree(tb testing.TB, dir, tree string, parents ...string) string {
	tb.Helper()
	args := []string{"commit-tree", tree, "-m", "hostile"}
	for _, p := range parents {
		args = append(args, "-p", p)
	}
	return gitLine(tb, dir, args...)
}

// headWith commits, on top of base, base's root tree with extra entries
// appended; their names must sort after base's (start them with "zz").
func headWith(tb testing.TB, dir, base string, extra ...rawEntry) string {
	tb.Helper()
	root := gitOut(tb, dir, nil, "cat-file", "tree", base+"^{tree}")
	tree := writeObject(tb, dir, "tree", append(root, treeBody(extra...)...))
	return commitTree(tb, dir, tree, base)
}

// reopen opens the repository afresh, so go-git sees packs written since.
func reopen(tb testing.TB, dir string) *git.Repository {
	tb.Helper()
	repo, err := git.PlainOpen(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return repo
}

// packAll moves every object into one pack, deltas allowed, and removes
// the loose copies.
func packAll(tb testing.TB, dir string, args ...string) {
	tb.Helper()
	gitOut(tb, dir, nil, append([]string{"repack", "-a", "-d", "-q"}, args...)...)
	gitOut(tb, dir, nil, "prune-packed")
}
