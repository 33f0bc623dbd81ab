// Command probe attempts one system call named on its command line and
// prints the outcome as "RESULT <case> <ok|ERRNO> [detail]". It is built
// and run under bwrap by the seccomp package's tests. Cases that the filter
// kills print "REACHED <case>" first, so that the absence of the RESULT line
// shows the process died in the call.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// int80 executes INT $0x80 (the i386 syscall gate) with EAX=nr and returns
// EAX.
func int80(nr uintptr) uintptr

// rawClone calls clone(2) with flags and no new stack; the child exits with
// status 0 at once, in assembly, without touching the Go runtime.
func rawClone(flags uintptr) (pid, errno uintptr)

const (
	sigchld       = uintptr(unix.SIGCHLD)
	uffdUserOnly  = 1        // UFFD_USER_MODE_ONLY
	readImplExec  = 0x400000 // READ_IMPLIES_EXEC
	x32GetpidNr   = 39 | 0x40000000
	i386GetpidNr  = 20
	keySpecSessKR = ^uintptr(2) // KEY_SPEC_SESSION_KEYRING (-3)
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: probe CASE")
		os.Exit(2)
	}
	name := os.Args[1]
	if name == "sleep" { // target for ptrace_attach
		time.Sleep(time.Minute)
		return
	}
	f, ok := cases[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "probe: unknown case %q\n", name)
		os.Exit(2)
	}
	// A killed probe must not leave a core file or reach a host core
	// handler.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	outcome, detail := f()
	fmt.Printf("RESULT %s %s %s\n", name, outcome, detail)
}

// result turns a raw syscall return into an outcome.
func result(r1, errno uintptr) (string, string) {
	if errno != 0 {
		return unix.ErrnoName(unix.Errno(errno)), ""
	}
	return "ok", fmt.Sprintf("r=%d", r1)
}

func errResult(err error) (string, string) {
	if e, ok := err.(unix.Errno); ok {
		return unix.ErrnoName(e), ""
	}
	if err != nil {
		return "error", err.Error()
	}
	return "ok", ""
}

func reached(name string) { fmt.Printf("REACHED %s\n", name) }

var cases = map[string]func() (string, string){
	"getpid": func() (string, string) {
		return "ok", fmt.Sprintf("pid=%d", unix.Getpid())
	},
	"write_file": func() (string, string) {
		if err := os.WriteFile("/tmp/probe.txt", []byte("hello"), 0o600); err != nil {
			return errResult(unwrap(err))
		}
		b, err := os.ReadFile("/tmp/probe.txt")
		if err != nil {
			return errResult(unwrap(err))
		}
		return "ok", "read=" + string(b)
	},
	"fork":             func() (string, string) { return cloneAndReap(sigchld) },
	"clone_newnet":     func() (string, string) { return cloneAndReap(unix.CLONE_NEWNET | sigchld) },
	"clone_newuser":    func() (string, string) { return cloneAndReap(unix.CLONE_NEWUSER | unix.CLONE_NEWNET | sigchld) },
	"clone_newuser_hi": func() (string, string) { return cloneAndReap(1<<32 | unix.CLONE_NEWUSER | unix.CLONE_NEWNET | sigchld) },
	"clone3": func() (string, string) {
		// size 0 is below CLONE_ARGS_SIZE_VER0: the kernel says EINVAL.
		r, _, e := unix.RawSyscall(unix.SYS_CLONE3, 0, 0, 0)
		return result(r, uintptr(e))
	},
	"unshare_user": func() (string, string) {
		// A multi-threaded caller gets EINVAL from the kernel.
		return errResult(unix.Unshare(unix.CLONE_NEWUSER))
	},
	"setns": func() (string, string) {
		// fd -1: the kernel says EBADF.
		r, _, e := unix.RawSyscall(unix.SYS_SETNS, ^uintptr(0), 0, 0)
		return result(r, uintptr(e))
	},
	"mount": func() (string, string) {
		// A bad fstype pointer: the kernel copies it first and says EFAULT.
		src, _ := unix.BytePtrFromString("none")
		dst, _ := unix.BytePtrFromString("/tmp")
		r, _, e := unix.RawSyscall6(unix.SYS_MOUNT, uintptr(unsafe.Pointer(src)),
			uintptr(unsafe.Pointer(dst)), 1, 0, 0, 0)
		return result(r, uintptr(e))
	},
	"ptrace_traceme": func() (string, string) {
		r, _, e := unix.RawSyscall(unix.SYS_PTRACE, unix.PTRACE_TRACEME, 0, 0)
		return result(r, uintptr(e))
	},
	"ptrace_attach": ptraceAttach,
	"keyctl": func() (string, string) {
		r, _, e := unix.RawSyscall(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, keySpecSessKR, 0)
		return result(r, uintptr(e))
	},
	"bpf": func() (string, string) {
		// An unknown command with an empty attr: the kernel says EINVAL,
		// whatever kernel.unprivileged_bpf_disabled is.
		r, _, e := unix.RawSyscall(unix.SYS_BPF, 1000, 0, 0)
		return result(r, uintptr(e))
	},
	"userfaultfd": func() (string, string) {
		// User-mode-only faults are allowed to unprivileged callers.
		r, _, e := unix.RawSyscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC|uffdUserOnly, 0, 0)
		return result(r, uintptr(e))
	},
	"io_uring_setup": func() (string, string) {
		var params [120]byte // struct io_uring_params
		r, _, e := unix.RawSyscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params)), 0)
		return result(r, uintptr(e))
	},
	"personality_exec": func() (string, string) {
		r, _, e := unix.RawSyscall(unix.SYS_PERSONALITY, readImplExec, 0, 0)
		return result(r, uintptr(e))
	},
	"personality_query": func() (string, string) {
		r, _, e := unix.RawSyscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0)
		return result(r, uintptr(e))
	},
	"tiocsti":    func() (string, string) { return ptyIoctl(unix.TIOCSTI) },
	"tiocsti_hi": func() (string, string) { return ptyIoctl(1<<32 | unix.TIOCSTI) },
	"tioclinux":  func() (string, string) { return ptyIoctl(unix.TIOCLINUX) },
	"tiocgwinsz": func() (string, string) { return ptyIoctl(unix.TIOCGWINSZ) },
	"int80": func() (string, string) {
		reached("int80")
		r := int80(i386GetpidNr)
		return "ok", fmt.Sprintf("r=%d pid=%d", int32(r), unix.Getpid())
	},
	"x32": func() (string, string) {
		reached("x32")
		r, _, e := unix.RawSyscall(x32GetpidNr, 0, 0, 0)
		return result(r, uintptr(e))
	},
}

