package gate

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// Bounds on what objects reads into memory.
const (
	maxTreeBytes  = 256 << 20 // one tree object
	maxBaseBytes  = 512 << 20 // one delta base
	baseCacheSize = 64 << 20  // delta bases kept for one call
)

// objects reads git objects for one call: from the repository's packs,
// mapped into memory, when it can, and through go-git's storer for anything
// else (loose objects, alternates, storers that are not on disk). It is
// shared by goroutines; each reads through its own objReader.
type objects struct {
	s     storer.EncodedObjectStorer
	mu    sync.Mutex // go-git's storer is not safe for concurrent use
	packs []*pack
}

// objReader is one goroutine's reader: its own inflater and delta bases.
type objReader struct {
	o      *objects
	z      inflater
	bases  map[baseKey]baseObj
	cached int64
	pos    []int   // scratch for sizeAll
	offs   []int64 // scratch for sizeAll
	sink   byte    // keeps sizeAll's warming loads
}

func (o *objects) reader() *objReader {
	return &objReader{o: o, bases: map[baseKey]baseObj{}}
}

type baseKey struct {
	p   *pack
	off int64
}

type baseObj struct {
	typ  int
	data []byte
}

// openObjects maps the packs of s when s is a repository on disk. A pack
// that cannot be mapped is simply left to go-git.
func openObjects(s storer.EncodedObjectStorer) *objects {
	o := &objects{s: s}
	fsys, ok := s.(interface{ Filesystem() billy.Filesystem })
	lister, ok2 := s.(interface {
		ObjectPacks() ([]plumbing.Hash, error)
	})
	if !ok || !ok2 {
		return o
	}
	hashes, err := lister.ObjectPacks()
	if err != nil {
		return o
	}
	root := fsys.Filesystem().Root()
	for _, h := range hashes {
		if p, err := openPack(root, h); err == nil {
			o.packs = append(o.packs, p)
		}
	}
	return o
}

// close unmaps the packs; o must not be used afterwards.
func (o *objects) close() {
	for _, p := range o.packs {
		p.unmap()
	}
	o.packs = nil
}

func (o *objects) find(h plumbing.Hash) (*pack, int64, bool) {
	for _, p := range o.packs {
		if off, ok := p.offset(h); ok {
			return p, off, true
		}
	}
	return nil, 0, false
}

// size is the size of object h, read from its header alone.
func (r *objReader) size(h plumbing.Hash) (int64, error) {
	if p, off, ok := r.o.find(h); ok {
		n, err := r.sizeAt(p, off)
		if err != nil {
			return 0, fmt.Errorf("size of %s: %w", h, err)
		}
		return n, nil
	}
	r.o.mu.Lock()
	defer r.o.mu.Unlock()
	n, err := r.o.s.EncodedObjectSize(h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		// go-git sizes neither alternates nor every storer; read it.
		obj, err := r.o.s.EncodedObject(plumbing.AnyObject, h)
		if err != nil {
			return 0, err
		}
		return obj.Size(), nil
	}
	return n, err
}

// sizeAll sets the size of every blob and symlink entry of es that a pack
// holds, leaving -1 for the others. It works in stages, each a loop of
// independent loads (index, offset table, entry headers), so the CPU has
// many cache misses in flight at once instead of one after another.
func (r *objReader) sizeAll(es []entry) {
	need := func(e entry) bool { return e.size < 0 && e.mode != filemode.Dir && e.mode != filemode.Submodule }
	r.pos = slices.Grow(r.pos[:0], len(es))[:len(es)]
	r.offs = slices.Grow(r.offs[:0], len(es))[:len(es)]
	for _, p := range r.o.packs {
		names := p.idx[8+256*4:]
		offTable := p.idx[8+256*4+p.n*24:]
		var sink byte
		for _, e := range es {
			if need(e) {
				sink ^= names[p.guess(e.hash)*20]
			}
		}
		for i, e := range es {
			r.pos[i] = -1
			if need(e) {
				if r.pos[i] = p.position(e.hash); r.pos[i] >= 0 {
					sink ^= offTable[r.pos[i]*4]
				}
			}
		}
		for i := range es {
			r.offs[i] = -1
			if r.pos[i] >= 0 {
				if off, ok := p.offsetAt(r.pos[i]); ok && off >= 12 && off < int64(len(p.data)) {
					r.offs[i] = off
					sink ^= p.data[off]
				}
			}
		}
		for i := range es {
			if r.offs[i] >= 0 {
				if n, err := r.sizeAt(p, r.offs[i]); err == nil {
					es[i].size = n
				}
			}
		}
		r.sink ^= sink
	}
}

// sizeAt reads the size of the entry at off from its header, and for a
// delta from the start of its data.
func (r *objReader) sizeAt(p *pack, off int64) (int64, error) {
	hd, err := p.header(off)
	if err != nil {
		return 0, err
	}
	if hd.typ != packOfsDelta && hd.typ != packRefDelta {
		return hd.size, nil
	}
	prefix, err := r.z.inflate(p.data, hd.body, min(hd.size, 20))
	if err != nil {
		return 0, err
	}
	_, size, _, err := deltaSizes(prefix)
	return size, err
}

