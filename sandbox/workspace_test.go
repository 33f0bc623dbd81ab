package sandbox

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestWorkspaceNeverFollowsSymlinks: chown and removal touch the links a
// tree or a step planted, never their targets outside the workspace.
func TestWorkspaceNeverFollowsSymlinks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	ws, err := newWorkspace(filepath.Join(t.TempDir(), "work"), DefaultGID)
	if err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"file-link": victim, "dir-link": outside} {
		if err := os.Symlink(target, filepath.Join(ws.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(ws.dir, "locked"), 0o000); err != nil {
		t.Fatal(err)
	}
	if err := ws.chown(DefaultUID, DefaultGID); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{outside, victim} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 {
			t.Errorf("chown followed a symlink to %s (uid %d)", p, st.Uid)
		}
	}
	if fi, err := os.Lstat(filepath.Join(ws.dir, "file-link")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != DefaultUID {
		t.Errorf("link itself not chowned: %v", err)
	}
	if err := ws.remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ws.dir); !os.IsNotExist(err) {
		t.Errorf("workspace still exists: %v", err)
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "keep" {
		t.Errorf("removal reached through a symlink: %q, %v", b, err)
	}
}

// TestWorkRootMustBeOwned: a work root another user owns, a group- or
// world-writable one, or a symlink is refused before any workspace is made.
func TestWorkRootMustBeOwned(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a directory owned by another user")
	}
	base := t.TempDir()
	foreign := filepath.Join(base, "foreign")
	writable := filepath.Join(base, "writable")
	link := filepath.Join(base, "link")
	for _, d := range []string{foreign, writable} {
		if err := os.Mkdir(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(foreign, DefaultUID, DefaultGID); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(writable, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(writable, link); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{foreign, writable, link} {
		if ws, err := newWorkspace(d, DefaultGID); err == nil {
			ws.remove()
			t.Errorf("newWorkspace(%s) accepted an untrusted work root", d)
		}
		entries, _ := os.ReadDir(d)
		if len(entries) != 0 {
			t.Errorf("%s holds %v: a workspace was made", d, entries)
		}
	}
}
