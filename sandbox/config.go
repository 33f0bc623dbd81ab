package sandbox

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"vouch.dev/vouch/gate"
)

// Config is the operator's sandbox configuration.
type Config struct {
	// Bwrap is the bubblewrap binary, a path or a name looked up in PATH;
	// "" means "bwrap".
	Bwrap string
	// UID and GID are the host ids bwrap runs as when vouch runs as root. They
	// must not be 0: root inside a user namespace still reads root-owned host
	// files, and RLIMIT_NPROC does not bind root. Ignored when vouch is not
	// root (bwrap then runs as vouch's own ids).
	UID, GID int
	// WorkRoot is the parent directory of the per-run workspaces. The sandbox
	// uid must be able to traverse it (mode 0711 or wider on it and its parents).
	WorkRoot string
	// KeepWorkspace leaves each run's workspace on disk (for tests and debugging).
	KeepWorkspace bool
	// Defaults fill the limits a recipe leaves unset.
	Defaults gate.Limits
	// Max caps what a recipe may ask for; a zero field means "no cap".
	Max gate.Limits
	// NoFile is RLIMIT_NOFILE inside the sandbox.
	NoFile uint64
	// CPUs is the CPU quota of one step, in CPUs (0.5 is half of one CPU's
	// time); 0 means no quota. It is enforced by a cgroup CPU controller; on
	// a host without one, each process's CPU time is capped by RLIMIT_CPU at
	// CPUs × the step's timeout instead.
	CPUs float64
	// FileSize is RLIMIT_FSIZE inside the sandbox, the largest file a step
	// may write, in bytes; 0 means no limit.
	FileSize int64
	// CgroupRoot is where the cgroup hierarchies are mounted; "" means
	// /sys/fs/cgroup. A directory without cgroup mounts turns per-step
	// cgroups off (limits then fall back to rlimits, and a recipe limit only
	// a cgroup can enforce blocks the run).
	CgroupRoot string
	// CgroupParent is the cgroup, relative to each hierarchy's root, under
	// which the per-step cgroups are made (in a "vouch" child); "" means
	// vouch's own cgroup. On cgroup v2 it must be a delegated cgroup that
	// holds no processes, so its controllers can be enabled below it.
	CgroupParent string
	// ProofTimeout bounds the wait for bwrap to report its child.
	ProofTimeout time.Duration
	// Mode is ModeIsolated (the zero value) unless the operator explicitly
	// chooses ModeTrustedDevelopment. Nothing switches it on by default or
	// as a fallback, and a recipe cannot.
	Mode Mode
	// Toolchains are the operator's named read-only host mounts a recipe
	// selects by name; a recipe can never name a host path itself.
	Toolchains map[string]Toolchain
}

// Toolchain is one operator-configured set of read-only host directories,
// e.g. "go": {Paths: ["/usr/local/go", "/var/cache/gomod"], Env: {"GOMODCACHE": "/var/cache/gomod", "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"}}.
type Toolchain struct {
	// Paths are host directories bound read-only at the same path inside.
	Paths []string
	// Env is what the toolchain declares for the step's environment.
	Env map[string]string
	// Bin are directories put first on PATH; empty means each path's bin/
	// subdirectory that exists.
	Bin []string
}

// The defaults of DefaultConfig.
const (
	// DefaultUID and DefaultGID are the dedicated unprivileged host ids the
	// sandbox runs as when vouch is root.
	DefaultUID = 61000
	DefaultGID = 61000
	// DefaultOutput caps one step's combined output.
	DefaultOutput = 1 << 20
	// DefaultPids bounds the processes of one sandbox.
	DefaultPids = 512
	// DefaultTmp is the size of /tmp and of HOME, each.
	DefaultTmp = 256 << 20
	// DefaultMemory bounds the memory of one step.
	DefaultMemory = 2 << 30
	// DefaultCPUs is the CPU quota of one step.
	DefaultCPUs = 2
	// DefaultFileSize is RLIMIT_FSIZE inside the sandbox.
	DefaultFileSize = 1 << 30
	// DefaultNoFile is RLIMIT_NOFILE inside the sandbox.
	DefaultNoFile = 1024
	// DefaultProofTimeout bounds the wait for bwrap's child pid.
	DefaultProofTimeout = 10 * time.Second
)