// read returns the content of object h, which must be of type typ and at
// most max bytes. The caller must not modify it (it may be a cached delta
// base) nor keep it past its next use of r (it may be r's scratch buffer).
func (r *objReader) read(h plumbing.Hash, typ plumbing.ObjectType, max int64) ([]byte, error) {
	if p, off, ok := r.o.find(h); ok {
		t, data, err := r.readAt(p, off, max, 0)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", h, err)
		}
		if plumbing.ObjectType(t) != typ {
			return nil, fmt.Errorf("read %s: %w (a %s, want a %s)", h, plumbing.ErrObjectNotFound, plumbing.ObjectType(t), typ)
		}
		return data, nil
	}
	r.o.mu.Lock()
	defer r.o.mu.Unlock()
	obj, err := r.o.s.EncodedObject(typ, h)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", h, err)
	}
	if obj.Size() > max {
		return nil, fmt.Errorf("read %s: %d bytes, more than %d", h, obj.Size(), max)
	}
	rd, err := obj.Reader()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", h, err)
	}
	defer rd.Close()
	data := make([]byte, obj.Size())
	if _, err := io.ReadFull(rd, data); err != nil {
		return nil, fmt.Errorf("read %s: %w", h, err)
	}
	return data, nil
}

// readAt resolves the pack entry at off, applying deltas.
func (r *objReader) readAt(p *pack, off, max int64, depth int) (int, []byte, error) {
	if b, ok := r.bases[baseKey{p, off}]; ok {
		if int64(len(b.data)) > max {
			return 0, nil, fmt.Errorf("object of %d bytes, more than %d", len(b.data), max)
		}
		return b.typ, b.data, nil
	}
	hd, err := p.header(off)
	if err != nil {
		return 0, nil, err
	}
	switch hd.typ {
	case packOfsDelta, packRefDelta:
	default:
		if hd.size > max {
			return 0, nil, fmt.Errorf("object of %d bytes, more than %d", hd.size, max)
		}
		if depth == 0 { // not a delta base: nothing keeps it
			data, err := r.z.inflateScratch(p.data, hd.body, hd.size)
			return hd.typ, data, err
		}
		data, err := r.z.inflate(p.data, hd.body, hd.size)
		return hd.typ, data, err
	}
	if depth >= maxDeltaDepth {
		return 0, nil, fmt.Errorf("delta chain longer than %d", maxDeltaDepth)
	}
	if hd.size > 2*max+1<<16 {
		return 0, nil, fmt.Errorf("delta of %d bytes for an object of at most %d", hd.size, max)
	}
	typ, base, err := r.base(p, hd, depth)
	if err != nil {
		return 0, nil, err
	}
	delta, err := r.z.inflate(p.data, hd.body, hd.size)
	if err != nil {
		return 0, nil, err
	}
	data, err := applyDelta(base, delta, max)
	return typ, data, err
}

// base returns the object a delta entry applies to, caching it: entries of
// one delta chain share their bases.
func (r *objReader) base(p *pack, hd entryHeader, depth int) (int, []byte, error) {
	bp, boff := p, hd.baseOff
	if hd.typ == packRefDelta {
		var ok bool
		if bp, boff, ok = r.o.find(hd.baseRef); !ok {
			r.o.mu.Lock()
			obj, err := r.o.s.EncodedObject(plumbing.AnyObject, hd.baseRef)
			r.o.mu.Unlock()
			if err != nil {
				return 0, nil, fmt.Errorf("delta base %s: %w", hd.baseRef, err)
			}
			data, err := r.read(hd.baseRef, obj.Type(), maxBaseBytes)
			return int(obj.Type()), slices.Clone(data), err
		}
	}
	typ, data, err := r.readAt(bp, boff, maxBaseBytes, depth+1)
	if err != nil {
		return 0, nil, err
	}
	if n := int64(len(data)); r.cached+n <= baseCacheSize {
		r.bases[baseKey{bp, boff}] = baseObj{typ, data}
		r.cached += n
	}
	return typ, data, nil
}

// stream opens blob h through go-git, for blobs too large to hold in memory.
// Only for single-goroutine use after any concurrent reading has stopped.
func (o *objects) stream(h plumbing.Hash) (io.ReadCloser, int64, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	obj, err := o.s.EncodedObject(plumbing.BlobObject, h)
	if err != nil {
		return nil, 0, err
	}
	rd, err := obj.Reader()
	if err != nil {
		return nil, 0, err
	}
	return rd, obj.Size(), nil
}

// fastStorer is a go-git storer whose object reads go through an objReader,
// so go-git code walking commits (merge-base) reads the mapped packs too.
type fastStorer struct {
	storer.EncodedObjectStorer
	r *objReader
}

// EncodedObject reads h through the objReader when a pack holds it.
func (s fastStorer) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	p, off, ok := s.r.o.find(h)
	if !ok {
		s.r.o.mu.Lock()
		defer s.r.o.mu.Unlock()
		return s.EncodedObjectStorer.EncodedObject(t, h)
	}
	typ, data, err := s.r.readAt(p, off, maxBaseBytes, 0)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", h, err)
	}
	if t != plumbing.AnyObject && plumbing.ObjectType(typ) != t {
		return nil, plumbing.ErrObjectNotFound
	}
	obj := &plumbing.MemoryObject{}
	obj.SetType(plumbing.ObjectType(typ))
	if _, err := obj.Write(data); err != nil {
		return nil, err
	}
	return obj, nil
}

// EncodedObjectSize sizes h through the objReader.
func (s fastStorer) EncodedObjectSize(h plumbing.Hash) (int64, error) { return s.r.size(h) }
