package seccomp

import (
	"runtime"
	"testing"

	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/sys/unix"
)

// TestConstantsMatchUAPI checks the hand-written UAPI values and the
// syscall table used by Program against golang.org/x/sys/unix, an
// independent transcription of the kernel headers.
func TestConstantsMatchUAPI(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("x/sys syscall numbers here are not x86_64's")
	}
	consts := []struct {
		name      string
		got, want uint64
	}{
		{"SECCOMP_RET_KILL_PROCESS", retKillProcess, unix.SECCOMP_RET_KILL_PROCESS},
		{"SECCOMP_RET_ERRNO", retErrno, unix.SECCOMP_RET_ERRNO},
		{"SECCOMP_RET_ALLOW", retAllow, unix.SECCOMP_RET_ALLOW},
		{"EPERM", errnoEPERM, uint64(unix.EPERM)},
		{"ENOSYS", errnoENOSYS, uint64(unix.ENOSYS)},
		{"AUDIT_ARCH_X86_64", uint64(arch.X86_64.ID), unix.AUDIT_ARCH_X86_64},
		{"CLONE_NEWTIME", cloneNewTime, unix.CLONE_NEWTIME},
		{"CLONE_NEWNS", cloneNewNS, unix.CLONE_NEWNS},
		{"CLONE_NEWCGROUP", cloneNewCgroup, unix.CLONE_NEWCGROUP},
		{"CLONE_NEWUTS", cloneNewUTS, unix.CLONE_NEWUTS},
		{"CLONE_NEWIPC", cloneNewIPC, unix.CLONE_NEWIPC},
		{"CLONE_NEWUSER", cloneNewUser, unix.CLONE_NEWUSER},
		{"CLONE_NEWPID", cloneNewPID, unix.CLONE_NEWPID},
		{"CLONE_NEWNET", cloneNewNet, unix.CLONE_NEWNET},
		{"TIOCSTI", ioctlTIOCSTI, unix.TIOCSTI},
		{"TIOCLINUX", ioctlTIOCLINUX, unix.TIOCLINUX},
	}
	for _, c := range consts {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}

	nrs := map[string]int{
		"ptrace": unix.SYS_PTRACE, "keyctl": unix.SYS_KEYCTL, "mount": unix.SYS_MOUNT,
		"unshare": unix.SYS_UNSHARE, "setns": unix.SYS_SETNS, "bpf": unix.SYS_BPF,
		"userfaultfd": unix.SYS_USERFAULTFD, "io_uring_setup": unix.SYS_IO_URING_SETUP,
		"io_uring_enter": unix.SYS_IO_URING_ENTER, "io_uring_register": unix.SYS_IO_URING_REGISTER,
		"open_tree": unix.SYS_OPEN_TREE, "move_mount": unix.SYS_MOVE_MOUNT,
		"fsopen": unix.SYS_FSOPEN, "fsmount": unix.SYS_FSMOUNT, "fsconfig": unix.SYS_FSCONFIG,
		"fspick": unix.SYS_FSPICK, "mount_setattr": unix.SYS_MOUNT_SETATTR,
		"process_vm_readv": unix.SYS_PROCESS_VM_READV, "process_vm_writev": unix.SYS_PROCESS_VM_WRITEV,
		"perf_event_open": unix.SYS_PERF_EVENT_OPEN, "kexec_file_load": unix.SYS_KEXEC_FILE_LOAD,
		"finit_module": unix.SYS_FINIT_MODULE, "open_by_handle_at": unix.SYS_OPEN_BY_HANDLE_AT,
		"clone": unix.SYS_CLONE, "clone3": unix.SYS_CLONE3, "ioctl": unix.SYS_IOCTL,
		"personality": unix.SYS_PERSONALITY, "getpid": unix.SYS_GETPID,
	}
	for name, want := range nrs {
		if got := arch.X86_64.SyscallNames[name]; got != want {
			t.Errorf("syscall %s = %d, want %d", name, got, want)
		}
	}
}
