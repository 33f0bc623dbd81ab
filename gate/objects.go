package gate

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// Bounds on what objects reads into memory.
const (
	// maxBaseBytes bounds one delta base while materializing, where blobs
	// of up to maxInMemoryBlob bytes are rebuilt from their deltas.
	maxBaseBytes = 512 << 20
	// decideBaseBytes bounds one delta base while deciding, where only
	// trees (head's at most maxHeadTree bytes), symlink targets, the
	// recipe and commits are read.
	decideBaseBytes = 32 << 20
	// maxCommitBytes bounds a commit read while resolving revisions and
	// walking to the merge-base.
	maxCommitBytes = 16 << 20
	// baseCacheSize is the delta-base cache of the reader of the calling
	// goroutine; prefetchCacheSize that of each prefetcher.
	baseCacheSize     = 32 << 20
	prefetchCacheSize = 4 << 20
	// keepScratch is the largest inflate buffer a reader keeps between
	// objects; larger objects get a buffer of their own that is released
	// with them.
	keepScratch = 1 << 20
)

// objects reads git objects for one call: from the repository's packs,
// mapped into memory, and its loose objects when it can, and through
// go-git's storer for anything else (alternates, storers that are not on
// disk). It is shared by goroutines; each reads through its own objReader.
// It lives for one call, whose ctx it honours while resolving delta chains.
type objects struct {
	ctx   context.Context
	s     storer.EncodedObjectStorer
	mu    sync.Mutex // go-git's storer is not safe for concurrent use
	packs []*pack
	dir   string // the git directory holding objects/, "" when not on disk
}

// objInfo is what an object header says: its type and size.
type objInfo struct {
	typ  plumbing.ObjectType
	size int64
}

// objReader is one goroutine's reader: its own inflaters, delta bases and
// memos.
type objReader struct {
	o       *objects
	z       inflater
	maxBase int64 // the largest delta base it rebuilds
	bases   baseCache
	types   map[baseKey]plumbing.ObjectType // delta entries already followed to their base
	chain   []baseKey                       // scratch for typeAt
	infos   map[plumbing.Hash]objInfo       // objects outside the packs already sized
	lz      io.ReadCloser                   // zlib reader for loose objects
	lbuf    *bufio.Reader
	pos     []int   // scratch for sizeAll
	offs    []int64 // scratch for sizeAll
	sink    byte    // keeps sizeAll's warming loads
	applied int     // deltas applied, for tests
}

