package gate

import (
	"fmt"
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
// once and no blob except symlink targets; blob sizes come from object
// headers.
type safetyWalk struct {
	r        *treeReader
	maxFiles int
	maxBytes int64

	files, dirs int
	bytes       int64
	overBytes   bool
	aborted     bool // the walk stopped early at max-files
	found       []finding
}

func (w *safetyWalk) add(p, rule, why string) {
	w.found = append(w.found, finding{Violation{Path: p, Rule: rule}, why})
}

// walk checks the tree h found at prefix (which ends in "/" unless empty),
// depth directories below the root.
func (w *safetyWalk) walk(prefix string, depth int, h plumbing.Hash) error {
	es, err := w.r.tree(h)
	if err != nil {
		return err
	}
	if why := checkOrder(es); why != "" {
		w.add(strings.TrimSuffix(prefix, "/"), "bad-tree", why)
	}
	for _, e := range es {
		if w.aborted {
			return nil
		}
		p := prefix + e.name
		if rule, why := checkName(e.name); rule != "" {
			w.add(p, rule, why)
			continue
		}
		switch e.mode {
		case filemode.Dir:
			if w.dirs++; w.dirs > w.maxFiles {
				w.add(p, "max-files", fmt.Sprintf("more than %d directories", w.maxFiles))
				w.aborted = true
				return nil
			}
			if err := w.walk(p+"/", depth+1, e.hash); err != nil {
				return err
			}
			continue
		case filemode.Submodule:
			w.add(p, "gitlink", "submodule (gitlink) entry "+e.hash.String())
		case filemode.Regular, filemode.Executable:
		case filemode.Symlink:
			if why, err := w.checkSymlink(depth, e); err != nil {
				return err
			} else if why != "" {
				w.add(p, "symlink-escape", why)
			}
		default:
			w.add(p, "bad-mode", fmt.Sprintf("unsupported mode %o", uint32(e.mode)))
		}
		if w.files++; w.files > w.maxFiles {
			w.add(p, "max-files", fmt.Sprintf("more than %d files", w.maxFiles))
			w.aborted = true
			return nil
		}
		if e.mode == filemode.Submodule {
			continue
		}
		n := e.size
		if n < 0 {
			if n, err = w.r.rd.size(e.hash); err != nil {
				return fmt.Errorf("size of %s (%s): %w", p, e.hash, err)
			}
		}
		if w.bytes += n; w.bytes > w.maxBytes && !w.overBytes {
			w.overBytes = true
			w.add(p, "max-bytes", fmt.Sprintf("more than %d bytes of files", w.maxBytes))
		}
	}
	return nil
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

// checkSymlink explains why the symlink e, found depth directories below
// the root, may point outside the tree; "" means it cannot. The target is
// resolved lexically from the link's directory. A ".." after a named
// component is refused too: that component may itself be a symlink, so
// lexical resolution would not be what the kernel does.
func (w *safetyWalk) checkSymlink(depth int, e entry) (string, error) {
	if e.size > maxSymlinkTarget {
		return fmt.Sprintf("target is %d bytes long", e.size), nil
	}
	b, err := w.r.blob(e.hash, maxSymlinkTarget)
	if err != nil {
		return "", err
	}
	target := string(b)
	return symlinkEscape(depth, target), nil
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
