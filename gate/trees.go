package gate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// entry is one decoded tree entry.
type entry struct {
	name string
	mode filemode.FileMode
	hash plumbing.Hash
	// size is the blob's size from its object header, -1 when not known
	// (directories, gitlinks, or a lookup that failed and must be redone).
	size int64
}

func (e entry) isDir() bool { return e.mode == filemode.Dir }

// treeReader decodes tree objects, each at most once per call, and sizes
// their blobs from object headers. It never reads blobs except on request
// (symlink targets, the recipe). With prefetchAll, background goroutines
// load a whole tree ahead of the caller, each tree exactly once.
type treeReader struct {
	ctx context.Context
	o   *objects
	rd  *objReader // the calling goroutine's

	mu     sync.Mutex
	cache  map[plumbing.Hash]*loading
	work   []plumbing.Hash // trees for the prefetchers, taken last first
	cond   *sync.Cond
	closed bool
	wg     sync.WaitGroup
}

// loading is a tree being or having been loaded; done is closed when es and
// err are set.
type loading struct {
	done chan struct{}
	es   []entry
	err  error
}

func newTreeReader(ctx context.Context, o *objects) *treeReader {
	r := &treeReader{ctx: ctx, o: o, rd: o.reader(), cache: map[plumbing.Hash]*loading{}}
	r.cond = sync.NewCond(&r.mu)
	return r
}

// errMalformedTree marks a tree object that does not parse.
var errMalformedTree = errors.New("malformed tree object")

// tree returns the entries of tree object h, in stored order. Callers must
// not modify them.
func (r *treeReader) tree(h plumbing.Hash) ([]entry, error) {
	r.mu.Lock()
	l, ok := r.cache[h]
	if !ok {
		l = &loading{done: make(chan struct{})}
		r.cache[h] = l
	}
	r.mu.Unlock()
	if !ok {
		r.load(r.rd, h, l)
	}
	<-l.done
	return l.es, l.err
}

// load reads, parses and sizes tree h into l.
func (r *treeReader) load(rd *objReader, h plumbing.Hash, l *loading) {
	defer close(l.done)
	if l.err = r.ctx.Err(); l.err != nil {
		return
	}
	data, err := rd.read(h, plumbing.TreeObject, maxTreeBytes)
	if err != nil {
		l.err = fmt.Errorf("tree: %w", err)
		return
	}
	if l.es, err = parseTree(data); err != nil {
		l.err = fmt.Errorf("read tree %s: %w", h, err)
		return
	}
	rd.sizeAll(l.es)
}

// prefetchAll starts up to n goroutines that load every tree under root
// ahead of the caller; stop ends them and must be called before the objects
// are closed.
func (r *treeReader) prefetchAll(root plumbing.Hash, n int) (stop func()) {
	if n <= 0 {
		return func() {}
	}
	r.mu.Lock()
	r.work = append(r.work, root)
	r.mu.Unlock()
	for range n {
		r.wg.Add(1)
		go r.prefetcher(r.o.reader())
	}
	return func() {
		r.mu.Lock()
		r.closed = true
		r.cond.Broadcast()
		r.mu.Unlock()
		r.wg.Wait()
	}
}

// prefetcher loads trees from the work stack and pushes their subtrees.
// Taking the last pushed first, it walks the tree from its far end while the
// caller walks it from the start, so they rarely want the same tree.
func (r *treeReader) prefetcher(rd *objReader) {
	defer r.wg.Done()
	for {
		r.mu.Lock()
		for len(r.work) == 0 && !r.closed {
			r.cond.Wait()
		}
		if r.closed {
			r.mu.Unlock()
			return
		}
		h := r.work[len(r.work)-1]
		r.work = r.work[:len(r.work)-1]
		l, seen := r.cache[h]
		if !seen {
			l = &loading{done: make(chan struct{})}
			r.cache[h] = l
		}
		r.mu.Unlock()
		if !seen {
			r.load(rd, h, l)
		}
		<-l.done
		if l.err != nil {
			continue
		}
		r.mu.Lock()
		for _, e := range l.es {
			if e.isDir() {
				if _, ok := r.cache[e.hash]; !ok {
					r.work = append(r.work, e.hash)
				}
			}
		}
		r.cond.Broadcast()
		r.mu.Unlock()
	}
}

// parseTree decodes the body of a git tree object: repeated
// "<octal mode> <name>\x00<20-byte hash>".
func parseTree(b []byte) ([]entry, error) {
	es := make([]entry, 0, bytes.Count(b, []byte{0}))
	// One string for the whole object; names are substrings of it.
	all, base := string(b), len(b)
	for len(b) > 0 {
		sp := bytes.IndexByte(b, ' ')
		if sp <= 0 {
			return nil, fmt.Errorf("%w: bad mode", errMalformedTree)
		}
		var mode uint32
		for _, c := range b[:sp] {
			if c < '0' || c > '7' || mode > 0o7777777 {
				return nil, fmt.Errorf("%w: bad mode %q", errMalformedTree, b[:sp])
			}
			mode = mode<<3 | uint32(c-'0')
		}
		b = b[sp+1:]
		nul := bytes.IndexByte(b, 0)
		if nul < 0 || len(b) < nul+1+20 {
			return nil, fmt.Errorf("%w: truncated entry", errMalformedTree)
		}
		var h plumbing.Hash
		copy(h[:], b[nul+1:nul+21])
		at := base - len(b)
		es = append(es, entry{name: all[at : at+nul], mode: canonicalMode(filemode.FileMode(mode)), hash: h, size: -1})
		b = b[nul+21:]
	}
	return es, nil
}

// canonicalMode maps the historical variants git accepts (e.g. 100664) to
// the canonical modes; anything else is returned unchanged and later refused.
func canonicalMode(m filemode.FileMode) filemode.FileMode {
	switch m & 0o170000 {
	case 0o040000:
		return filemode.Dir
	case 0o100000:
		if m&0o111 != 0 {
			return filemode.Executable
		}
		return filemode.Regular
	case 0o120000:
		return filemode.Symlink
	case 0o160000:
		return filemode.Submodule
	}
	return m
}

// blob reads the whole blob h, refusing one larger than max bytes.
func (r *treeReader) blob(h plumbing.Hash, max int64) ([]byte, error) {
	data, err := r.rd.read(h, plumbing.BlobObject, max)
	if err != nil {
		return nil, fmt.Errorf("blob: %w", err)
	}
	return data, nil
}

// find returns the entry at the slash path p under tree root, without
// following symlinks; ok is false when some component is missing or not a
// directory.
func (r *treeReader) find(root plumbing.Hash, p string) (entry, bool, error) {
	cur := root
	for {
		name, rest, more := cut(p)
		es, err := r.tree(cur)
		if err != nil {
			return entry{}, false, err
		}
		e, ok := lookup(es, name)
		if !ok {
			return entry{}, false, nil
		}
		if !more {
			return e, true, nil
		}
		if !e.isDir() {
			return entry{}, false, nil
		}
		cur, p = e.hash, rest
	}
}

func cut(p string) (first, rest string, more bool) {
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			return p[:i], p[i+1:], true
		}
	}
	return p, "", false
}

// lookup finds name among es; trees are small enough that a scan is as fast
// as a search that has to respect git's directory-slash ordering.
func lookup(es []entry, name string) (entry, bool) {
	for _, e := range es {
		if e.name == name {
			return e, true
		}
	}
	return entry{}, false
}
