package sandbox

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultCgroupRoot is where the cgroup hierarchies are looked for.
const DefaultCgroupRoot = "/sys/fs/cgroup"

// cgroupDirName is the directory, under vouch's own cgroup (or the
// configured parent) in each hierarchy, that holds the per-step cgroups.
const cgroupDirName = "vouch"

// cfsPeriod is the CFS period used for CPU quotas, in microseconds.
const cfsPeriod = 100_000

// The controllers vouch uses.
const (
	ctrlMemory = "memory"
	ctrlPids   = "pids"
	ctrlCPU    = "cpu"
)

var stepControllers = []string{ctrlMemory, ctrlPids, ctrlCPU}

// ctrlCPUAcct is the v1 controller that counts CPU time; v2 counts it in
// every cgroup's cpu.stat.
const ctrlCPUAcct = "cpuacct"

// cgroupHost is what this host offers for per-step cgroups, found once by
// New from the mount table and /proc/self/cgroup. Nothing is created until a
// step asks for a limit.
type cgroupHost struct {
	// version is 1 or 2, 0 when no usable hierarchy was found.
	version int
	// parent maps a controller to the directory under which step cgroups
	// are made (v1: one per hierarchy; v2: the same directory for all).
	parent map[string]string
	// why maps a controller to the reason it is unavailable.
	why map[string]string
	// seq numbers the step cgroups of this process.
	seq atomic.Uint64
	// nonce tells apart the step cgroups of processes that reused a pid.
	nonce string
}

// detectCgroups finds the cgroup hierarchies mounted at root (a cgroup2
// mount at root itself, or cgroup v1 mounts directly under it) and the
// directory each controller's step cgroups would go under: vouch's own
// cgroup in that hierarchy, or parent when set, plus "vouch". Nesting under
// vouch's own cgroup keeps every bound the host placed on vouch.
func detectCgroups(root, parent string) *cgroupHost {
	h := &cgroupHost{parent: map[string]string{}, why: map[string]string{}}
	var b [6]byte
	rand.Read(b[:]) //nolint:errcheck // crypto/rand does not fail on Linux
	h.nonce = hex.EncodeToString(b[:])
	none := func(reason string) *cgroupHost {
		for _, c := range stepControllers {
			h.why[c] = reason
		}
		return h
	}
	if root == "" {
		root = DefaultCgroupRoot
	}
	mounts, err := cgroupMounts(root)
	if err != nil {
		return none(err.Error())
	}
	own, err := ownCgroups()
	if err != nil {
		return none(err.Error())
	}
	place := func(m cgroupMount, ownPath string) string {
		p := parent
		if p == "" {
			// /proc/self/cgroup paths are relative to the hierarchy's root;
			// the mount may show only a subtree of it.
			rel, ok := strings.CutPrefix(ownPath, m.root)
			if !ok || (rel != "" && !strings.HasPrefix(rel, "/") && m.root != "/") {
				rel = "/"
			}
			p = rel
		}
		return filepath.Join(m.point, filepath.Clean("/"+p), cgroupDirName)
	}
	for _, m := range mounts {
		if m.v2 && m.point == root {
			h.version = 2
			avail, err := os.ReadFile(filepath.Join(filepath.Dir(place(m, own["0"])), "cgroup.controllers"))
			if err != nil {
				return none(fmt.Sprintf("cgroup v2 at %s: %v", root, err))
			}
			for _, c := range stepControllers {
				if !hasField(string(avail), c) {
					h.why[c] = fmt.Sprintf("cgroup v2 at %s: no %s controller in %s", root, c, filepath.Dir(place(m, own["0"])))
					continue
				}
				h.parent[c] = place(m, own["0"])
			}
			return h
		}
	}
	for _, m := range mounts {
		if m.v2 || filepath.Dir(m.point) != root {
			continue
		}
		for _, c := range m.controllers {
			if (!slices.Contains(stepControllers, c) && c != ctrlCPUAcct) || h.parent[c] != "" {
				continue
			}
			path, ok := own[hierarchyKey(m.controllers)]
			if !ok {
				continue
			}
			h.parent[c] = place(m, path)
			h.version = 1
		}
	}
	for _, c := range stepControllers {
		if h.parent[c] == "" {
			h.why[c] = fmt.Sprintf("no cgroup %s controller mounted under %s", c, root)
		}
	}
	h.sweep()
	return h
}

