package seccomp

import (
	"errors"
	"fmt"

	"golang.org/x/net/bpf"
)

// label names a position in a program under construction. The zero label
// means "the next instruction".
type label int

const fallThrough label = 0

// step is one instruction of a program under construction: either a fixed
// instruction or a conditional jump to labels.
type step struct {
	ins    bpf.Instruction // nil for a conditional jump
	cond   bpf.JumpTest    // JumpEqual or JumpBitsSet
	val    uint32
	jt, jf label
}

// program assembles classic BPF with symbolic forward jumps, so that the
// rules in Program read top to bottom without hand-counted skips.
type program struct {
	steps  []step
	labels map[label]int // label ⇒ index of the instruction it marks
	last   label
}

func newProgram() *program {
	return &program{labels: make(map[label]int)}
}

// newLabel returns a label to be placed later with mark.
func (p *program) newLabel() label {
	p.last++
	return p.last
}

// mark places l at the next instruction to be emitted.
func (p *program) mark(l label) {
	p.labels[l] = len(p.steps)
}

// emit appends a non-jump instruction.
func (p *program) emit(ins bpf.Instruction) {
	p.steps = append(p.steps, step{ins: ins})
}

// loadWord loads the 32-bit word of seccomp_data at off into A.
func (p *program) loadWord(off uint32) {
	p.emit(bpf.LoadAbsolute{Off: off, Size: 4})
}

// ret returns the constant seccomp action v.
func (p *program) ret(v uint32) {
	p.emit(bpf.RetConstant{Val: v})
}

// jump emits "if A <cond> val goto jt else goto jf".
func (p *program) jump(cond bpf.JumpTest, val uint32, jt, jf label) {
	p.steps = append(p.steps, step{cond: cond, val: val, jt: jt, jf: jf})
}

// errBackwardJump and errLongJump report a jump that classic BPF cannot
// encode (conditional jumps skip at most 255 instructions, forward only).
var (
	errBackwardJump = errors.New("backward or unplaced jump")
	errLongJump     = errors.New("jump longer than 255 instructions")
)

// assemble resolves labels and encodes the program.
func (p *program) assemble() ([]bpf.RawInstruction, error) {
	ins := make([]bpf.Instruction, len(p.steps))
	for i, s := range p.steps {
		if s.ins != nil {
			ins[i] = s.ins
			continue
		}
		jt, err := p.skip(i, s.jt)
		if err != nil {
			return nil, fmt.Errorf("instruction %d: %w", i, err)
		}
		jf, err := p.skip(i, s.jf)
		if err != nil {
			return nil, fmt.Errorf("instruction %d: %w", i, err)
		}
		ins[i] = bpf.JumpIf{Cond: s.cond, Val: s.val, SkipTrue: jt, SkipFalse: jf}
	}
	raw, err := bpf.Assemble(ins)
	if err != nil {
		return nil, fmt.Errorf("assemble BPF: %w", err)
	}
	return raw, nil
}

// skip returns how many instructions a jump at index i skips to reach l.
func (p *program) skip(i int, l label) (uint8, error) {
	if l == fallThrough {
		return 0, nil
	}
	at, ok := p.labels[l]
	if !ok || at <= i {
		return 0, fmt.Errorf("label %d: %w", l, errBackwardJump)
	}
	n := at - i - 1
	if n > 255 {
		return 0, fmt.Errorf("label %d: %w", l, errLongJump)
	}
	return uint8(n), nil
}
