package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"vouch.dev/vouch/sandbox"
)

// runDoctor launches `true` through the same sandbox as `vouch verify` and
// prints what was observed; it exits 0 only when isolation was proven.
func runDoctor(ctx context.Context, logger *slog.Logger, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
		return exitUsage
	}
	cfg := sandbox.DefaultConfig()
	if b := os.Getenv("VOUCH_BWRAP"); b != "" {
		cfg.Bwrap = b
	}
	runner, err := sandbox.New(cfg, logger)
	if err != nil {
		fmt.Fprintf(stderr, "vouch doctor: %v\n", err)
		return exitUsage
	}
	res, err := runner.Probe(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "vouch doctor: %v\n", err)
		return exitUsage
	}
	var uts unix.Utsname
	if err := unix.Uname(&uts); err == nil {
		fmt.Fprintf(stdout, "kernel:    %s %s\n", unix.ByteSliceToString(uts.Sysname[:]), unix.ByteSliceToString(uts.Release[:]))
	}
	fmt.Fprintf(stdout, "bwrap:     %s\n", orNone(res.Path))
	fmt.Fprintf(stdout, "version:   %s\n", orNone(res.Version))
	if res.Path != "" {
		if data, err := os.ReadFile(res.Path); err == nil {
			sum := sha256.Sum256(data)
			fmt.Fprintf(stdout, "sha256:    %s\n", hex.EncodeToString(sum[:]))
		}
	}
	uid := os.Geteuid()
	if uid == 0 {
		fmt.Fprintf(stdout, "uid:       vouch runs as 0; bwrap runs as %d:%d; the step sees %d:%d\n", cfg.UID, cfg.GID, sandbox.SandboxUID, sandbox.SandboxGID)
	} else {
		fmt.Fprintf(stdout, "uid:       vouch and bwrap run as %d; the step sees %d:%d\n", uid, sandbox.SandboxUID, sandbox.SandboxGID)
	}
	fmt.Fprintln(stdout, "namespaces (host → child):")
	observed := res.Namespaces
	if res.Unproven != nil && res.Unproven.Observed != nil {
		observed = res.Unproven.Observed
	}
	for _, kind := range sandbox.Namespaces {
		p, ok := observed[kind]
		state := "not observed"
		if ok && p.Host != "" && p.Child != "" {
			state = "differs"
			if p.Host == p.Child {
				state = "SHARED"
			}
		}
		fmt.Fprintf(stdout, "  %-7s %-22s %-22s %s\n", kind, orNone(p.Host), orNone(p.Child), state)
	}
	weak := ""
	if len(res.Steps) == 1 {
		status := statusFields(res.Steps[0].Output)
		switch {
		case status["Seccomp"] != "2":
			weak = "the step did not run under a seccomp filter"
		case strings.Trim(status["CapEff"], "0") != "":
			weak = "the step kept capabilities " + status["CapEff"]
		case status["NoNewPrivs"] != "1":
			weak = "the step can gain privileges (NoNewPrivs is not set)"
		}
		fmt.Fprintf(stdout, "inside:    Uid %s, Gid %s\n", status["Uid"], status["Gid"])
		fmt.Fprintf(stdout, "caps:      effective %s, bounding %s\n", status["CapEff"], status["CapBnd"])
		fmt.Fprintf(stdout, "nnp:       NoNewPrivs %s\n", status["NoNewPrivs"])
		fmt.Fprintf(stdout, "seccomp:   mode %s (2 = filter), %d filter(s), sha256 %s\n", status["Seccomp"], len(strings.Fields(status["Seccomp_filters"])), res.Seccomp.SHA256)
	}
	fmt.Fprintf(stdout, "cgroup:    %s\n", cgroupVersion())
	for _, l := range res.Limits {
		fmt.Fprintf(stdout, "limit:     %s=%d via %s\n", l.Name, l.Value, l.Mechanism)
	}
	if res.Unproven != nil || !res.Isolated || weak != "" {
		cause := "isolation not observed"
		if weak != "" {
			cause = weak
		}
		if res.Unproven != nil {
			cause = res.Unproven.Error()
			if s := strings.TrimSpace(res.Unproven.Stderr); s != "" {
				cause += "\n  provider stderr: " + s
			}
		}
		fmt.Fprintf(stdout, "NOT ISOLATED: %s\n", cause)
		if fix := sandbox.Diagnose(res.Unproven); fix != "" {
			fmt.Fprintf(stdout, "remedy:    %s\n", fix)
		}
		return 1
	}
	fmt.Fprintln(stdout, "isolation proven: every namespace of the child differs from vouch's own")
	return 0
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// statusFields parses /proc/<pid>/status output into name → value.
func statusFields(out []byte) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok {
			m[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return m
}

// cgroupVersion says which cgroup hierarchy the host mounts.
func cgroupVersion() string {
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &st); err != nil {
		return "none mounted"
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		return "v2 (unified)"
	}
	return "v1 (controllers mounted separately)"
}
