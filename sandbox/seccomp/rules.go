package seccomp

// Values from the Linux UAPI headers (x86_64). They are spelled out rather
// than taken from golang.org/x/sys/unix so that the filter can be generated
// on any host OS; a Linux test checks them against x/sys.
const (
	// seccomp_data field offsets (include/uapi/linux/seccomp.h).
	offNr   = 0
	offArch = 4
	offArgs = 16

	// Return actions.
	retKillProcess = 0x80000000
	retErrno       = 0x00050000
	retAllow       = 0x7fff0000

	errnoEPERM  = 1
	errnoENOSYS = 38

	// x32SyscallBit marks a syscall number of the x32 ABI, which shares
	// AUDIT_ARCH_X86_64 with the native ABI.
	x32SyscallBit = 0x40000000

	// Namespace flags of clone(2), unshare(2) and clone3(2).
	cloneNewTime   = 0x00000080
	cloneNewNS     = 0x00020000
	cloneNewCgroup = 0x02000000
	cloneNewUTS    = 0x04000000
	cloneNewIPC    = 0x08000000
	cloneNewUser   = 0x10000000
	cloneNewPID    = 0x20000000
	cloneNewNet    = 0x40000000

	// cloneNamespaceFlags are the flags that make clone(2) deny. The low
	// byte of clone's flags is the exit signal, so cloneNewTime (0x80) is
	// deliberately absent: for clone(2) that bit belongs to the exit
	// signal, not to a namespace.
	cloneNamespaceFlags = cloneNewNS | cloneNewUTS | cloneNewIPC | cloneNewUser |
		cloneNewPID | cloneNewNet | cloneNewCgroup

	// Terminal ioctls that write into another process's input or poke the
	// virtual console.
	ioctlTIOCSTI   = 0x5412
	ioctlTIOCLINUX = 0x541C

	// personality(2) arguments that stay allowed.
	personaLinux = 0x00000000
	personaQuery = 0xffffffff
)

// deniedEPERM lists the syscalls refused outright with EPERM, grouped by
// what they would give a hostile pull request.
var deniedEPERM = []string{
	// Inspecting or writing other processes' memory.
	"ptrace", "process_vm_readv", "process_vm_writev",
	// Kernel keyrings, which are not namespaced.
	"keyctl", "add_key", "request_key",
	// The mount API, old and new.
	"mount", "umount2", "pivot_root", "chroot",
	"move_mount", "open_tree", "open_tree_attr",
	"fsopen", "fsmount", "fsconfig", "fspick", "mount_setattr",
	// Joining or creating namespaces.
	"unshare", "setns",
	// Large kernel attack surface with a history of privilege escalations.
	"bpf", "perf_event_open", "userfaultfd",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	// Changing the running kernel.
	"kexec_load", "kexec_file_load",
	"init_module", "finit_module", "delete_module",
	// Host-wide state: accounting, swap, power, clocks, quotas, logs.
	"acct", "swapon", "swapoff", "reboot",
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	"quotactl", "lookup_dcookie", "syslog", "vhangup",
	// File handles bypass path-based confinement.
	"name_to_handle_at", "open_by_handle_at",
}

// Syscalls with a rule of their own in Program.
const (
	sysClone       = "clone"
	sysClone3      = "clone3"
	sysIoctl       = "ioctl"
	sysPersonality = "personality"
)
