package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// workspace is one run's fresh directory, bound at WorkDir. Every host-side
// access inside it goes through root, so a symlink planted by the tree or by
// a step cannot lead vouch outside it.
type workspace struct {
	dir  string
	root *os.Root
}

// newWorkspace creates a fresh directory under workRoot. workRoot is created
// traversable (0711) so the sandbox uid can reach its own workspace.
func newWorkspace(workRoot string) (*workspace, error) {
	if err := os.MkdirAll(workRoot, 0o711); err != nil {
		return nil, fmt.Errorf("create work root %s: %w", workRoot, err)
	}
	dir, err := os.MkdirTemp(workRoot, "run-")
	if err != nil {
		return nil, fmt.Errorf("create workspace under %s: %w", workRoot, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		os.Remove(dir)
		return nil, fmt.Errorf("open workspace %s: %w", dir, err)
	}
	return &workspace{dir: dir, root: root}, nil
}

// chown gives the workspace and everything in it to uid:gid, never following
// a symlink.
func (w *workspace) chown(uid, gid int) error {
	err := fs.WalkDir(w.root.FS(), ".", func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return w.root.Lchown(p, uid, gid)
	})
	if err != nil {
		return fmt.Errorf("chown workspace %s to %d:%d: %w", w.dir, uid, gid, err)
	}
	return nil
}

// remove deletes the workspace without following any symlink in it. A step
// may have left directories without write or search permission; when the
// first attempt fails they are opened up (inside the root) and it is retried.
func (w *workspace) remove() error {
	parent, err := os.OpenRoot(filepath.Dir(w.dir))
	if err != nil {
		w.root.Close()
		return fmt.Errorf("remove workspace %s: %w", w.dir, err)
	}
	defer parent.Close()
	name := filepath.Base(w.dir)
	if err := parent.RemoveAll(name); err == nil {
		w.root.Close()
		return nil
	}
	fs.WalkDir(w.root.FS(), ".", func(p string, d fs.DirEntry, err error) error { //nolint:errcheck // best effort
		if err == nil && d.IsDir() {
			w.root.Chmod(p, 0o700) //nolint:errcheck // best effort
		}
		return nil
	})
	w.root.Close()
	if err := parent.RemoveAll(name); err != nil {
		return fmt.Errorf("remove workspace %s: %w", w.dir, err)
	}
	return nil
}