// cgroupMount is one cgroup filesystem from /proc/self/mountinfo.
type cgroupMount struct {
	point, root string
	v2          bool
	controllers []string // v1 only, as the superblock options name them
}

// cgroupMounts lists the cgroup filesystems mounted at root or directly
// under it.
func cgroupMounts(root string) ([]cgroupMount, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	var ms []cgroupMount
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		point := f[4]
		if point != root && filepath.Dir(point) != root {
			continue
		}
		if slices.Contains(strings.Split(f[5], ","), "ro") {
			continue
		}
		m := cgroupMount{point: point, root: f[3]}
		switch g[0] {
		case "cgroup2":
			m.v2 = true
		case "cgroup":
			for _, o := range strings.Split(g[2], ",") {
				if o != "rw" && o != "ro" && !strings.Contains(o, "=") && !strings.HasPrefix(o, "no") && o != "clone_children" && o != "xattr" {
					m.controllers = append(m.controllers, o)
				}
			}
		default:
			continue
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// ownCgroups maps each hierarchy of /proc/self/cgroup, named by its
// controllers ("memory", "cpu,cpuacct"; "0" for v2), to vouch's path in it.
func ownCgroups() (map[string]string, error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("read /proc/self/cgroup: %w", err)
	}
	own := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			own["0"] = parts[2]
		} else {
			own[hierarchyKey(strings.Split(parts[1], ","))] = parts[2]
		}
	}
	return own, nil
}

// hierarchyKey names a v1 hierarchy by its sorted controllers, so the
// mount options and /proc/self/cgroup agree whatever order each lists them in.
func hierarchyKey(controllers []string) string {
	cs := slices.Clone(controllers)
	slices.Sort(cs)
	return strings.Join(cs, ",")
}

// sweep removes step cgroups that a vouch process which is no longer alive
// left behind (it crashed mid-step). A cgroup that still holds a process is
// not removable and stays; so does any cgroup of a live process.
func (h *cgroupHost) sweep() {
	seen := map[string]bool{}
	for _, parent := range h.parent {
		if seen[parent] {
			continue
		}
		seen[parent] = true
		entries, err := os.ReadDir(parent)
		if err != nil {
			continue
		}
		for _, e := range entries {
			pid, _, ok := strings.Cut(e.Name(), "-")
			n, err := strconv.Atoi(pid)
			if !e.IsDir() || !ok || err != nil || n <= 0 {
				continue
			}
			if err := unix.Kill(n, 0); !errors.Is(err, unix.ESRCH) {
				continue // alive (or a reused pid: leave it)
			}
			unix.Rmdir(filepath.Join(parent, e.Name())) //nolint:errcheck // populated: leave it
		}
	}
}

// hasField reports whether s, split on white space, holds word.
func hasField(s, word string) bool {
	for f := range strings.FieldsSeq(s) {
		if f == word {
			return true
		}
	}
	return false
}

// cgroupWant is what one step asks of its cgroups; zero means "not wanted".
type cgroupWant struct {
	memory int64
	pids   int
	cpus   float64
}

// stepCgroup is the set of cgroups one step runs in.
type stepCgroup struct {
	version int
	id      string
	// dirs maps each controller whose limit was written to its directory.
	dirs map[string]string
	// made lists every directory created, deepest last.
	made []string
	// why maps each wanted controller that is not enforced to the reason.
	why map[string]string
	// swap is set when swap was limited to nothing alongside memory.
	swap bool
	// acct is the directory whose CPU usage is read ("" when none).
	acct string
}

// cgroupStats is what a step's cgroups counted, read before removal.
type cgroupStats struct {
	oomKilled bool
	cpu       time.Duration
	cpuKnown  bool
}

