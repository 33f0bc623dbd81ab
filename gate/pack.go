package gate

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5/plumbing"
)

// A pack is one memory-mapped packfile with its version-2 index, read
// directly: looking up an object is a binary search in the index and its
// size is the entry header, with no system call per object. go-git opens the
// pack file again for every object it reads or sizes, which costs far more
// than a 100k-file tree walk may take.
type pack struct {
	idx, data []byte
	n         int // objects in the pack
	unmap     func()
}

// Pack entry types.
const (
	packCommit   = 1
	packTree     = 2
	packBlob     = 3
	packTag      = 4
	packOfsDelta = 6
	packRefDelta = 7
)

// maxDeltaDepth bounds delta chains (git itself stops at 4095).
const maxDeltaDepth = 4096

var errNotInPack = errors.New("object not in pack")

// openPack maps objects/pack/pack-<h>.{idx,pack} under gitDir.
func openPack(gitDir string, h plumbing.Hash) (*pack, error) {
	base := filepath.Join(gitDir, "objects", "pack", "pack-"+h.String())
	idx, unmapIdx, err := mapFile(base + ".idx")
	if err != nil {
		return nil, err
	}
	data, unmapData, err := mapFile(base + ".pack")
	if err != nil {
		unmapIdx()
		return nil, err
	}
	p := &pack{idx: idx, data: data, unmap: func() { unmapIdx(); unmapData() }}
	if err := p.check(); err != nil {
		p.unmap()
		return nil, fmt.Errorf("pack %s: %w", h, err)
	}
	return p, nil
}

// mapFile maps a whole file read-only.
func mapFile(name string) ([]byte, func(), error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if fi.Size() == 0 || int64(int(fi.Size())) != fi.Size() {
		return nil, nil, fmt.Errorf("map %s: unusable size %d", name, fi.Size())
	}
	return mmap(f, int(fi.Size()))
}

// check validates the headers and sizes the lookups rely on.
func (p *pack) check() error {
	if len(p.idx) < 8+256*4+40 || !bytes.Equal(p.idx[:4], []byte("\xfftOc")) || binary.BigEndian.Uint32(p.idx[4:]) != 2 {
		return errors.New("not a version 2 pack index")
	}
	p.n = int(binary.BigEndian.Uint32(p.idx[8+255*4:]))
	if p.n < 0 || len(p.idx) < 8+256*4+p.n*28+40 {
		return errors.New("truncated pack index")
	}
	if len(p.data) < 32 || !bytes.Equal(p.data[:4], []byte("PACK")) {
		return errors.New("not a packfile")
	}
	if v := binary.BigEndian.Uint32(p.data[4:]); v != 2 && v != 3 {
		return fmt.Errorf("pack version %d", v)
	}
	return nil
}

// offset finds h in the index.
func (p *pack) offset(h plumbing.Hash) (int64, bool) {
	i := p.position(h)
	if i < 0 {
		return 0, false
	}
	return p.offsetAt(i)
}

// bucket is the range of index positions whose hashes start with h[0].
func (p *pack) bucket(h plumbing.Hash) (lo, hi int) {
	fan := func(i int) int { return int(binary.BigEndian.Uint32(p.idx[8+i*4:])) }
	hi = fan(int(h[0]))
	if h[0] > 0 {
		lo = fan(int(h[0]) - 1)
	}
	if hi > p.n || lo > hi {
		return 0, 0
	}
	return lo, hi
}

// guess is where h should be in the index: hashes are uniform, so the
// fanout bucket of h[0] spans the next bytes evenly.
func (p *pack) guess(h plumbing.Hash) int {
	lo, hi := p.bucket(h)
	return lo + int(uint64(hi-lo)*uint64(binary.BigEndian.Uint16(h[1:3]))>>16)
}

