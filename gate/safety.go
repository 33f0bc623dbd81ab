package gate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// maxSymlinkTarget bounds a symlink's target (Linux PATH_MAX).
const maxSymlinkTarget = 4096

// finding is one tree-safety violation with its human explanation.
type finding struct {
	v   Violation
	why string
}

// safetyWalk checks every entry of head's tree. It reads each tree object
// once and no blob except symlink targets; blob types and sizes come from
// object headers. Problems of head's objects themselves (a tree that does
// not parse, an entry whose object is missing or of the wrong type) are
// findings, rule "bad-tree"; only the environment (ctx done, the file
// system) makes it return an error.
type safetyWalk struct {
	r          *treeReader
	maxFiles   int
	maxBytes   int64
	maxTrees   int64 // total bytes of the tree objects walked
	maxEntries int   // total entries of the trees walked

	files, dirs, entries int
	pathBytes            int // total bytes of the paths walked
	bytes, treeBytes     int64
	overBytes            bool
	aborted              bool // the walk stopped early: a bound, or a tree it cannot read
	found                []finding
}

func newSafetyWalk(r *treeReader, p Policy) *safetyWalk {
	_, total := treeBounds(p)
	return &safetyWalk{r: r, maxFiles: p.MaxFiles, maxBytes: p.MaxBytes, maxTrees: total, maxEntries: entryBound(p)}
}

func (w *safetyWalk) add(p, rule, why string) {
	w.found = append(w.found, finding{Violation{Path: p, Rule: rule}, why})
}

// abort records a finding that ends the walk: what follows it could not be
// listed, or would only be refused again.
func (w *safetyWalk) abort(p, rule, why string) {
	w.add(p, rule, why)
	w.aborted = true
}

// walk checks the tree h found at prefix (which ends in "/" unless empty),
// depth directories below the root.
func (w *safetyWalk) walk(prefix string, depth int, h plumbing.Hash) error {
	at := strings.TrimSuffix(prefix, "/")
	es, size, err := w.r.treeSized(h)
	if err != nil {
		var le *limitError
		switch {
		case envError(err):
			return err
		case errors.As(err, &le):
			w.abort(at, le.rule, le.why)
		default:
			w.abort(at, "bad-tree", err.Error())
		}
		return nil
	}
	// Every entry of a walked tree is a file or a directory of head, so
	// these bound the trees held at once, whatever order they come in.
	if w.treeBytes += size; w.treeBytes > w.maxTrees {
		w.abort(at, "max-tree-bytes", fmt.Sprintf("more than %d bytes of tree objects", w.maxTrees))
		return nil
	}
	if w.entries += len(es); w.entries > w.maxEntries {
		w.abort(at, "max-files", fmt.Sprintf("more than %d files and directories", w.maxEntries))
		return nil
	}
	if why := checkOrder(es); why != "" {
		w.add(at, "bad-tree", why)
	}
	for i, e := range es {
		if w.aborted {
			return nil
		}
		if i%256 == 255 {
			if err := w.r.ctx.Err(); err != nil {
				return err
			}
		}
		p := prefix + e.name
		if rule, why := checkName(e.name); rule != "" {
			w.add(p, rule, why)
			continue
		}
		// Bound what the paths themselves cost: a tiny repository of deep,
		// long-named directories would otherwise make every later path
		// list (the diff, the decision) grow with the square of the depth.
		if len(p) > maxPathLen {
			w.abort(p[:256]+"…", "path-too-long", fmt.Sprintf("a path longer than %d bytes", maxPathLen))
			return nil
		}
		if w.pathBytes += len(p); w.pathBytes > maxPathBytes {
			w.abort(p[:min(len(p), 256)], "max-path-bytes", fmt.Sprintf("more than %d bytes of paths in all", maxPathBytes))
			return nil
		}
		if e.mode == filemode.Dir {
			if depth+1 > maxTreeDepth {
				w.abort(p[:min(len(p), 256)], "max-depth", fmt.Sprintf("directories nested deeper than %d", maxTreeDepth))
				return nil
			}
			if w.dirs++; w.dirs > w.maxFiles {
				w.abort(p, "max-files", fmt.Sprintf("more than %d directories", w.maxFiles))
				return nil
			}
			if err := w.walk(p+"/", depth+1, e.hash); err != nil {
				return err
			}
			continue
		}
		// Count before reading anything of the entry.
		if w.files++; w.files > w.maxFiles {
			w.abort(p, "max-files", fmt.Sprintf("more than %d files", w.maxFiles))
			return nil
		}
		switch e.mode {
		case filemode.Submodule:
			w.add(p, "gitlink", "submodule (gitlink) entry "+e.hash.String())
		case filemode.Regular, filemode.Executable, filemode.Symlink:
			if err := w.checkBlob(p, depth, e); err != nil {
				return err
			}
		default:
			w.add(p, "bad-mode", fmt.Sprintf("unsupported mode %o", uint32(e.mode)))
		}
	}
	return nil
}

