package gate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// Bounds on the trees a treeReader loads.
const (
	// maxTrustedTree bounds one tree object of base's history, and of an
	// admitted head when it is materialized.
	maxTrustedTree = 64 << 20
	// maxHeadTree bounds one tree object of head; the policy may lower it.
	maxHeadTree = 16 << 20
	// treeBytesPerFile is how many tree bytes head may have per file the
	// policy allows: an entry is a mode, a name of at most 255 bytes (a
	// longer one cannot be checked out), a NUL and a 20-byte hash.
	treeBytesPerFile = 300
	// minTreeBytes keeps the bounds usable under a tiny MaxFiles.
	minTreeBytes = 64 << 10
	// prefetchMax is the largest tree a prefetcher loads; larger ones are
	// left to the caller, whose walk refuses what is too large in an order
	// that does not depend on scheduling.
	prefetchMax = 1 << 20
)

// entry is one decoded tree entry.
type entry struct {
	name string
	mode filemode.FileMode
	hash plumbing.Hash
	// size is the blob's size from its object header, -1 when not known
	// (directories, gitlinks, objects outside the packs, a lookup that
	// failed and must be redone) and sizeNotBlob when the object is not a
	// blob.
	size int64
}

func (e entry) isDir() bool { return e.mode == filemode.Dir }

// treeReader decodes tree objects, each at most once per call, and sizes
// their blobs from object headers. It never reads blobs except on request
// (symlink targets, the recipe). With prefetchAll, background goroutines
// load a whole tree ahead of the caller, each tree at most once.
//
// Every tree it loads is first checked from its object header, type and
// size, and then parsed up to maxEntries entries, so a hostile tree is
// refused before it is inflated.
type treeReader struct {
	ctx context.Context // the call's; a treeReader lives for one call
	o   *objects
	rd  *objReader // the calling goroutine's

	// The bounds on one tree object; set before the walk of head, relaxed
	// (limitTrusted) once head is known to be within them.
	maxTree    int64
	maxEntries int // 0: no bound beyond maxTree
	// budget bounds the tree bytes the prefetchers bring into the cache;
	// held counts what the cache holds.
	budget int64
	held   atomic.Int64

	mu     sync.Mutex
	cache  map[plumbing.Hash]*loading
	skip   map[plumbing.Hash]bool // trees a prefetcher gave up on
	work   []plumbing.Hash        // trees for the prefetchers, taken last first
	cond   *sync.Cond
	closed bool
	wg     sync.WaitGroup
}

// loading is a tree being or having been loaded; done is closed when es,
// size and err are set, or when a prefetcher abandoned it.
type loading struct {
	done      chan struct{}
	es        []entry
	size      int64
	err       error
	abandoned bool
}

func newTreeReader(ctx context.Context, o *objects, maxBase, cache int64) *treeReader {
	r := &treeReader{ctx: ctx, o: o, rd: o.reader(maxBase, cache), cache: map[plumbing.Hash]*loading{}, skip: map[plumbing.Hash]bool{}}
	r.limitTrusted()
	r.cond = sync.NewCond(&r.mu)
	return r
}

// treeBounds are the bounds a policy puts on head's tree objects: one
// object (perTree) and all the trees of the walk together (total).
func treeBounds(p Policy) (perTree, total int64) {
	total = max(minTreeBytes, int64(min(p.MaxFiles, math.MaxInt64/treeBytesPerFile))*treeBytesPerFile)
	return min(maxHeadTree, total), total
}

// entryBound is how many entries head's trees may hold in all: MaxFiles
// files and MaxFiles directories.
func entryBound(p Policy) int { return 2 * min(p.MaxFiles, math.MaxInt/2) }

// limitHead bounds the trees loaded from now on by the policy: head's.
func (r *treeReader) limitHead(p Policy) {
	r.maxTree, r.budget = treeBounds(p)
	// MaxFiles bounds files and, separately, directories: a tree with
	// more entries than both together is refused whatever they are.
	r.maxEntries = entryBound(p)
}

// limitTrusted bounds the trees loaded from now on as those of base's
// history, and forgets the trees that failed under head's bounds. Only
// call it while no prefetcher runs.
func (r *treeReader) limitTrusted() {
	r.maxTree, r.maxEntries, r.budget = maxTrustedTree, 0, 0
	for h, l := range r.cache {
		if l.err != nil {
			delete(r.cache, h)
		}
	}
}

// errMalformedTree marks a tree object that does not parse.
var errMalformedTree = errors.New("malformed tree object")

// limitError is a tree object beyond a bound of the policy; rule names the
// bound as a Violation does.
type limitError struct{ rule, why string }

func (e *limitError) Error() string { return e.why }

// tree returns the entries of tree object h, in stored order. Callers must
// not modify them.
func (r *treeReader) tree(h plumbing.Hash) ([]entry, error) {
	es, _, err := r.treeSized(h)
	return es, err
}