// position returns the index position of h, or -1.
func (p *pack) position(h plumbing.Hash) int {
	lo, hi := p.bucket(h)
	names := p.idx[8+256*4:]
	key := binary.BigEndian.Uint64(h[:8])
	cmp := func(i int) int {
		// The first 8 bytes nearly always decide; compare them as a word.
		switch k := binary.BigEndian.Uint64(names[i*20:]); {
		case k < key:
			return -1
		case k > key:
			return 1
		}
		return bytes.Compare(names[i*20+8:i*20+20], h[8:])
	}
	// Walk from the guess: consecutive entries, a cache line or two, where
	// a binary search would touch a dozen scattered ones. Give up after a
	// few steps and search the bucket.
	if hi-lo > 16 {
		i := p.guess(h)
		c := cmp(i)
		for steps := 0; steps < 64 && c != 0; steps++ {
			if c < 0 && i+1 < hi {
				i++
			} else if c > 0 && i > lo {
				i--
			} else {
				break
			}
			next := cmp(i)
			if next != 0 && (next < 0) != (c < 0) {
				return -1 // passed where h would be
			}
			c = next
		}
		if c == 0 {
			return i
		}
	}
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		switch c := cmp(mid); {
		case c == 0:
			return mid
		case c < 0:
			lo = mid + 1
		default:
			hi = mid
		}
	}
	return -1
}

func (p *pack) offsetAt(i int) (int64, bool) {
	offs := p.idx[8+256*4+p.n*24:]
	o := binary.BigEndian.Uint32(offs[i*4:])
	if o&0x80000000 == 0 {
		return int64(o), true
	}
	large := offs[p.n*4:]
	j := int(o & 0x7fffffff)
	if len(large) < (j+1)*8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(large[j*8:])), true
}

// header decodes the entry at off: its type, its size (for deltas, of the
// delta data) and where its body starts; for deltas also the base.
type entryHeader struct {
	typ     int
	size    int64
	body    int64
	baseOff int64         // packOfsDelta
	baseRef plumbing.Hash // packRefDelta
}

func (p *pack) header(off int64) (entryHeader, error) {
	end := int64(len(p.data)) - 20
	if off < 12 || off >= end {
		return entryHeader{}, fmt.Errorf("entry offset %d outside pack", off)
	}
	pos := off
	c := p.data[pos]
	pos++
	h := entryHeader{typ: int(c>>4) & 7, size: int64(c & 15)}
	for shift := uint(4); c&0x80 != 0; shift += 7 {
		if pos >= end || shift > 56 {
			return entryHeader{}, fmt.Errorf("entry %d: bad size", off)
		}
		c = p.data[pos]
		pos++
		h.size |= int64(c&0x7f) << shift
	}
	switch h.typ {
	case packOfsDelta:
		if pos >= end {
			return entryHeader{}, fmt.Errorf("entry %d: truncated", off)
		}
		c = p.data[pos]
		pos++
		rel := int64(c & 0x7f)
		for c&0x80 != 0 {
			if pos >= end || rel > 1<<48 {
				return entryHeader{}, fmt.Errorf("entry %d: bad delta offset", off)
			}
			c = p.data[pos]
			pos++
			rel = (rel+1)<<7 | int64(c&0x7f)
		}
		if rel <= 0 || rel >= off {
			return entryHeader{}, fmt.Errorf("entry %d: bad delta offset", off)
		}
		h.baseOff = off - rel
	case packRefDelta:
		if pos+20 > end {
			return entryHeader{}, fmt.Errorf("entry %d: truncated", off)
		}
		copy(h.baseRef[:], p.data[pos:pos+20])
		pos += 20
	case packCommit, packTree, packBlob, packTag:
	default:
		return entryHeader{}, fmt.Errorf("entry %d: unknown type %d", off, h.typ)
	}
	h.body = pos
	return h, nil
}

// inflater reuses one decompressor across entries. Pack entries are zlib
// streams; their 2-byte header is skipped and the deflate data read
// directly, which spares the Adler-32 of data that git checks on its own.
type inflater struct {
	fr      io.ReadCloser
	src     bytes.Reader
	scratch []byte
}