// create makes the step's cgroups and writes the wanted limits. A
// controller that fails is left out, with its reason in why; the step's
// caller decides whether that may fall back.
func (h *cgroupHost) create(want cgroupWant) *stepCgroup {
	sc := &stepCgroup{
		version: h.version,
		id:      fmt.Sprintf("%d-%d-%s", os.Getpid(), h.seq.Add(1), h.nonce),
		dirs:    map[string]string{}, why: map[string]string{},
	}
	wanted := map[string]bool{ctrlMemory: want.memory > 0, ctrlPids: want.pids > 0, ctrlCPU: want.cpus > 0}
	var use []string
	for _, c := range stepControllers {
		if !wanted[c] {
			continue
		}
		if h.parent[c] == "" {
			sc.why[c] = h.why[c]
			continue
		}
		use = append(use, c)
	}
	if len(use) == 0 {
		return sc
	}
	if h.version == 2 {
		h.createV2(sc, use, want)
		if len(sc.made) > 0 {
			sc.acct = sc.made[0]
		}
	} else {
		for _, c := range use {
			dir := filepath.Join(h.parent[c], sc.id)
			if err := mkdirCgroup(h.parent[c], dir); err != nil {
				sc.why[c] = err.Error()
				continue
			}
			sc.made = append(sc.made, dir)
			if err := writeLimitsV1(sc, c, dir, want); err != nil {
				sc.why[c] = err.Error()
				continue
			}
			sc.dirs[c] = dir
		}
		h.createAcctV1(sc)
	}
	return sc
}

// createAcctV1 gives the step a cgroup that counts its CPU time: its cpu
// cgroup when cpuacct is mounted with cpu, else one of its own.
func (h *cgroupHost) createAcctV1(sc *stepCgroup) {
	if len(sc.dirs) == 0 {
		return
	}
	if d := sc.dirs[ctrlCPU]; d != "" {
		if _, err := os.Stat(filepath.Join(d, "cpuacct.usage")); err == nil {
			sc.acct = d
			return
		}
	}
	parent := h.parent[ctrlCPUAcct]
	if parent == "" {
		return
	}
	dir := filepath.Join(parent, sc.id)
	if err := mkdirCgroup(parent, dir); err != nil {
		return // only accounting: the step's rusage stands in
	}
	sc.made = append(sc.made, dir)
	sc.acct = dir
}

// createV2 makes one cgroup for every controller in use, enabling them
// down from the configured parent (or vouch's own cgroup). Enabling fails
// with EBUSY when that cgroup holds processes: the operator then names an
// empty, delegated parent.
func (h *cgroupHost) createV2(sc *stepCgroup, use []string, want cgroupWant) {
	vdir := h.parent[use[0]]
	base := filepath.Dir(vdir)
	fail := func(err error) {
		for _, c := range use {
			sc.why[c] = err.Error()
		}
	}
	enable := func(dir string, cs []string) []string {
		var ok []string
		for _, c := range cs {
			cur, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
			if hasField(string(cur), c) {
				ok = append(ok, c)
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+c), 0); err != nil {
				sc.why[c] = fmt.Sprintf("enable %s in %s: %v", c, dir, err)
				continue
			}
			ok = append(ok, c)
		}
		return ok
	}
	use = enable(base, use)
	if len(use) == 0 {
		return
	}
	if err := os.Mkdir(vdir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		fail(fmt.Errorf("mkdir %s: %w", vdir, err))
		return
	}
	use = enable(vdir, use)
	if len(use) == 0 {
		return
	}
	dir := filepath.Join(vdir, sc.id)
	if err := os.Mkdir(dir, 0o755); err != nil {
		fail(fmt.Errorf("mkdir %s: %w", dir, err))
		return
	}
	sc.made = append(sc.made, dir)
	for _, c := range use {
		var err error
		switch c {
		case ctrlMemory:
			err = writeCgroupFile(dir, "memory.max", strconv.FormatInt(want.memory, 10))
			if err == nil {
				if _, serr := os.Stat(filepath.Join(dir, "memory.swap.max")); serr == nil {
					err = writeCgroupFile(dir, "memory.swap.max", "0")
					sc.swap = err == nil
				}
			}
		case ctrlPids:
			err = writeCgroupFile(dir, "pids.max", strconv.Itoa(want.pids))
		case ctrlCPU:
			err = writeCgroupFile(dir, "cpu.max", fmt.Sprintf("%d %d", cpuQuota(want.cpus), cfsPeriod))
		}
		if err != nil {
			sc.why[c] = err.Error()
			continue
		}
		sc.dirs[c] = dir
	}
}

