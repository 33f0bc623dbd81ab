package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// workspace is one step's fresh directory, bound at WorkDir. Every
// host-side access inside it goes through root, so a symlink planted by the
// tree or by a step cannot lead vouch outside it.
//
// It lives one level below a guard directory, run-XXX, that vouch owns with
// mode 0710 and the sandbox's group: the sandbox uid can pass through it to
// reach ws/, but no other host user can, even if a step opens up ws/ itself
// (it owns it) and leaves a setuid file there.
type workspace struct {
	guard string // run-XXX, removed as a whole
	dir   string // run-XXX/ws, bound at WorkDir
	root  *os.Root
}

// newWorkspace creates a fresh guarded workspace under workRoot (created
// 0711 so the sandbox uid can traverse it). When gid >= 0 the guard is given
// that group, for a sandbox that runs as another uid than vouch.
func newWorkspace(workRoot string, gid int) (*workspace, error) {
	if err := os.MkdirAll(workRoot, 0o711); err != nil {
		return nil, fmt.Errorf("create work root %s: %w", workRoot, err)
	}
	if err := ownedWorkRoot(workRoot); err != nil {
		return nil, err
	}
	guard, err := os.MkdirTemp(workRoot, "run-")
	if err != nil {
		return nil, fmt.Errorf("create workspace under %s: %w", workRoot, err)
	}
	fail := func(err error) (*workspace, error) {
		os.RemoveAll(guard)
		return nil, fmt.Errorf("prepare workspace %s: %w", guard, err)
	}
	if gid >= 0 {
		if err := os.Chown(guard, os.Geteuid(), gid); err != nil {
			return fail(err)
		}
		if err := os.Chmod(guard, 0o710); err != nil {
			return fail(err)
		}
	}
	dir := filepath.Join(guard, "ws")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fail(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fail(err)
	}
	return &workspace{guard: guard, dir: dir, root: root}, nil
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
	parent, err := os.OpenRoot(filepath.Dir(w.guard))
	if err != nil {
		w.root.Close()
		return fmt.Errorf("remove workspace %s: %w", w.dir, err)
	}
	defer parent.Close()
	name := filepath.Base(w.guard)
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

// ownedWorkRoot refuses a work root someone else could rearrange: it must be
// a real directory (not a symlink) owned by vouch's user and writable by no
// one else, or another local user could swap a workspace for their own tree
// between its preparation and bwrap's bind.
func ownedWorkRoot(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("work root %s: %w", dir, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("work root %s is not a directory (a symlink?)", dir)
	case !ok || int(st.Uid) != os.Geteuid():
		return fmt.Errorf("work root %s is not owned by vouch's user (uid %d)", dir, os.Geteuid())
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("work root %s is writable by group or others (%v)", dir, fi.Mode().Perm())
	}
	return nil
}
