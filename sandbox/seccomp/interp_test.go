package seccomp

import (
	"encoding/binary"
	"testing"
)

// seccompData mirrors struct seccomp_data.
type seccompData struct {
	nr   uint32
	arch uint32
	args [6]uint64
}

// word returns the 32-bit word at off, laid out as on little-endian x86_64.
func (d seccompData) word(tb testing.TB, off uint32) uint32 {
	tb.Helper()
	switch {
	case off == offNr:
		return d.nr
	case off == offArch:
		return d.arch
	case off >= offArgs && off < offArgs+48 && off%4 == 0:
		a := d.args[(off-offArgs)/8]
		if (off-offArgs)%8 == 0 {
			return uint32(a)
		}
		return uint32(a >> 32)
	}
	tb.Fatalf("load of seccomp_data offset %d", off)
	return 0
}

// run interprets the raw sock_filter bytes the way the kernel does for the
// handful of opcodes a seccomp filter of this package uses, and returns the
// action. It decodes Bytes itself, so it also checks the encoding.
func run(tb testing.TB, prog []byte, d seccompData) uint32 {
	tb.Helper()
	const (
		ldWAbs  = 0x20 // BPF_LD|BPF_W|BPF_ABS
		jmpJA   = 0x05 // BPF_JMP|BPF_JA
		jmpJEQ  = 0x15 // BPF_JMP|BPF_JEQ|BPF_K
		jmpJSET = 0x45 // BPF_JMP|BPF_JSET|BPF_K
		retK    = 0x06 // BPF_RET|BPF_K
	)
	var a uint32
	for pc := 0; pc < len(prog)/8; pc++ {
		ins := prog[8*pc : 8*pc+8]
		op := binary.NativeEndian.Uint16(ins[0:])
		jt, jf := int(ins[2]), int(ins[3])
		k := binary.NativeEndian.Uint32(ins[4:])
		switch op {
		case ldWAbs:
			a = d.word(tb, k)
		case jmpJA:
			pc += int(k)
		case jmpJEQ:
			if a == k {
				pc += jt
			} else {
				pc += jf
			}
		case jmpJSET:
			if a&k != 0 {
				pc += jt
			} else {
				pc += jf
			}
		case retK:
			return k
		default:
			tb.Fatalf("pc %d: unexpected opcode %#x", pc, op)
		}
	}
	tb.Fatalf("program ran off its end")
	return 0
}
