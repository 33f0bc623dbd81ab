package seccomp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"runtime"
	"slices"
	"testing"

	"github.com/elastic/go-seccomp-bpf/arch"
)

// requiredDenied are the names issue 3 requires the filter to refuse.
var requiredDenied = []string{
	"ptrace", "process_vm_readv", "process_vm_writev",
	"keyctl", "add_key", "request_key",
	"mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree",
	"fsopen", "fsmount", "fsconfig", "fspick", "mount_setattr",
	"unshare", "setns", "clone", "clone3",
	"bpf", "perf_event_open", "userfaultfd",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
	"acct", "swapon", "swapoff", "reboot", "settimeofday", "clock_settime",
	"clock_adjtime", "adjtimex", "quotactl", "lookup_dcookie",
	"name_to_handle_at", "open_by_handle_at", "personality", "vhangup", "syslog",
	"ioctl",
}

// mustProgram returns the filter, skipping off amd64 where Program refuses.
func mustProgram(tb testing.TB) Filter {
	tb.Helper()
	if runtime.GOARCH != "amd64" {
		tb.Skipf("filter is x86_64 only; GOARCH=%s", runtime.GOARCH)
	}
	f, err := Program()
	if err != nil {
		tb.Fatalf("Program() error: %v", err)
	}
	return f
}

func TestProgramUnsupportedArch(t *testing.T) {
	if runtime.GOARCH == "amd64" {
		t.Skip("supported here")
	}
	if _, err := Program(); !errors.Is(err, ErrUnsupportedArch) {
		t.Fatalf("Program() error = %v, want %v", err, ErrUnsupportedArch)
	}
}

func TestProgramDeterministic(t *testing.T) {
	a, b := mustProgram(t), mustProgram(t)
	if !bytes.Equal(a.Bytes, b.Bytes) || a.SHA256 != b.SHA256 || !slices.Equal(a.Denied, b.Denied) {
		t.Fatalf("Program() differs between calls: %s vs %s", a.SHA256, b.SHA256)
	}
	// Fresh slices: a caller's edit must not leak into the next call.
	a.Bytes[0] ^= 0xff
	a.Denied[0] = "mutated"
	if c := mustProgram(t); !bytes.Equal(c.Bytes, b.Bytes) || !slices.Equal(c.Denied, b.Denied) {
		t.Fatal("Program() returned shared slices")
	}
}

func TestProgramShape(t *testing.T) {
	f := mustProgram(t)
	if len(f.Bytes) == 0 || len(f.Bytes)%8 != 0 {
		t.Fatalf("len(Bytes) = %d, want a positive multiple of 8", len(f.Bytes))
	}
	if n := len(f.Bytes) / 8; n > 4096 { // BPF_MAXINSNS
		t.Fatalf("program has %d instructions, kernel maximum is 4096", n)
	}
	sum := sha256.Sum256(f.Bytes)
	if got, want := f.SHA256, hex.EncodeToString(sum[:]); got != want {
		t.Fatalf("SHA256 = %s, want %s", got, want)
	}
	if !slices.IsSorted(f.Denied) {
		t.Errorf("Denied not sorted: %v", f.Denied)
	}
	if c := slices.Compact(slices.Clone(f.Denied)); len(c) != len(f.Denied) {
		t.Errorf("Denied has duplicates: %v", f.Denied)
	}
	for _, name := range requiredDenied {
		if !slices.Contains(f.Denied, name) {
			t.Errorf("Denied lacks %q", name)
		}
	}
	t.Logf("%d instructions, sha256 %s", len(f.Bytes)/8, f.SHA256)
}

