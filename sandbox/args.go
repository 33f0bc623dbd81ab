package sandbox

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Fixed paths and ids inside the sandbox.
const (
	// WorkDir is where the workspace is bound read-write; it is the cwd.
	WorkDir = "/work"
	// HomeDir is HOME, a sized tmpfs.
	HomeDir = "/home/vouch"
	// SandboxUID and SandboxGID are the ids the step sees for itself.
	SandboxUID = 1000
	SandboxGID = 1000
	// Hostname is the sandbox's host name.
	Hostname = "vouch"
)

// The file descriptors bwrap is given, in cmd.ExtraFiles order (fd 3 upward).
const (
	fdInfo = 3 + iota
	fdBlock
	fdEtcFirst
)

// fdSeccomp carries the seccomp program; it follows the /etc files.
var fdSeccomp = fdEtcFirst + len(etcFiles)

// etcFiles is the synthesized /etc, in the order their fds follow fdEtcFirst.
var etcFiles = []struct{ path, data string }{
	{"/etc/passwd", "root:x:0:0:root:/root:/usr/sbin/nologin\n" +
		"vouch:x:1000:1000:vouch:/home/vouch:/bin/sh\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"},
	{"/etc/group", "root:x:0:\nvouch:x:1000:\nnogroup:x:65534:\n"},
	{"/etc/hosts", "127.0.0.1\tlocalhost\n::1\tlocalhost\n127.0.1.1\tvouch\n"},
	{"/etc/nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\nhosts: files\n"},
}

// rootLink is one top-level entry of the host's / that the sandbox recreates:
// a symlink (as on merged-/usr systems) or a directory bound read-only.
type rootLink struct {
	path   string // e.g. "/bin"
	target string // symlink target, "" when path is a directory
}

// hostRootLinks inspects the host's /bin, /sbin and /lib* so the sandbox
// mirrors them: symlinks into /usr are recreated, directories bound read-only.
func hostRootLinks() []rootLink {
	var links []rootLink
	for _, name := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(name)
		if err != nil {
			continue
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(name)
			if err != nil {
				continue
			}
			links = append(links, rootLink{path: name, target: target})
		case fi.IsDir():
			links = append(links, rootLink{path: name})
		}
	}
	return links
}

// roBind is a host directory bound read-only at the same path.
type roBind struct{ path string }

// bwrapArgs returns bwrap's argv (without argv[0]) for one step. Every
// namespace is unshared by an explicit flag: --unshare-all and the -try
// variants fall back silently and are never used.
func bwrapArgs(s launchSpec, links []rootLink) []string {
	a := []string{
		"--unshare-user", "--disable-userns", "--unshare-net", "--unshare-pid",
		"--unshare-ipc", "--unshare-uts", "--unshare-cgroup",
		"--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--uid", strconv.Itoa(SandboxUID), "--gid", strconv.Itoa(SandboxGID),
		"--hostname", Hostname,
		"--ro-bind", "/usr", "/usr",
	}
	for _, l := range links {
		if l.target != "" {
			a = append(a, "--symlink", l.target, l.path)
		} else {
			a = append(a, "--ro-bind", l.path, l.path)
		}
	}
	for i, f := range etcFiles {
		a = append(a, "--ro-bind-data", strconv.Itoa(fdEtcFirst+i), f.path)
	}
	a = append(a,
		"--proc", "/proc",
		"--dev", "/dev",
		"--size", strconv.FormatInt(s.limits.Tmp, 10), "--tmpfs", "/tmp",
		"--size", strconv.FormatInt(s.limits.Tmp, 10), "--tmpfs", HomeDir,
		"--bind", s.workspace, WorkDir,
		"--chdir", WorkDir,
	)
	for _, b := range s.binds {
		a = append(a, "--ro-bind", b.path, b.path)
	}
	a = append(a, "--remount-ro", "/", "--clearenv")
	for _, kv := range s.env {
		k, v, _ := strings.Cut(kv, "=")
		a = append(a, "--setenv", k, v)
	}
	a = append(a,
		"--info-fd", strconv.Itoa(fdInfo),
		"--block-fd", strconv.Itoa(fdBlock),
		"--seccomp", strconv.Itoa(fdSeccomp),
		"--")
	return append(a, s.argv...)
}

// stepEnv is the whole environment of a step, as sorted KEY=VALUE pairs: the
// sandbox's base variables, then the recipe's, which may override them.
// Toolchain bin directories come first on PATH.
func stepEnv(recipeEnv map[string]string, tcs []Toolchain) ([]string, error) {
	var bins []string
	for _, tc := range tcs {
		if len(tc.Bin) > 0 {
			bins = append(bins, tc.Bin...)
			continue
		}
		for _, p := range tc.Paths {
			bin := filepath.Join(p, "bin")
			if fi, err := os.Stat(bin); err == nil && fi.IsDir() {
				bins = append(bins, bin)
			}
		}
	}
	env := map[string]string{
		"HOME":   HomeDir,
		"TMPDIR": "/tmp",
		"LANG":   "C.UTF-8",
		"PWD":    WorkDir, // bwrap sets it anyway
	}
	for _, tc := range tcs {
		maps.Copy(env, tc.Env)
	}
	for k, v := range recipeEnv {
		if !validEnvName(k) || strings.ContainsRune(v, 0) {
			return nil, fmt.Errorf("recipe env %q: invalid name or value", k)
		}
		if reservedEnv[k] {
			return nil, fmt.Errorf("recipe env %q: set by vouch, not by a recipe", k)
		}
		env[k] = v
	}
	env["PATH"] = strings.Join(append(bins, "/usr/local/bin", "/usr/bin", "/bin"), ":")
	env["CI"] = "true"
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out, nil
}

// reservedEnv are the variables vouch sets for every step; a recipe may not
// change them (toolchains declare PATH entries through Bin instead).
var reservedEnv = map[string]bool{"PATH": true, "HOME": true, "TMPDIR": true, "CI": true, "PWD": true}

// validEnvName reports whether k can be an environment variable name.
func validEnvName(k string) bool {
	return k != "" && !strings.ContainsAny(k, "=\x00")
}