// treeSized is tree that also returns the size of the tree object.
func (r *treeReader) treeSized(h plumbing.Hash) ([]entry, int64, error) {
	if err := r.ctx.Err(); err != nil {
		return nil, 0, err
	}
	for {
		r.mu.Lock()
		l, ok := r.cache[h]
		if !ok {
			l = &loading{done: make(chan struct{})}
			r.cache[h] = l
		}
		r.mu.Unlock()
		if !ok {
			r.load(r.rd, h, l, false)
		}
		<-l.done
		if !l.abandoned {
			return l.es, l.size, l.err
		}
		r.mu.Lock()
		if r.cache[h] == l {
			delete(r.cache, h)
		}
		r.mu.Unlock()
	}
}

// load checks, reads, parses and sizes tree h into l. A prefetcher gives
// up, leaving the tree to the caller, on a tree larger than prefetchMax or
// the budget, and on any error.
func (r *treeReader) load(rd *objReader, h plumbing.Hash, l *loading, prefetch bool) {
	defer close(l.done)
	l.es, l.size, l.err = r.loadTree(rd, h, prefetch)
	if prefetch && (l.err != nil || l.es == nil) {
		l.es, l.err, l.abandoned = nil, nil, true
		r.mu.Lock()
		r.skip[h] = true
		r.mu.Unlock()
	}
}

func (r *treeReader) loadTree(rd *objReader, h plumbing.Hash, prefetch bool) ([]entry, int64, error) {
	if err := r.ctx.Err(); err != nil {
		return nil, 0, err
	}
	info, err := rd.stat(h)
	if err != nil {
		return nil, 0, fmt.Errorf("tree: %w", err)
	}
	switch {
	case info.typ != plumbing.TreeObject:
		return nil, 0, fmt.Errorf("tree %s: %w (a %s, want a tree)", h, plumbing.ErrObjectNotFound, info.typ)
	case info.size > r.maxTree:
		return nil, 0, &limitError{"max-tree-bytes", fmt.Sprintf("tree object %s is %d bytes, more than %d", h, info.size, r.maxTree)}
	case prefetch && (info.size > prefetchMax || r.held.Load()+info.size > r.budget):
		return nil, 0, nil
	}
	data, err := rd.read(h, plumbing.TreeObject, info.size)
	if err != nil {
		return nil, 0, fmt.Errorf("tree: %w", err)
	}
	es, err := parseTree(data, r.maxEntries)
	if err != nil {
		if errors.Is(err, errTooManyEntries) {
			return nil, 0, &limitError{"max-files", fmt.Sprintf("tree object %s has more than %d entries", h, r.maxEntries)}
		}
		return nil, 0, fmt.Errorf("read tree %s: %w", h, err)
	}
	r.held.Add(info.size)
	rd.sizeAll(es)
	return es, info.size, nil
}

// prefetchAll starts up to n goroutines that load the trees under root
// ahead of the caller; stop ends them and must be called before the objects
// are closed. Each prefetcher reads with small bounds of its own and
// together they load at most r.budget bytes of trees.
func (r *treeReader) prefetchAll(root plumbing.Hash, n int) (stop func()) {
	if n <= 0 {
		return func() {}
	}
	r.mu.Lock()
	r.work = append(r.work, root)
	r.mu.Unlock()
	for range n {
		r.wg.Add(1)
		go r.prefetcher(r.o.reader(prefetchMax, prefetchCacheSize))
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
			if r.skip[h] || r.held.Load() >= r.budget {
				r.mu.Unlock()
				continue
			}
			l = &loading{done: make(chan struct{})}
			r.cache[h] = l
		}
		r.mu.Unlock()
		if !seen {
			r.load(rd, h, l, true)
		}
		<-l.done
		if l.err != nil || l.abandoned {
			continue
		}
		r.mu.Lock()
		for _, e := range l.es {
			if e.isDir() {
				if _, ok := r.cache[e.hash]; !ok && !r.skip[e.hash] {
					r.work = append(r.work, e.hash)
				}
			}
		}
		r.cond.Broadcast()
		r.mu.Unlock()
	}
}

// errTooManyEntries marks a tree with more entries than parseTree may return.
var errTooManyEntries = errors.New("too many tree entries")

// parseTree decodes the body of a git tree object: repeated
// "<octal mode> <name>\x00<20-byte hash>". With max > 0 it stops at the
// max-th entry and returns errTooManyEntries.
func parseTree(b []byte, max int) ([]entry, error) {
	n := bytes.Count(b, []byte{0})
	if max > 0 {
		n = min(n, max)
	}
	es := make([]entry, 0, n)
	// One string for the whole object; names are substrings of it.
	all, base := string(b), len(b)
	for len(b) > 0 {
		if max > 0 && len(es) == max {
			return nil, errTooManyEntries
		}
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