func (o *objects) reader(maxBase, cache int64) *objReader {
	return &objReader{o: o, maxBase: maxBase, bases: newBaseCache(cache)}
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
func openObjects(ctx context.Context, s storer.EncodedObjectStorer) *objects {
	o := &objects{ctx: ctx, s: s}
	fsys, ok := s.(interface{ Filesystem() billy.Filesystem })
	if !ok {
		return o
	}
	o.dir = fsys.Filesystem().Root()
	lister, ok := s.(interface {
		ObjectPacks() ([]plumbing.Hash, error)
	})
	if !ok {
		return o
	}
	hashes, err := lister.ObjectPacks()
	if err != nil {
		return o
	}
	for _, h := range hashes {
		if p, err := openPack(o.dir, h); err == nil {
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

// errTooLarge marks an object refused for its size before it was read.
var errTooLarge = errors.New("object too large")

// stat returns the type and size of object h from its header alone.
// Objects outside the packs are sized once per reader.
func (r *objReader) stat(h plumbing.Hash) (objInfo, error) {
	if p, off, ok := r.o.find(h); ok {
		info, err := r.statAt(p, off)
		if err != nil {
			return objInfo{}, fmt.Errorf("header of %s: %w", h, err)
		}
		return info, nil
	}
	if info, ok := r.infos[h]; ok {
		return info, nil
	}
	info, _, found, err := r.loose(h, plumbing.AnyObject, 0, false)
	if err != nil {
		return objInfo{}, fmt.Errorf("header of %s: %w", h, err)
	}
	if !found {
		// Alternates and storers not on disk: go-git reads the object.
		r.o.mu.Lock()
		obj, err := r.o.s.EncodedObject(plumbing.AnyObject, h)
		r.o.mu.Unlock()
		if err != nil {
			return objInfo{}, fmt.Errorf("header of %s: %w", h, err)
		}
		info = objInfo{obj.Type(), obj.Size()}
	}
	if r.infos == nil {
		r.infos = map[plumbing.Hash]objInfo{}
	}
	r.infos[h] = info
	return info, nil
}

// loose reads the loose object h of the repository: its header, and with
// body its content, which must be of type typ (any when AnyObject) and at
// most max bytes. found is false when the repository has no such loose
// object. The file is closed before loose returns.
func (r *objReader) loose(h plumbing.Hash, typ plumbing.ObjectType, max int64, body bool) (info objInfo, data []byte, found bool, err error) {
	if r.o.dir == "" {
		return objInfo{}, nil, false, nil
	}
	hex := h.String()
	f, err := os.Open(filepath.Join(r.o.dir, "objects", hex[:2], hex[2:]))
	if errors.Is(err, fs.ErrNotExist) {
		return objInfo{}, nil, false, nil
	}
	if err != nil {
		return objInfo{}, nil, false, err
	}
	defer f.Close()
	if r.lbuf == nil {
		r.lbuf = bufio.NewReaderSize(f, 4096)
	} else {
		r.lbuf.Reset(f)
	}
	if r.lz == nil {
		r.lz, err = zlib.NewReader(r.lbuf)
	} else {
		err = r.lz.(zlib.Resetter).Reset(r.lbuf, nil)
	}
	if err != nil {
		return objInfo{}, nil, true, fmt.Errorf("loose object: %w", err)
	}
	// The header is "<type> <size>\x00"; a read may return body bytes too.
	var hdr [64]byte
	n, nul := 0, -1
	for nul < 0 {
		if n == len(hdr) {
			return objInfo{}, nil, true, errors.New("loose object: header too long")
		}
		m, err := r.lz.Read(hdr[n:])
		n += m
		nul = bytes.IndexByte(hdr[:n], 0)
		if err != nil && nul < 0 {
			return objInfo{}, nil, true, fmt.Errorf("loose object header: %w", noEOF(err))
		}
	}
	name, size, ok := bytes.Cut(hdr[:nul], []byte{' '})
	t, terr := plumbing.ParseObjectType(string(name))
	sz, serr := strconv.ParseInt(string(size), 10, 64)
	if !ok || terr != nil || serr != nil || sz < 0 || t == plumbing.OFSDeltaObject || t == plumbing.REFDeltaObject {
		return objInfo{}, nil, true, fmt.Errorf("loose object: bad header %q", hdr[:nul])
	}
	info = objInfo{t, sz}
	if !body {
		return info, nil, true, nil
	}
	if typ != plumbing.AnyObject && t != typ {
		return info, nil, true, fmt.Errorf("%w (a %s, want a %s)", plumbing.ErrObjectNotFound, t, typ)
	}
	if sz > max {
		return info, nil, true, fmt.Errorf("%w: %d bytes, more than %d", errTooLarge, sz, max)
	}
	rest := hdr[nul+1 : n]
	if int64(len(rest)) > sz {
		return info, nil, true, errors.New("loose object: longer than its header says")
	}
	data = make([]byte, sz)
	k := copy(data, rest)
	if _, err := io.ReadFull(r.lz, data[k:]); err != nil {
		return info, nil, true, fmt.Errorf("loose object: %w", noEOF(err))
	}
	return info, data, true, nil
}

// noEOF turns the EOF of a stream that ended early into ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// sizeNotBlob is the size sizeAll records for an entry whose object is not
// a blob although its mode says it is.
const sizeNotBlob = -2

// sizeAll sets the size of every blob and symlink entry of es that a pack
// holds, leaving -1 for the others and sizeNotBlob for objects of another
// type. It works in stages, each a loop of independent loads (index,
// offset table, entry headers), so the CPU has many cache misses in flight
// at once instead of one after another.
func (r *objReader) sizeAll(es []entry) {
	need := func(e entry) bool { return e.size == -1 && e.mode != filemode.Dir && e.mode != filemode.Submodule }
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
				if info, err := r.statAt(p, r.offs[i]); err == nil {
					es[i].size = info.size
					if info.typ != plumbing.BlobObject {
						es[i].size = sizeNotBlob
					}
				}
			}
		}
		r.sink ^= sink
	}
}

// statAt reads the type and size of the entry at off from its header; for
// a delta the size starts its data and the type is its base's.
func (r *objReader) statAt(p *pack, off int64) (objInfo, error) {
	hd, err := p.header(off)
	if err != nil {
		return objInfo{}, err
	}
	if hd.typ != packOfsDelta && hd.typ != packRefDelta {
		return objInfo{plumbing.ObjectType(hd.typ), hd.size}, nil
	}
	_, size, err := r.deltaSizes(p, hd)
	if err != nil {
		return objInfo{}, err
	}
	t, err := r.typeAt(p, off, hd)
	return objInfo{t, size}, err
}

// deltaSizes inflates the start of the delta entry hd: the sizes of its
// base and of its result.
func (r *objReader) deltaSizes(p *pack, hd entryHeader) (base, result int64, err error) {
	var buf [20]byte
	prefix, err := r.z.inflateInto(buf[:min(hd.size, 20)], p.data, hd.body)
	if err != nil {
		return 0, 0, err
	}
	base, result, _, err = deltaSizes(prefix)
	return base, result, err
}

// typeAt follows the delta entry hd at off to the object its chain starts
// from, whose type the whole chain has. Entries it passes are remembered,
// so a pack's chains are followed once per reader.
func (r *objReader) typeAt(p *pack, off int64, hd entryHeader) (plumbing.ObjectType, error) {
	chain := r.chain[:0]
	defer func() { r.chain = chain[:0] }()
	remember := func(t plumbing.ObjectType) plumbing.ObjectType {
		if r.types == nil {
			r.types = map[baseKey]plumbing.ObjectType{}
		}
		for _, k := range chain {
			r.types[k] = t
		}
		return t
	}
	for {
		if hd.typ != packOfsDelta && hd.typ != packRefDelta {
			return remember(plumbing.ObjectType(hd.typ)), nil
		}
		k := baseKey{p, off}
		if t, ok := r.types[k]; ok {
			return remember(t), nil
		}
		if len(chain) >= maxDeltaDepth {
			return 0, fmt.Errorf("delta chain longer than %d", maxDeltaDepth)
		}
		chain = append(chain, k)
		if hd.typ == packOfsDelta {
			off = hd.baseOff
		} else {
			var ok bool
			if p, off, ok = r.o.find(hd.baseRef); !ok {
				info, err := r.stat(hd.baseRef)
				if err != nil {
					return 0, fmt.Errorf("delta base %s: %w", hd.baseRef, err)
				}
				return remember(info.typ), nil
			}
		}
		var err error
		if hd, err = p.header(off); err != nil {
			return 0, err
		}
	}
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
	if _, data, found, err := r.loose(h, typ, max, true); found || err != nil {
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", h, err)
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
		return nil, fmt.Errorf("read %s: %w: %d bytes, more than %d", h, errTooLarge, obj.Size(), max)
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

// readAt resolves the pack entry at off, applying deltas. Sizes are checked
// from headers before anything is inflated: the object against max, a
// delta's base against the reader's maxBase.
func (r *objReader) readAt(p *pack, off, max int64, depth int) (int, []byte, error) {
	if b, ok := r.bases.get(baseKey{p, off}); ok {
		if int64(len(b.data)) > max {
			return 0, nil, fmt.Errorf("%w: %d bytes, more than %d", errTooLarge, len(b.data), max)
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
			return 0, nil, fmt.Errorf("%w: %d bytes, more than %d", errTooLarge, hd.size, max)
		}
		if depth == 0 { // not a delta base: nothing keeps it
			data, err := r.z.inflateScratch(p.data, hd.body, hd.size)
			return hd.typ, data, err
		}
		data, err := r.z.inflate(p.data, hd.body, hd.size)
		return hd.typ, data, err
	}
	if err := r.o.ctx.Err(); err != nil {
		return 0, nil, err
	}
	if depth >= maxDeltaDepth {
		return 0, nil, fmt.Errorf("delta chain longer than %d", maxDeltaDepth)
	}
	baseSize, size, err := r.deltaSizes(p, hd)
	switch {
	case err != nil:
		return 0, nil, err
	case size > max:
		return 0, nil, fmt.Errorf("%w: %d bytes, more than %d", errTooLarge, size, max)
	case baseSize > r.maxBase:
		return 0, nil, fmt.Errorf("%w: delta base of %d bytes, more than %d", errTooLarge, baseSize, r.maxBase)
	case hd.size > 2*max+1<<16:
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
	r.applied++
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
			info, err := r.stat(hd.baseRef)
			if err != nil {
				return 0, nil, fmt.Errorf("delta base %s: %w", hd.baseRef, err)
			}
			data, err := r.read(hd.baseRef, info.typ, r.maxBase)
			return int(info.typ), slices.Clone(data), err
		}
	}
	typ, data, err := r.readAt(bp, boff, r.maxBase, depth+1)
	if err != nil {
		return 0, nil, err
	}
	r.bases.add(baseKey{bp, boff}, baseObj{typ, data})
	return typ, data, nil
}

// baseCache keeps the most recently used delta bases, up to max bytes.
type baseCache struct {
	max, used int64
	m         map[baseKey]*list.Element
	lru       list.List // of *cachedBase, most recent first
}

type cachedBase struct {
	k baseKey
	b baseObj
}

func newBaseCache(max int64) baseCache { return baseCache{max: max, m: map[baseKey]*list.Element{}} }

func (c *baseCache) get(k baseKey) (baseObj, bool) {
	el, ok := c.m[k]
	if !ok {
		return baseObj{}, false
	}
	c.lru.MoveToFront(el)
	return el.Value.(*cachedBase).b, true
}

// add keeps b, evicting the least recently used bases to make room; a base
// larger than the whole cache is not kept.
func (c *baseCache) add(k baseKey, b baseObj) {
	n := int64(len(b.data))
	if _, ok := c.m[k]; ok || n > c.max {
		return
	}
	for c.used+n > c.max {
		old := c.lru.Remove(c.lru.Back()).(*cachedBase)
		delete(c.m, old.k)
		c.used -= int64(len(old.b.data))
	}
	c.m[k] = c.lru.PushFront(&cachedBase{k, b})
	c.used += n
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
// so go-git code walking commits (merge-base) reads the mapped packs and
// loose objects with bounded memory, and stops when the call's ctx is done.
type fastStorer struct {
	storer.EncodedObjectStorer
	r *objReader
}

// EncodedObject reads h, at most maxCommitBytes of it, through the objReader.
func (s fastStorer) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	if err := s.r.o.ctx.Err(); err != nil {
		return nil, err
	}
	var (
		typ  plumbing.ObjectType
		data []byte
	)
	if p, off, ok := s.r.o.find(h); ok {
		pt, d, err := s.r.readAt(p, off, maxCommitBytes, 0)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", h, err)
		}
		typ, data = plumbing.ObjectType(pt), d
	} else {
		info, d, found, err := s.r.loose(h, plumbing.AnyObject, maxCommitBytes, true)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", h, err)
		}
		if !found {
			s.r.o.mu.Lock()
			defer s.r.o.mu.Unlock()
			return s.EncodedObjectStorer.EncodedObject(t, h)
		}
		typ, data = info.typ, d
	}
	if t != plumbing.AnyObject && typ != t {
		return nil, plumbing.ErrObjectNotFound
	}
	obj := &plumbing.MemoryObject{}
	obj.SetType(typ)
	if _, err := obj.Write(data); err != nil {
		return nil, err
	}
	return obj, nil
}

// EncodedObjectSize sizes h through the objReader.
func (s fastStorer) EncodedObjectSize(h plumbing.Hash) (int64, error) {
	info, err := s.r.stat(h)
	return info.size, err
}