// inflate decompresses the first n bytes of the zlib stream at data[at:]
// into a new slice.
func (z *inflater) inflate(data []byte, at int64, n int64) ([]byte, error) {
	return z.inflateInto(make([]byte, n), data, at)
}

// inflateScratch is inflate into the inflater's own buffer, valid until its
// next use: for objects the caller parses at once. Only a buffer of up to
// keepScratch bytes is kept; a larger object gets one of its own.
func (z *inflater) inflateScratch(data []byte, at int64, n int64) ([]byte, error) {
	if n > keepScratch {
		return z.inflate(data, at, n)
	}
	if int64(cap(z.scratch)) < n {
		z.scratch = make([]byte, n)
	}
	return z.inflateInto(z.scratch[:n], data, at)
}

func (z *inflater) inflateInto(out, data []byte, at int64) ([]byte, error) {
	if at+2 > int64(len(data)) || data[at]&0x0f != 8 || data[at+1]&0x20 != 0 || (uint16(data[at])<<8|uint16(data[at+1]))%31 != 0 {
		return nil, fmt.Errorf("entry body at %d is not a zlib stream", at)
	}
	z.src.Reset(data[at+2:])
	if z.fr == nil {
		z.fr = flate.NewReader(&z.src)
	} else if err := z.fr.(flate.Resetter).Reset(&z.src, nil); err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(z.fr, out); err != nil {
		return nil, err
	}
	return out, nil
}

// deltaSizes reads the two sizes that start a delta: base and result.
func deltaSizes(d []byte) (base, result int64, rest []byte, err error) {
	base, d, err = leb128(d)
	if err != nil {
		return 0, 0, nil, err
	}
	result, d, err = leb128(d)
	return base, result, d, err
}

func leb128(d []byte) (int64, []byte, error) {
	var v int64
	for i, shift := 0, uint(0); i < len(d) && shift < 63; i, shift = i+1, shift+7 {
		v |= int64(d[i]&0x7f) << shift
		if d[i]&0x80 == 0 {
			return v, d[i+1:], nil
		}
	}
	return 0, nil, errors.New("bad delta size")
}

// applyDelta builds the object a git delta describes from base.
func applyDelta(base, delta []byte, max int64) ([]byte, error) {
	baseSize, size, ops, err := deltaSizes(delta)
	if err != nil {
		return nil, err
	}
	if baseSize != int64(len(base)) {
		return nil, fmt.Errorf("delta base is %d bytes, want %d", len(base), baseSize)
	}
	if size > max {
		return nil, fmt.Errorf("object of %d bytes, more than %d", size, max)
	}
	out := make([]byte, 0, size)
	for len(ops) > 0 {
		op := ops[0]
		ops = ops[1:]
		switch {
		case op&0x80 != 0:
			var off, n uint64
			for i := range 7 {
				if op&(1<<i) == 0 {
					continue
				}
				if len(ops) == 0 {
					return nil, errors.New("truncated delta copy")
				}
				if i < 4 {
					off |= uint64(ops[0]) << (8 * i)
				} else {
					n |= uint64(ops[0]) << (8 * (i - 4))
				}
				ops = ops[1:]
			}
			if n == 0 {
				n = 0x10000
			}
			if off+n > uint64(len(base)) || int64(len(out))+int64(n) > size {
				return nil, errors.New("delta copy out of range")
			}
			out = append(out, base[off:off+n]...)
		case op != 0:
			if int(op) > len(ops) || int64(len(out))+int64(op) > size {
				return nil, errors.New("delta insert out of range")
			}
			out = append(out, ops[:op]...)
			ops = ops[op:]
		default:
			return nil, errors.New("delta opcode 0")
		}
	}
	if int64(len(out)) != size {
		return nil, fmt.Errorf("delta made %d bytes, want %d", len(out), size)
	}
	return out, nil
}