// mkdirCgroup makes dir, a step cgroup, and its parent "vouch" directory
// when missing. The step directory must be new.
func mkdirCgroup(parent, dir string) error {
	if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("mkdir %s: %w", parent, err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("mkdir %s: %w", dir, err)
	}
	return nil
}

// writeLimitsV1 writes the limit of controller c into its v1 cgroup dir.
func writeLimitsV1(sc *stepCgroup, c, dir string, want cgroupWant) error {
	switch c {
	case ctrlMemory:
		if err := writeCgroupFile(dir, "memory.limit_in_bytes", strconv.FormatInt(want.memory, 10)); err != nil {
			return err
		}
		// memsw bounds memory plus swap: equal to the memory limit, no swap.
		if _, err := os.Stat(filepath.Join(dir, "memory.memsw.limit_in_bytes")); err == nil {
			if err := writeCgroupFile(dir, "memory.memsw.limit_in_bytes", strconv.FormatInt(want.memory, 10)); err != nil {
				return err
			}
			sc.swap = true
		}
	case ctrlPids:
		return writeCgroupFile(dir, "pids.max", strconv.Itoa(want.pids))
	case ctrlCPU:
		if err := writeCgroupFile(dir, "cpu.cfs_period_us", strconv.Itoa(cfsPeriod)); err != nil {
			return err
		}
		return writeCgroupFile(dir, "cpu.cfs_quota_us", strconv.FormatInt(cpuQuota(want.cpus), 10))
	}
	return nil
}

// cpuQuota is the CFS quota in microseconds per period for cpus CPUs; the
// kernel refuses less than 1 ms.
func cpuQuota(cpus float64) int64 {
	return max(int64(cpus*cfsPeriod), 1000)
}

// writeCgroupFile writes value to a cgroup interface file.
func writeCgroupFile(dir, name, value string) error {
	if err := os.WriteFile(filepath.Join(dir, name), []byte(value), 0); err != nil {
		return fmt.Errorf("write %s=%s: %w", name, value, err)
	}
	return nil
}

// enforced reports whether controller c's limit was written.
func (sc *stepCgroup) enforced(c string) bool {
	return sc.dirs[c] != ""
}

// uniqueDirs lists each directory holding a limit once, then the
// accounting one.
func (sc *stepCgroup) uniqueDirs() []string {
	var ds []string
	for _, c := range stepControllers {
		if d := sc.dirs[c]; d != "" && !slices.Contains(ds, d) {
			ds = append(ds, d)
		}
	}
	if sc.acct != "" && !slices.Contains(ds, sc.acct) {
		ds = append(ds, sc.acct)
	}
	return ds
}

// add moves each pid (its whole thread group) into every enforcing cgroup.
// Whatever the processes start afterwards is born there.
func (sc *stepCgroup) add(pids ...int) error {
	for _, d := range sc.uniqueDirs() {
		for _, pid := range pids {
			if err := writeCgroupFile(d, "cgroup.procs", strconv.Itoa(pid)); err != nil {
				return fmt.Errorf("move pid %d into %s: %w", pid, d, err)
			}
		}
	}
	return nil
}

// mechanism names what enforces controller c: "cgroup-v1:memory",
// "cgroup-v2:memory.max", ...
func (sc *stepCgroup) mechanism(c string) string {
	if sc.version == 2 {
		return "cgroup-v2:" + map[string]string{ctrlMemory: "memory.max", ctrlPids: "pids.max", ctrlCPU: "cpu.max", "swap": "memory.swap.max"}[c]
	}
	if c == "swap" {
		return "cgroup-v1:memory.memsw"
	}
	return "cgroup-v1:" + c
}