// DefaultConfig returns the configuration used when the operator sets nothing.
func DefaultConfig() Config {
	return Config{
		Bwrap:        "bwrap",
		UID:          DefaultUID,
		GID:          DefaultGID,
		WorkRoot:     filepath.Join(os.TempDir(), "vouch-work"),
		Defaults:     gate.Limits{Output: DefaultOutput, Pids: DefaultPids, Tmp: DefaultTmp, Memory: DefaultMemory},
		NoFile:       DefaultNoFile,
		CPUs:         DefaultCPUs,
		FileSize:     DefaultFileSize,
		ProofTimeout: DefaultProofTimeout,
	}
}

// Validate reports the first field that cannot work, by name.
func (c Config) Validate() error {
	var errs []error
	if c.UID <= 0 {
		errs = append(errs, fmt.Errorf("UID: %d: must be a positive, non-root id", c.UID))
	}
	if c.GID <= 0 {
		errs = append(errs, fmt.Errorf("GID: %d: must be a positive, non-root id", c.GID))
	}
	if c.WorkRoot == "" || !filepath.IsAbs(c.WorkRoot) {
		errs = append(errs, fmt.Errorf("WorkRoot: %q: must be an absolute path", c.WorkRoot))
	}
	if c.Defaults.Output <= 0 {
		errs = append(errs, fmt.Errorf("Defaults.Output: %d: must be positive", c.Defaults.Output))
	}
	if c.Defaults.Pids <= 0 {
		errs = append(errs, fmt.Errorf("Defaults.Pids: %d: must be positive", c.Defaults.Pids))
	}
	if c.Defaults.Tmp <= 0 {
		errs = append(errs, fmt.Errorf("Defaults.Tmp: %d: must be positive", c.Defaults.Tmp))
	}
	if c.Defaults.Memory < 0 {
		errs = append(errs, fmt.Errorf("Defaults.Memory: %d: must not be negative", c.Defaults.Memory))
	}
	if c.NoFile < 16 {
		errs = append(errs, fmt.Errorf("NoFile: %d: must be at least 16", c.NoFile))
	}
	if math.IsNaN(c.CPUs) || math.IsInf(c.CPUs, 0) || c.CPUs < 0 || (c.CPUs > 0 && c.CPUs < 0.01) || c.CPUs > 4096 {
		errs = append(errs, fmt.Errorf("CPUs: %v: must be 0 (no quota) or between 0.01 and 4096", c.CPUs))
	}
	if c.FileSize < 0 {
		errs = append(errs, fmt.Errorf("FileSize: %d: must not be negative", c.FileSize))
	}
	if c.CgroupRoot != "" && (!filepath.IsAbs(c.CgroupRoot) || filepath.Clean(c.CgroupRoot) != c.CgroupRoot) {
		errs = append(errs, fmt.Errorf("CgroupRoot: %q: must be a clean absolute path", c.CgroupRoot))
	}
	if p := c.CgroupParent; p != "" && (filepath.Clean("/"+p) != "/"+strings.TrimPrefix(p, "/") || strings.Contains(p, "..") || strings.ContainsAny(p, "\x00\n")) {
		errs = append(errs, fmt.Errorf("CgroupParent: %q: must be a clean cgroup path", c.CgroupParent))
	}
	if c.ProofTimeout <= 0 {
		errs = append(errs, fmt.Errorf("ProofTimeout: %v: must be positive", c.ProofTimeout))
	}
	for name, tc := range c.Toolchains {
		if len(tc.Paths) == 0 {
			errs = append(errs, fmt.Errorf("Toolchains[%q]: no paths", name))
		}
		for _, dir := range append(slices.Clone(tc.Paths), tc.Bin...) {
			if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir || strings.ContainsAny(dir, "\x00:") || dir == "/" {
				errs = append(errs, fmt.Errorf("Toolchains[%q]: %q: must be a clean absolute path other than /", name, dir))
			}
		}
		for k, v := range tc.Env {
			if !validEnvName(k) || strings.ContainsRune(v, 0) {
				errs = append(errs, fmt.Errorf("Toolchains[%q].Env[%q]: invalid name or value", name, k))
			}
		}
	}
	if c.Mode != ModeIsolated && c.Mode != ModeTrustedDevelopment {
		errs = append(errs, fmt.Errorf("Mode: %q: must be empty (isolated) or %q", c.Mode, ModeTrustedDevelopment))
	}
	return errors.Join(errs...)
}

// Mode says how steps run.
type Mode string

// The modes. ModeIsolated is the zero value.
const (
	// ModeIsolated runs every step in a proven bubblewrap sandbox.
	ModeIsolated Mode = ""
	// ModeTrustedDevelopment runs steps WITHOUT isolation, for an operator
	// who trusts every author (local development on a host without user
	// namespaces). Every piece of evidence then says NOT ISOLATED.
	ModeTrustedDevelopment Mode = "trusted-development"
)