// TestProgramDecisions runs the filter bytes through an interpreter for
// the argument edge cases that the effect tests cannot all reach.
func TestProgramDecisions(t *testing.T) {
	f := mustProgram(t)
	x := arch.X86_64
	nr := func(name string) uint32 {
		n, ok := x.SyscallNames[name]
		if !ok {
			t.Fatalf("no syscall %q", name)
		}
		return uint32(n)
	}
	const (
		archI386    = 0x40000003
		archAARCH64 = 0xc00000b7
		sigchld     = 17
		eperm       = retErrno | errnoEPERM
		enosys      = retErrno | errnoENOSYS
		goThread    = 0x50f00 // CLONE_VM|FS|FILES|SIGHAND|SYSVSEM|THREAD, as the Go runtime uses
	)
	type tc struct {
		name string
		data seccompData
		want uint32
	}
	tests := []tc{
		{"getpid allowed", seccompData{nr: nr("getpid"), arch: uint32(x.ID)}, retAllow},
		{"read allowed", seccompData{nr: nr("read"), arch: uint32(x.ID)}, retAllow},
		{"openat allowed", seccompData{nr: nr("openat"), arch: uint32(x.ID)}, retAllow},
		{"i386 getpid killed", seccompData{nr: 20, arch: archI386}, retKillProcess},
		{"i386 nr of x86_64 getpid killed", seccompData{nr: nr("getpid"), arch: archI386}, retKillProcess},
		{"aarch64 killed", seccompData{nr: 172, arch: archAARCH64}, retKillProcess},
		{"x32 getpid killed", seccompData{nr: 39 | x32SyscallBit, arch: uint32(x.ID)}, retKillProcess},
		{"x32 ptrace killed", seccompData{nr: 521 | x32SyscallBit, arch: uint32(x.ID)}, retKillProcess},
		{"clone3 ENOSYS", seccompData{nr: nr("clone3"), arch: uint32(x.ID)}, enosys},
		{"fork via clone allowed", seccompData{nr: nr("clone"), arch: uint32(x.ID), args: [6]uint64{sigchld}}, retAllow},
		{"thread via clone allowed", seccompData{nr: nr("clone"), arch: uint32(x.ID), args: [6]uint64{goThread}}, retAllow},
		{"clone exit signal 0x80 not read as CLONE_NEWTIME", seccompData{nr: nr("clone"), arch: uint32(x.ID), args: [6]uint64{0x80}}, retAllow},
		{"clone high word ignored", seccompData{nr: nr("clone"), arch: uint32(x.ID), args: [6]uint64{0xffffffff_00000000 | sigchld}}, retAllow},
		{"personality 0 allowed", seccompData{nr: nr("personality"), arch: uint32(x.ID)}, retAllow},
		{"personality query allowed", seccompData{nr: nr("personality"), arch: uint32(x.ID), args: [6]uint64{0xffffffff}}, retAllow},
		{"personality -1 is the query", seccompData{nr: nr("personality"), arch: uint32(x.ID), args: [6]uint64{^uint64(0)}}, retAllow},
		{"personality READ_IMPLIES_EXEC denied", seccompData{nr: nr("personality"), arch: uint32(x.ID), args: [6]uint64{0x400000}}, eperm},
		{"personality ADDR_NO_RANDOMIZE denied", seccompData{nr: nr("personality"), arch: uint32(x.ID), args: [6]uint64{0x0040000}}, eperm},
		{"personality hi|READ_IMPLIES_EXEC denied", seccompData{nr: nr("personality"), arch: uint32(x.ID), args: [6]uint64{1<<32 | 0x400000}}, eperm},
		{"ioctl TIOCGWINSZ allowed", seccompData{nr: nr("ioctl"), arch: uint32(x.ID), args: [6]uint64{0, 0x5413}}, retAllow},
		{"ioctl TIOCSTI in high word only allowed", seccompData{nr: nr("ioctl"), arch: uint32(x.ID), args: [6]uint64{0, ioctlTIOCSTI << 32}}, retAllow},
		{"ioctl TIOCSTI on fd arg only allowed", seccompData{nr: nr("ioctl"), arch: uint32(x.ID), args: [6]uint64{ioctlTIOCSTI, 0x5413}}, retAllow},
	}
	for _, cmd := range []uint64{ioctlTIOCSTI, ioctlTIOCLINUX} {
		for _, hi := range []uint64{0, 1 << 32, 0xffffffff_00000000} {
			tests = append(tests, tc{"ioctl denied", seccompData{nr: nr("ioctl"), arch: uint32(x.ID), args: [6]uint64{3, hi | cmd}}, eperm})
		}
	}
	for _, flag := range []uint64{cloneNewNS, cloneNewUTS, cloneNewIPC, cloneNewUser, cloneNewPID, cloneNewNet, cloneNewCgroup} {
		tests = append(tests,
			tc{"clone namespace denied", seccompData{nr: nr("clone"), arch: uint32(x.ID), args: [6]uint64{flag | sigchld}}, eperm},
			tc{"clone namespace with high word denied", seccompData{nr: nr("clone"), arch: uint32(x.ID), args: [6]uint64{1<<32 | flag}}, eperm})
	}
	for _, name := range deniedEPERM {
		tests = append(tests, tc{name + " denied", seccompData{nr: nr(name), arch: uint32(x.ID), args: [6]uint64{1, 2, 3, 4, 5, 6}}, eperm})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := run(t, f.Bytes, tt.data); got != tt.want {
				t.Errorf("filter(nr=%d arch=%#x args=%#x) = %#x, want %#x", tt.data.nr, tt.data.arch, tt.data.args, got, tt.want)
			}
		})
	}
}

// TestProgramAllowsEverythingElse checks the denylist's shape: of all
// x86_64 syscalls, exactly the listed ones are refused for plain arguments.
func TestProgramAllowsEverythingElse(t *testing.T) {
	f := mustProgram(t)
	for name, n := range arch.X86_64.SyscallNames {
		got := run(t, f.Bytes, seccompData{nr: uint32(n), arch: uint32(arch.X86_64.ID), args: [6]uint64{0x11}})
		denied := slices.Contains(deniedEPERM, name) || name == sysClone3 || name == sysPersonality
		if denied == (got == retAllow) {
			t.Errorf("filter(%s) = %#x, denied by rule = %v", name, got, denied)
		}
	}
}

func BenchmarkProgram(b *testing.B) {
	mustProgram(b)
	for b.Loop() {
		if _, err := Program(); err != nil {
			b.Fatal(err)
		}
	}
}