// destroy kills whatever is left in the step's cgroups, waits until they
// are empty, reads whether the memory controller killed anything and the
// CPU time used, and removes them. It is called after the step was reaped,
// so normally nothing is left to kill.
func (sc *stepCgroup) destroy(deadline time.Time) (cgroupStats, error) {
	var errs []error
	for _, d := range sc.uniqueDirs() {
		if err := emptyCgroup(d, sc.version, deadline); err != nil {
			errs = append(errs, err)
		}
	}
	var st cgroupStats
	if d := sc.dirs[ctrlMemory]; d != "" {
		st.oomKilled = oomKills(d, sc.version) > 0
	}
	if sc.acct != "" {
		st.cpu, st.cpuKnown = cpuUsage(sc.acct, sc.version)
	}
	for i := len(sc.made) - 1; i >= 0; i-- {
		if err := rmdirCgroup(sc.made[i], deadline); err != nil {
			errs = append(errs, err)
		}
	}
	return st, errors.Join(errs...)
}

// cpuUsage reads the CPU time the cgroup dir has used: cpuacct.usage (ns)
// on v1, usage_usec of cpu.stat on v2.
func cpuUsage(dir string, version int) (time.Duration, bool) {
	if version == 2 {
		data, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
		if err != nil {
			return 0, false
		}
		for line := range strings.SplitSeq(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
				us, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				return time.Duration(us) * time.Microsecond, err == nil
			}
		}
		return 0, false
	}
	data, err := os.ReadFile(filepath.Join(dir, "cpuacct.usage"))
	if err != nil {
		return 0, false
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return time.Duration(ns), err == nil
}

// emptyCgroup SIGKILLs every process in dir until none is left: through
// cgroup.kill on v2 when the kernel has it, else one by one through pidfds,
// each checked to still be a member before it is signalled.
func emptyCgroup(dir string, version int, deadline time.Time) error {
	if version == 2 {
		if err := writeCgroupFile(dir, "cgroup.kill", "1"); err == nil {
			return waitCgroupEmpty(dir, deadline)
		}
	}
	for {
		pids, err := cgroupPids(dir)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			killMember(pid, filepath.Base(dir))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s still holds %v", dir, pids)
		}
		time.Sleep(time.Millisecond)
	}
}

// killMember SIGKILLs pid through a pidfd if, once pinned, it is still in
// a cgroup named id (so a reused pid is never hit).
func killMember(pid int, id string) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil || !bytes.Contains(data, []byte("/"+id+"\n")) {
		return
	}
	unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) //nolint:errcheck // ESRCH once gone
}

// waitCgroupEmpty polls cgroup.procs until it is empty.
func waitCgroupEmpty(dir string, deadline time.Time) error {
	for {
		pids, err := cgroupPids(dir)
		if err != nil || len(pids) == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s still holds %v", dir, pids)
		}
		time.Sleep(time.Millisecond)
	}
}

// cgroupPids reads the pids of dir's cgroup.procs.
func cgroupPids(dir string) ([]int, error) {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, fmt.Errorf("read %s/cgroup.procs: %w", dir, err)
	}
	var pids []int
	for f := range strings.FieldsSeq(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// oomKills reads how many processes the memory controller killed in dir.
func oomKills(dir string, version int) int64 {
	name := "memory.oom_control"
	if version == 2 {
		name = "memory.events"
	}
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// rmdirCgroup removes an empty cgroup, retrying while the kernel still
// counts exiting tasks in it.
func rmdirCgroup(dir string, deadline time.Time) error {
	for {
		err := unix.Rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("rmdir %s: %w", dir, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// whyFor says why the limit named name (as in AppliedLimit) got no cgroup.
func (sc *stepCgroup) whyFor(name string) string {
	if sc == nil {
		return "no cgroups"
	}
	c := map[string]string{"memory": ctrlMemory, "pids": ctrlPids, "cpu-time": ctrlCPU}[name]
	return sc.why[c]
}