// checkBlob checks the file or symlink entry e at p: its object is a blob,
// its size counts towards max-bytes, and a symlink stays in the tree.
func (w *safetyWalk) checkBlob(p string, depth int, e entry) error {
	n := e.size
	if n < 0 {
		info, err := w.r.rd.stat(e.hash)
		if err != nil {
			return w.badEntry(p, err)
		}
		if info.typ != plumbing.BlobObject {
			w.add(p, "bad-tree", fmt.Sprintf("mode %o names %s, a %s, not a blob", uint32(e.mode), e.hash, info.typ))
			return nil
		}
		n = info.size
	}
	if w.bytes += n; w.bytes > w.maxBytes && !w.overBytes {
		w.overBytes = true
		w.add(p, "max-bytes", fmt.Sprintf("more than %d bytes of files", w.maxBytes))
	}
	if e.mode != filemode.Symlink {
		return nil
	}
	why, err := w.checkSymlink(depth, e.hash, n)
	if err != nil {
		return w.badEntry(p, err)
	}
	if why != "" {
		w.add(p, "symlink-escape", why)
	}
	return nil
}

// badEntry records err, met reading the object of the entry at p, as a
// finding, unless it comes from the environment.
func (w *safetyWalk) badEntry(p string, err error) error {
	if envError(err) {
		return err
	}
	w.add(p, "bad-tree", err.Error())
	return nil
}

// envError reports whether err, met reading objects, comes from the
// environment (ctx done, the file system) rather than from the objects.
func envError(err error) bool {
	var (
		pe *fs.PathError
		se *os.SyscallError
	)
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &pe) || errors.As(err, &se)
}

// checkName returns the rule an entry name breaks, if any.
func checkName(name string) (rule, why string) {
	switch {
	case name == "" || name == "." || name == "..":
		return "dotdot", fmt.Sprintf("path component %q", name)
	case strings.HasPrefix(name, "/"):
		return "absolute-path", fmt.Sprintf("absolute name %q", name)
	case strings.Contains(name, "/"):
		return "bad-name", fmt.Sprintf("name %q contains a slash", name)
	case isDotGit(name):
		return "dotgit", fmt.Sprintf("path component %q names a git directory", name)
	}
	return "", ""
}

// isDotGit reports names a checkout could treat as ".git": any case, with
// trailing dots or spaces (Windows), or the 8.3 short name.
func isDotGit(name string) bool {
	if len(name) < 4 || name[0] != '.' && name[0] != 'g' && name[0] != 'G' {
		return false
	}
	return strings.EqualFold(strings.TrimRight(name, " ."), ".git") || strings.EqualFold(name, "git~1")
}

// checkOrder reports a tree whose entries are not in git's strict order, or
// that holds a file and a directory of the same name: a checkout of such a
// tree depends on which entry wins.
func checkOrder(es []entry) string {
	for i := 1; i < len(es); i++ {
		if gitOrder(es[i-1], es[i]) >= 0 {
			return fmt.Sprintf("entries %q and %q are duplicated or out of order", es[i-1].name, es[i].name)
		}
	}
	for _, d := range es {
		if !d.isDir() {
			continue
		}
		// A file named like d sorts before d, possibly with names such as
		// "d.txt" or "d-1" between them.
		f := entry{name: d.name}
		i := sort.Search(len(es), func(i int) bool { return gitOrder(es[i], f) >= 0 })
		if i < len(es) && es[i].name == d.name && !es[i].isDir() {
			return fmt.Sprintf("%q is both a directory and a file", d.name)
		}
	}
	return ""
}

// gitOrder compares tree entries the way git sorts them: by name, a
// directory's name as if it ended in "/".
func gitOrder(a, b entry) int {
	n := min(len(a.name), len(b.name))
	if c := strings.Compare(a.name[:n], b.name[:n]); c != 0 {
		return c
	}
	next := func(e entry) int {
		switch {
		case len(e.name) > n:
			return int(e.name[n])
		case e.isDir():
			return '/'
		}
		return -1
	}
	ca, cb := next(a), next(b)
	switch {
	case ca < cb:
		return -1
	case ca > cb:
		return 1
	}
	if len(a.name) == len(b.name) {
		return 0
	}
	if len(a.name) < len(b.name) {
		return -1
	}
	return 1
}

// checkSymlink explains why the symlink whose target is blob h (size
// bytes), found depth directories below the root, may point outside the
// tree; "" means it cannot. The target is resolved lexically from the
// link's directory. A ".." after a named component is refused too: that
// component may itself be a symlink, so lexical resolution would not be
// what the kernel does.
func (w *safetyWalk) checkSymlink(depth int, h plumbing.Hash, size int64) (string, error) {
	if size > maxSymlinkTarget {
		return fmt.Sprintf("target is %d bytes long", size), nil
	}
	b, err := w.r.blob(h, maxSymlinkTarget)
	if err != nil {
		return "", err
	}
	return symlinkEscape(depth, string(b)), nil
}

// symlinkEscape is the pure part of checkSymlink.
func symlinkEscape(depth int, target string) string {
	switch {
	case target == "":
		return "empty symlink target"
	case strings.ContainsRune(target, 0):
		return fmt.Sprintf("target %q contains a NUL byte", target)
	case strings.HasPrefix(target, "/"):
		return fmt.Sprintf("absolute target %q", target)
	}
	named := false
	for _, c := range strings.Split(target, "/") {
		switch c {
		case "", ".":
		case "..":
			if named {
				return fmt.Sprintf("target %q climbs through a named component", target)
			}
			if depth--; depth < 0 {
				return fmt.Sprintf("target %q climbs out of the tree", target)
			}
		default:
			named = true
		}
	}
	return ""
}

// Bounds on head's paths, whatever the policy: git itself refuses trees
// deeper than 2048 (core.maxTreeDepth) and no file system takes a path
// beyond 4096 bytes.
const (
	maxTreeDepth = 256
	maxPathLen   = 4096
	maxPathBytes = 64 << 20
)
