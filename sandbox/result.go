package sandbox

import "time"

// Namespaces are the kinds compared by the isolation proof, in a fixed order.
var Namespaces = []string{"user", "net", "pid", "mnt", "ipc", "uts", "cgroup"}

// NamespacePair is one namespace as seen for the host (vouch itself) and for
// the sandboxed child, as readlink of /proc/<pid>/ns/<kind> prints it.
type NamespacePair struct {
	Host  string `json:"host"`
	Child string `json:"child"`
}

// Result is what one sandboxed run of a plan observed.
type Result struct {
	// Provider is "bubblewrap".
	Provider string
	// Version is what `bwrap --version` printed.
	Version string
	// Path is the resolved bwrap binary.
	Path string
	// SHA256 is the hex digest of the bwrap binary that was run, "" if unread.
	SHA256 string
	// Isolated is true only when every launched step was proven isolated.
	Isolated bool
	// Mode is the operator's mode; ModeTrustedDevelopment runs never isolate.
	Mode Mode
	// Namespaces holds the proof of the first step (every step is proven).
	Namespaces map[string]NamespacePair
	// Limits records each limit applied and the mechanism that enforced it.
	Limits []AppliedLimit
	// Steps are the steps that were launched, in order; a failing step ends the run.
	Steps []StepResult
	// Seccomp describes the syscall filter every step ran under.
	Seccomp SeccompFacts
	// Unproven is set when isolation could not be proven; nothing of that
	// step ran and no later step was launched.
	Unproven *ProofError
}

// AppliedLimit is one enforced bound.
type AppliedLimit struct {
	// Name is "timeout", "output", "pids", "memory", "swap", "cpu",
	// "cpu-time", "tmp", "fsize", "nofile", "core".
	Name string `json:"name"`
	// Value is the bound in its unit: bytes (memory, swap, tmp, output,
	// fsize), a count (pids, nofile), milliseconds (timeout, cpu-time),
	// thousandths of a CPU (cpu: 500 is half a CPU).
	Value int64 `json:"value"`
	// Mechanism says what enforced it: "cgroup-v1:memory", "cgroup-v1:pids",
	// "cgroup-v1:cpu", "cgroup-v2:memory.max", "cgroup-v2:pids.max",
	// "cgroup-v2:cpu.max", "rlimit:AS", "rlimit:NPROC", "rlimit:CPU",
	// "rlimit:FSIZE", "tmpfs-size", "vouch:timeout-kill", "vouch:output-kill".
	Mechanism string `json:"mechanism"`
}

// StepResult is the observed run of one step.
type StepResult struct {
	// Name is the recipe step's name.
	Name string
	// ExitCode is the step's exit status; -1 when killed by vouch.
	ExitCode int
	// Duration is wall time from release to reap.
	Duration time.Duration
	// TimedOut is set when the step hit its timeout and was killed.
	TimedOut bool
	// OutputLimited is set when output passed the cap and the step was killed.
	OutputLimited bool
	// OOMKilled is set when the step's memory cgroup killed a process for
	// passing the memory limit (the step then usually exits non-zero).
	OOMKilled bool
	// CPUTime is the CPU time the step used, bwrap included, as its cgroup
	// counted it; without a cgroup, only what bwrap's rusage reports (a
	// lower bound).
	CPUTime time.Duration
	// Output is the combined stdout and stderr, at most the output cap.
	Output []byte
	// OutputBytes is how many bytes the step wrote in all (may exceed len(Output)).
	OutputBytes int64
	// Namespaces is this step's isolation proof.
	Namespaces map[string]NamespacePair
}

// SeccompFacts identify the seccomp program passed to bwrap.
type SeccompFacts struct {
	// SHA256 is the hex digest of the raw BPF program.
	SHA256 string `json:"sha256"`
	// Denied names the syscalls it refuses (some only for certain arguments).
	Denied []string `json:"denied,omitempty"`
}
