package seccomp

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"slices"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
)

// Filter is an assembled seccomp-BPF program together with the facts a
// receipt records about it.
type Filter struct {
	// Bytes is the program as a raw struct sock_filter array in native
	// byte order (8 bytes per instruction): what bwrap --seccomp FD reads.
	Bytes []byte
	// SHA256 is the lowercase hex SHA-256 of Bytes, for the receipt.
	SHA256 string
	// Denied lists, sorted, every syscall name the filter can refuse.
	// clone, ioctl and personality are refused only for some arguments and
	// clone3 fails with ENOSYS rather than EPERM; see the package
	// documentation. Foreign-ABI calls, which are killed, are not listed.
	Denied []string
}

// ErrUnsupportedArch is returned by Program on any GOARCH but amd64.
var ErrUnsupportedArch = errors.New("unsupported architecture")

// errUnknownSyscall reports a rule naming a syscall missing from the table.
var errUnknownSyscall = errors.New("unknown syscall")

// Program assembles the sandbox's seccomp filter for x86_64. The result is
// the same on every call; each call returns fresh slices.
func Program() (Filter, error) {
	if runtime.GOARCH != "amd64" {
		return Filter{}, fmt.Errorf("seccomp filter for GOARCH %s: %w", runtime.GOARCH, ErrUnsupportedArch)
	}
	return build(arch.X86_64)
}

// build assembles the filter against the syscall table of a.
func build(a *arch.Info) (Filter, error) {
	nr := func(name string) (uint32, error) {
		n, ok := a.SyscallNames[name]
		if !ok {
			return 0, fmt.Errorf("syscall %q on %s: %w", name, a.Name, errUnknownSyscall)
		}
		return uint32(n), nil
	}

	denied := slices.Sorted(slices.Values(deniedEPERM))
	if d := slices.Compact(slices.Clone(denied)); len(d) != len(denied) {
		return Filter{}, fmt.Errorf("seccomp rules: duplicate syscall in %v", denied)
	}

	p := newProgram()
	var (
		kill    = p.newLabel()
		eperm   = p.newLabel()
		enosys  = p.newLabel()
		allow   = p.newLabel()
		clone   = p.newLabel()
		ioctl   = p.newLabel()
		persona = p.newLabel()
	)

	// Foreign ABIs: another audit arch (i386 via int $0x80), or x32.
	p.loadWord(offArch)
	p.jump(bpf.JumpEqual, uint32(a.ID), fallThrough, kill)
	p.loadWord(offNr)
	p.jump(bpf.JumpBitsSet, x32SyscallBit, kill, fallThrough)

	// Unconditional denials, in name order so the bytes are stable.
	for _, name := range denied {
		n, err := nr(name)
		if err != nil {
			return Filter{}, err
		}
		p.jump(bpf.JumpEqual, n, eperm, fallThrough)
	}
	for _, r := range []struct {
		name string
		to   label
	}{
		{sysClone3, enosys},
		{sysClone, clone},
		{sysIoctl, ioctl},
		{sysPersonality, persona},
	} {
		n, err := nr(r.name)
		if err != nil {
			return Filter{}, err
		}
		p.jump(bpf.JumpEqual, n, r.to, fallThrough)
	}
	p.ret(retAllow)

	// clone(flags, ...): namespace flags in the low word of arg0.
	p.mark(clone)
	p.loadWord(argLow(0))
	p.jump(bpf.JumpBitsSet, cloneNamespaceFlags, eperm, allow)

	// ioctl(fd, cmd, ...): the kernel uses only the low 32 bits of cmd.
	p.mark(ioctl)
	p.loadWord(argLow(1))
	p.jump(bpf.JumpEqual, ioctlTIOCSTI, eperm, fallThrough)
	p.jump(bpf.JumpEqual, ioctlTIOCLINUX, eperm, allow)

	// personality(persona): only PER_LINUX and the 0xffffffff query.
	p.mark(persona)
	p.loadWord(argLow(0))
	p.jump(bpf.JumpEqual, personaLinux, allow, fallThrough)
	p.jump(bpf.JumpEqual, personaQuery, allow, eperm)

	p.mark(allow)
	p.ret(retAllow)
	p.mark(eperm)
	p.ret(retErrno | errnoEPERM)
	p.mark(enosys)
	p.ret(retErrno | errnoENOSYS)
	p.mark(kill)
	p.ret(retKillProcess)

	raw, err := p.assemble()
	if err != nil {
		return Filter{}, fmt.Errorf("seccomp filter: %w", err)
	}
	b := encode(raw)
	sum := sha256.Sum256(b)

	names := append(denied, sysClone, sysClone3, sysIoctl, sysPersonality)
	slices.Sort(names)
	return Filter{Bytes: b, SHA256: hex.EncodeToString(sum[:]), Denied: names}, nil
}

// argLow is the seccomp_data offset of the low 32 bits of argument i on a
// little-endian machine.
func argLow(i uint32) uint32 {
	return offArgs + 8*i
}

// encode lays raw out as struct sock_filter { u16 code; u8 jt; u8 jf; u32 k }
// in native byte order.
func encode(raw []bpf.RawInstruction) []byte {
	b := make([]byte, 0, 8*len(raw))
	for _, r := range raw {
		b = binary.NativeEndian.AppendUint16(b, r.Op)
		b = append(b, r.Jt, r.Jf)
		b = binary.NativeEndian.AppendUint32(b, r.K)
	}
	return b
}
