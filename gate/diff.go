package gate

import (
	"slices"

	"github.com/go-git/go-git/v5/plumbing"
)

// changedPaths lists every path that differs between the trees from and to:
// additions, deletions, content, mode and type changes, gitlinks. A rename is
// a deletion plus an addition. When an entry changes between a directory and
// anything else, every path under the directory counts as well. Subtrees
// with equal hashes are not read, so the cost follows the change.
func (r *treeReader) changedPaths(from, to plumbing.Hash) ([]string, error) {
	var out []string
	if err := r.diffTrees("", from, to, &out); err != nil {
		return nil, err
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func (r *treeReader) diffTrees(prefix string, from, to plumbing.Hash, out *[]string) error {
	if from == to {
		return nil
	}
	a, err := r.tree(from)
	if err != nil {
		return err
	}
	b, err := r.tree(to)
	if err != nil {
		return err
	}
	inA := make(map[string]entry, len(a))
	for _, e := range a {
		inA[e.name] = e
	}
	for _, eb := range b {
		ea, ok := inA[eb.name]
		if !ok {
			if err := r.allPaths(prefix, eb, out); err != nil {
				return err
			}
			continue
		}
		delete(inA, eb.name)
		if err := r.diffEntry(prefix, ea, eb, out); err != nil {
			return err
		}
	}
	for _, ea := range a {
		if _, gone := inA[ea.name]; gone {
			if err := r.allPaths(prefix, ea, out); err != nil {
				return err
			}
		}
	}
	return nil
}

// diffEntry compares two entries of the same name.
func (r *treeReader) diffEntry(prefix string, a, b entry, out *[]string) error {
	if a.hash == b.hash && a.mode == b.mode {
		return nil
	}
	switch {
	case a.isDir() && b.isDir():
		return r.diffTrees(prefix+a.name+"/", a.hash, b.hash, out)
	case a.isDir() || b.isDir():
		if err := r.allPaths(prefix, a, out); err != nil {
			return err
		}
		return r.allPaths(prefix, b, out)
	}
	*out = append(*out, prefix+a.name)
	return nil
}

// allPaths lists e itself if it is not a directory, or every non-directory
// path under it.
func (r *treeReader) allPaths(prefix string, e entry, out *[]string) error {
	if !e.isDir() {
		*out = append(*out, prefix+e.name)
		return nil
	}
	es, err := r.tree(e.hash)
	if err != nil {
		return err
	}
	for _, c := range es {
		if err := r.allPaths(prefix+e.name+"/", c, out); err != nil {
			return err
		}
	}
	return nil
}
