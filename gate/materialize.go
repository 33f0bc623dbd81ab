package gate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// Materialize writes the plan's head tree from git objects into root, an
// open, empty directory: directories 0755, files 0644 or 0755, symlinks as
// symlinks, no `.git`. Every file system access goes through root, files are
// created exclusively and symlinks last, so nothing found in or planted into
// the directory can redirect a write outside it. It stops when ctx is done.
func (p *Plan) Materialize(ctx context.Context, root *os.Root) error {
	if !p.Valid() {
		return errors.New("materialize: plan was not admitted by the gate")
	}
	objs := openObjects(ctx, p.store)
	defer objs.close()
	m := &materializer{ctx: ctx, root: root, r: newTreeReader(ctx, objs, maxBaseBytes, baseCacheSize), buf: make([]byte, 64<<10)}
	if err := m.dir("", 0, p.tree); err != nil {
		return fmt.Errorf("materialize %s: %w", p.head, err)
	}
	for _, l := range m.links {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("materialize %s: %w", p.head, err)
		}
		if err := root.Symlink(l.target, l.path); err != nil {
			return fmt.Errorf("materialize %s: %w", p.head, err)
		}
	}
	return nil
}

type link struct{ path, target string }

type materializer struct {
	ctx   context.Context
	root  *os.Root
	r     *treeReader
	links []link
	buf   []byte
}

// dir writes the entries of tree h at prefix, depth levels below the root.
// It re-checks what the gate checked, as a second line of defence.
func (m *materializer) dir(prefix string, depth int, h plumbing.Hash) error {
	es, err := m.r.tree(h)
	if err != nil {
		return err
	}
	for _, e := range es {
		if err := m.ctx.Err(); err != nil {
			return err
		}
		p := prefix + e.name
		if rule, why := checkName(e.name); rule != "" {
			return fmt.Errorf("%s: %s", p, why)
		}
		switch e.mode {
		case filemode.Dir:
			if err := m.root.Mkdir(p, 0o755); err != nil {
				return err
			}
			if err := m.root.Chmod(p, 0o755); err != nil { // undo the umask
				return err
			}
			if err := m.dir(p+"/", depth+1, e.hash); err != nil {
				return err
			}
		case filemode.Regular:
			err = m.file(p, e.hash, 0o644)
		case filemode.Executable:
			err = m.file(p, e.hash, 0o755)
		case filemode.Symlink:
			target, err := m.r.blob(e.hash, maxSymlinkTarget)
			if err != nil {
				return err
			}
			if why := symlinkEscape(depth, string(target)); why != "" {
				return fmt.Errorf("%s: %s", p, why)
			}
			m.links = append(m.links, link{p, string(target)})
		default:
			return fmt.Errorf("%s: cannot materialize mode %o", p, uint32(e.mode))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// file writes blob h to a new file p with exactly perm.
func (m *materializer) file(p string, h plumbing.Hash, perm os.FileMode) (err error) {
	rd, size, err := m.open(h)
	if err != nil {
		return fmt.Errorf("read blob %s for %s: %w", h, p, err)
	}
	defer rd.Close()
	f, err := m.root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	if _, err := io.CopyBuffer(onlyWriter{f}, io.LimitReader(rd, size), m.buf); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return f.Chmod(perm) // undo the umask, on the open file
}

// onlyWriter hides *os.File's ReadFrom so CopyBuffer uses the given buffer.
type onlyWriter struct{ io.Writer }

// maxInMemoryBlob is the largest blob Materialize reads whole; larger ones
// are streamed through go-git.
const maxInMemoryBlob = 32 << 20

// open returns a reader of blob h and its size.
func (m *materializer) open(h plumbing.Hash) (io.ReadCloser, int64, error) {
	info, err := m.r.rd.stat(h)
	if err != nil {
		return nil, 0, err
	}
	if info.size <= maxInMemoryBlob {
		data, err := m.r.blob(h, maxInMemoryBlob)
		if err != nil {
			return nil, 0, err
		}
		return io.NopCloser(bytes.NewReader(data)), int64(len(data)), nil
	}
	return m.r.o.stream(h)
}
