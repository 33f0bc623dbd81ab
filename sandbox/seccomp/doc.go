// Package seccomp generates the seccomp-BPF filter that the sandbox hands to
// bubblewrap.
//
// The filter is a denylist layered on top of bubblewrap's namespaces, not an
// allowlist: every system call it does not name is allowed. Its job is to
// shut the kernel entry points that namespaces alone leave open to a hostile
// pull request (ptrace, keyrings, the mount API, new namespaces, BPF,
// io_uring, userfaultfd, module and kexec loading, terminal injection with
// TIOCSTI) and to make sure a denylist written for the x86_64 ABI cannot be
// sidestepped through another ABI.
//
// The program, in evaluation order:
//
//  1. seccomp_data.arch other than AUDIT_ARCH_X86_64 (an i386 call through
//     int $0x80, for instance) ⇒ SECCOMP_RET_KILL_PROCESS.
//  2. A syscall number with the x32 bit (0x40000000) set ⇒ KILL_PROCESS.
//  3. Each name in [Filter.Denied] except the conditional ones below ⇒
//     SECCOMP_RET_ERRNO|EPERM.
//  4. clone3 ⇒ ENOSYS, so that libc falls back to clone(2), whose flags live
//     in a register the filter can inspect (clone3's live in memory).
//  5. clone ⇒ EPERM when the low 32 bits of flags contain any CLONE_NEW*
//     namespace flag. The low byte of clone's flags is the exit signal
//     (CSIGNAL), so CLONE_NEWTIME (0x80) is not tested there; clone(2)
//     cannot create a time namespace anyway, and unshare and clone3, which
//     can, are denied outright.
//  6. ioctl ⇒ EPERM when the low 32 bits of the command are TIOCSTI or
//     TIOCLINUX. The kernel truncates the command to 32 bits, so comparing
//     all 64 bits would let TIOCSTI|1<<32 through.
//  7. personality ⇒ EPERM unless the low 32 bits of the persona are 0
//     (PER_LINUX) or 0xffffffff (the query form). The kernel takes an
//     unsigned int, hence the 32-bit comparison. This refuses, among others,
//     ADDR_NO_RANDOMIZE and READ_IMPLIES_EXEC.
//  8. Anything else ⇒ SECCOMP_RET_ALLOW.
//
// Argument tests always load the low word of a 64-bit argument
// (seccomp_data offset 16+8*i on little-endian x86_64) and ignore the high
// word, matching how the kernel reads int-sized arguments.
//
// Only nr and arch decide the outcome for all but clone, ioctl and
// personality, so the kernel's seccomp action cache (Linux 5.11+) skips the
// BPF program entirely for the allowed syscalls.
//
// # Passing the filter to bubblewrap
//
// [Filter.Bytes] is the raw struct sock_filter array that bwrap --seccomp FD
// expects. Put the bytes in a pipe or a memfd, hand the read side to bwrap
// as an inherited descriptor (exec.Cmd.ExtraFiles[0] is fd 3) and pass
// "--seccomp 3". bwrap reads the descriptor until EOF, so the write side of a
// pipe must be closed in the parent after writing; a program of a few hundred
// bytes fits in a pipe buffer, so writing before Start cannot block. bwrap
// sets no_new_privs and installs the filter in the sandboxed process just
// before execve, after its own namespace setup, so the filter does not get in
// bwrap's way.
package seccomp