func unwrap(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// cloneAndReap forks with flags and waits for the child, which exits 0.
func cloneAndReap(flags uintptr) (string, string) {
	pid, errno := rawClone(flags)
	if errno != 0 {
		return result(0, errno)
	}
	var ws unix.WaitStatus
	if _, err := unix.Wait4(int(pid), &ws, 0, nil); err != nil {
		return "error", "wait4: " + err.Error()
	}
	return "ok", fmt.Sprintf("child_exit=%d", ws.ExitStatus())
}

// ptraceAttach starts a sibling-like child and tries PTRACE_ATTACH to it.
func ptraceAttach() (string, string) {
	c := exec.Command("/proc/self/exe", "sleep")
	if err := c.Start(); err != nil {
		return "error", "start: " + err.Error()
	}
	defer func() { _ = c.Process.Kill(); _ = c.Wait() }()
	r, _, e := unix.RawSyscall6(unix.SYS_PTRACE, unix.PTRACE_ATTACH, uintptr(c.Process.Pid), 0, 0, 0, 0)
	return result(r, uintptr(e))
}

// ptyIoctl opens a pty, makes its slave this process's controlling terminal
// (TIOCSTI needs that, or CAP_SYS_ADMIN), issues ioctl(slave, cmd, &'X')
// with the full 64-bit cmd, and reports whether 'X' reached the slave's
// input queue or was echoed to the master.
func ptyIoctl(cmd uintptr) (string, string) {
	master, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "error", "open ptmx: " + err.Error()
	}
	if err := unix.IoctlSetPointerInt(master, unix.TIOCSPTLCK, 0); err != nil {
		return "error", "unlockpt: " + err.Error()
	}
	n, err := unix.IoctlGetInt(master, unix.TIOCGPTN)
	if err != nil {
		return "error", "ptsname: " + err.Error()
	}
	if _, err := unix.Setsid(); err != nil && err != unix.EPERM {
		return "error", "setsid: " + err.Error()
	}
	slave, err := unix.Open(fmt.Sprintf("/dev/pts/%d", n), unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return "error", "open slave: " + err.Error()
	}
	if err := unix.IoctlSetInt(slave, unix.TIOCSCTTY, 0); err != nil {
		return "error", "TIOCSCTTY: " + err.Error()
	}
	// Non-canonical with echo: an injected byte is readable on the slave
	// at once and echoed to the master.
	tio, err := unix.IoctlGetTermios(slave, unix.TCGETS)
	if err != nil {
		return "error", "TCGETS: " + err.Error()
	}
	tio.Lflag &^= unix.ICANON
	tio.Lflag |= unix.ECHO
	tio.Cc[unix.VMIN], tio.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(slave, unix.TCSETS, tio); err != nil {
		return "error", "TCSETS: " + err.Error()
	}

	var buf [64]byte
	buf[0] = 'X'
	r, _, e := unix.RawSyscall(unix.SYS_IOCTL, uintptr(slave), cmd, uintptr(unsafe.Pointer(&buf[0])))
	outcome, _ := result(r, uintptr(e))
	return outcome, fmt.Sprintf("injected=%s echoed=%s", pending(slave), pending(master))
}

// pending reads what fd has within 200ms, or "none".
func pending(fd int) string {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(pfd, 200)
	if err != nil || n == 0 || pfd[0].Revents&unix.POLLIN == 0 {
		return "none"
	}
	var buf [64]byte
	m, err := unix.Read(fd, buf[:])
	if err != nil || m == 0 {
		return "none"
	}
	return fmt.Sprintf("%q", buf[:m])
}
