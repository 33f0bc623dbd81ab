package bot

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"vouch.dev/vouch/evidence"
	"vouch.dev/vouch/fixtures"
	"vouch.dev/vouch/gate"
	"vouch.dev/vouch/sandbox"
)

// The hostile catalogue, PR-style: base's recipe runs every script a pull
// request adds under pr/ (head code the gate admits, as any project that
// runs its contributors' tests does), and the head adds the attack. Each
// test checks the attack's effect from outside, on the host, and where it
// is cheap runs the same script on the host, outside the sandbox, as a
// control that shows the check can fail.

// attack is one hostile pull request.
type attack struct {
	env     map[string]string // base recipe's env
	limits  string            // base recipe's limits, a YAML flow mapping
	timeout string            // the step's timeout; 20s when empty
	script  string            // pr/attack.sh in head
	keep    bool              // keep workspaces so the test can look into them
}

// hostileRunner is a sandbox runner whose workspaces live under a fresh
// directory, kept after each step only when keep is set.
func hostileRunner(t *testing.T, keep bool) (*sandbox.Runner, string) {
	t.Helper()
	requireBwrap(t)
	root := traversable(t)
	cfg := sandbox.DefaultConfig()
	cfg.WorkRoot = filepath.Join(root, "work")
	cfg.KeepWorkspace = keep
	r, err := sandbox.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("sandbox.New: %v", err)
	}
	return r, cfg.WorkRoot
}

// traversable returns a fresh directory the sandbox uid can pass through.
func traversable(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// token is a fresh random name part, so host-side effects and processes of
// this test cannot be confused with anything else's.
func token() string { return strings.ToLower(rand.Text()[:16]) }

// recipeFor is base's .vouch.yml for a.
func recipeFor(a attack) string {
	var y strings.Builder
	y.WriteString("version: 1\n")
	if len(a.env) > 0 {
		y.WriteString("env:\n")
		for _, k := range slices.Sorted(maps.Keys(a.env)) {
			fmt.Fprintf(&y, "  %s: %q\n", k, a.env[k])
		}
	}
	if a.limits != "" {
		fmt.Fprintf(&y, "limits: %s\n", a.limits)
	}
	timeout := a.timeout
	if timeout == "" {
		timeout = "20s"
	}
	fmt.Fprintf(&y, "steps:\n  - name: pr\n    run: [\"sh\", \"-c\", \"for f in pr/*.sh; do sh \\\"$f\\\"; done\"]\n    timeout: %s\n", timeout)
	return y.String()
}

// pullRequest commits base (the recipe) and head (the recipe and the attack).
func pullRequest(t *testing.T, a attack) (dir, base, head string) {
	t.Helper()
	repo := fixtures.NewRepo(t)
	files := map[string]string{".vouch.yml": recipeFor(a), "README": "a project that runs its contributors' scripts\n"}
	base = repo.Commit("base", fixtures.Files(files))
	files["pr/attack.sh"] = a.script
	head = repo.Commit("head: hostile", fixtures.Files(files), base)
	return repo.Dir, base, head
}

type verified struct {
	rc  evidence.Receipt
	err error
}

// verifyAsync runs Verify in the background, so a test can watch the host
// while the attack runs.
func verifyAsync(t *testing.T, runner *sandbox.Runner, dir, base, head string) <-chan verified {
	ch := make(chan verified, 1)
	go func() {
		rc, err := Verify(t.Context(), slog.New(slog.NewTextHandler(io.Discard, nil)), runner,
			VerifyRequest{RepoDir: dir, Base: base, Head: head, Policy: gate.DefaultPolicy()})
		ch <- verified{rc, err}
	}()
	return ch
}

// executed fails unless v is an isolated run of the one attack step.
func executed(t *testing.T, v verified) evidence.Receipt {
	t.Helper()
	if v.err != nil {
		t.Fatalf("Verify: %v", v.err)
	}
	rc := v.rc
	if !rc.Executed || !rc.Sandbox.Isolated || len(rc.Steps) != 1 {
		t.Fatalf("Verify = %s %s executed=%v isolated=%v steps=%d (%s); want the attack step run, isolated",
			rc.Outcome, rc.Reason, rc.Executed, rc.Sandbox.Isolated, len(rc.Steps), rc.Detail)
	}
	return rc
}

// runAttack verifies a hostile pull request and returns its receipt, the
// attack's output and the runner's work root.
func runAttack(t *testing.T, a attack) (evidence.Receipt, string, string) {
	t.Helper()
	runner, work := hostileRunner(t, a.keep)
	dir, base, head := pullRequest(t, a)
	rc := executed(t, <-verifyAsync(t, runner, dir, base, head))
	return rc, rc.Steps[0].OutputTail, work
}

// onHost runs script with sh on the host, outside any sandbox, in dir, with
// only env (and PATH); as the sandbox's host uid when asSandboxUID is set
// and the test runs as root. It is the control: the same attack without
// the sandbox.
func onHost(t *testing.T, asSandboxUID bool, dir string, env map[string]string, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", script)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if asSandboxUID && os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{
			Uid: sandbox.DefaultUID, Gid: sandbox.DefaultGID, Groups: []uint32{}}}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("control on the host: %v\n%s", err, out)
	}
	return string(out)
}

// sandboxOwned returns a fresh directory owned by the sandbox's host uid
// (when the test is root), for a control that writes where the step would.
func sandboxOwned(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(traversable(t), "cwd")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(dir, sandbox.DefaultUID, sandbox.DefaultGID); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// liveInNamespace lists the live (not zombie) host processes in pid
// namespace ns, or whose command line contains mark.
func liveInNamespace(t *testing.T, ns, mark string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var live []string
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		p := "/proc/" + e.Name()
		link, _ := os.Readlink(p + "/ns/pid")
		cmdline, _ := os.ReadFile(p + "/cmdline")
		if (ns == "" || link != ns) && (mark == "" || !bytes.Contains(cmdline, []byte(mark))) {
			continue
		}
		stat, err := os.ReadFile(p + "/stat")
		if i := bytes.LastIndexByte(stat, ')'); err != nil || i < 0 || bytes.HasPrefix(stat[i:], []byte(") Z")) {
			continue
		}
		live = append(live, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return live
}

// requireNothingLeft fails if any process of the step (its pid namespace,
// or carrying mark on its command line) is alive on the host.
func requireNothingLeft(t *testing.T, rc evidence.Receipt, mark string) {
	t.Helper()
	ns := rc.Sandbox.Namespaces["pid"].Child
	if ns == "" {
		t.Fatal("receipt records no pid namespace")
	}
	if live := liveInNamespace(t, ns, mark); len(live) > 0 {
		t.Fatalf("processes of the step alive after Verify returned: %q", live)
	}
}

// fileState is what the test compares of a host path before and after.
type fileState struct {
	mode         fs.FileMode
	uid, gid     uint32
	nlink        uint64
	size         int64
	mtime, ctime syscall.Timespec
	sum          [32]byte // files only
	names        []string // directories only
}

func stateOf(t *testing.T, path string) fileState {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	s := fileState{mode: fi.Mode(), uid: st.Uid, gid: st.Gid, nlink: st.Nlink, size: fi.Size(), mtime: st.Mtim, ctime: st.Ctim}
	switch {
	case fi.Mode().IsRegular():
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrPermission) {
			break // unprivileged run: size, times and mode still show a change
		}
		if err != nil {
			t.Fatal(err)
		}
		s.sum = sha256.Sum256(b)
	case fi.IsDir():
		entries, err := os.ReadDir(path)
		if errors.Is(err, fs.ErrPermission) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			s.names = append(s.names, e.Name())
		}
	}
	return s
}

func sameState(a, b fileState) bool {
	return a.mode == b.mode && a.uid == b.uid && a.gid == b.gid && a.nlink == b.nlink && a.size == b.size &&
		a.mtime == b.mtime && a.ctime == b.ctime && a.sum == b.sum && slices.Equal(a.names, b.names)
}

// unixListener accepts on network addr and reports every connection on ch.
func unixListener(t *testing.T, network, addr string, ch chan<- string) {
	t.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Fatalf("listen %s %s: %v", network, addr, err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			ch <- addr
			c.Close()
		}
	}()
}

// accepted collects what ch reports until want arrived or wait passed.
func accepted(ch <-chan string, want int, wait time.Duration) []string {
	var got []string
	deadline := time.After(wait)
	for len(got) < want {
		select {
		case a := <-ch:
			got = append(got, a)
		case <-deadline:
			return got
		}
	}
	return got
}

const socketProbe = `exec 2>&1
python3 - <<'EOF'
import os, socket
for name, addr in (("abstract", "\0" + os.environ["ABSTRACT"]), ("path", os.environ["SOCK_PATH"]), ("tmp", os.environ["SOCK_TMP"])):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(addr)
        print(name, "CONNECTED")
    except OSError as e:
        print(name, "refused:", e.strerror)
    finally:
        s.close()
EOF
ls -la "$(dirname "$SOCK_PATH")" "$SOCK_TMP" 2>&1 | head -5
exit 0
`

// TestHostileUnixSockets: a step connects to an abstract AF_UNIX socket and
// to path sockets the host listens on (one in a directory the sandbox uid
// can traverse, one in the host's /tmp, which is a private tmpfs inside);
// no listener accepts anything. The same probe on the host, as the sandbox
// uid, reaches all three: the barrier is the sandbox, not permissions.
func TestHostileUnixSockets(t *testing.T) {
	requireBwrap(t)
	tok := token()
	abstract := "vouch-test-" + tok
	sockPath := filepath.Join(traversable(t), "host.sock")
	sockTmp := filepath.Join(os.TempDir(), "vouch-test-"+tok+".sock")
	t.Cleanup(func() { os.Remove(sockTmp) })
	ch := make(chan string, 16)
	unixListener(t, "unix", "@"+abstract, ch)
	unixListener(t, "unix", sockPath, ch)
	unixListener(t, "unix", sockTmp, ch)
	for _, p := range []string{sockPath, sockTmp} {
		if err := os.Chmod(p, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"ABSTRACT": abstract, "SOCK_PATH": sockPath, "SOCK_TMP": sockTmp}

	ctl := onHost(t, true, "/", env, socketProbe)
	if got := accepted(ch, 3, 5*time.Second); len(got) != 3 || strings.Count(ctl, "CONNECTED") != 3 {
		t.Fatalf("control on the host reached %q, want all three listeners; it said:\n%s", got, ctl)
	}

	rc, out, _ := runAttack(t, attack{env: env, script: socketProbe})
	// The step has exited: whatever it sent is in flight or nowhere.
	if got := accepted(ch, 1, 500*time.Millisecond); len(got) > 0 || strings.Contains(out, "CONNECTED") {
		t.Errorf("host listener reached from the sandbox: %q; step said:\n%s", got, out)
	}
	if rc.Outcome != evidence.Pass {
		t.Errorf("Verify = %s %s, want PASS (the probe always exits 0)", rc.Outcome, rc.Reason)
	}
	t.Logf("step said:\n%s", out)
}

const procProbe = `exec 2>&1
for f in /proc/[0-9]*/environ; do echo "== $f"; tr '\0' '\n' < "$f"; done
p=/proc/$VOUCH_PID
if [ -e "$p" ]; then echo "present $p"; else echo "absent $p"; fi
tr '\0' '\n' < "$p/environ"
readlink "$p/cwd" "$p/root"
ls "$p/cwd/" 2>&1 | head -3
exit 0
`

// TestHostileProcOfVouch: a step reads every /proc/*/environ it sees and
// vouch's own /proc/<pid>/{environ,cwd,root} (the pid handed to it in the
// recipe's env). Nothing of vouch's environment shows: neither the
// variables it was started with (what /proc/<pid>/environ holds) nor a
// canary it set before launching (what bwrap, pid 1's image inside, would
// inherit); nor its working directory; vouch's /proc entry does not exist
// in the step's pid namespace. The same probe on the host does show them.
func TestHostileProcOfVouch(t *testing.T) {
	requireBwrap(t)
	canary := "vouch-proc-canary-" + token()
	t.Setenv("VOUCH_HOSTILE_CANARY", canary)
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(os.Getpid())
	env := map[string]string{"VOUCH_PID": pid}
	// vouch's environment as /proc shows it: the one it was started with,
	// without the variables a step has anyway.
	raw, err := os.ReadFile("/proc/self/environ")
	if err != nil {
		t.Fatal(err)
	}
	var own []string
	for _, kv := range strings.Split(string(raw), "\x00") {
		k, v, _ := strings.Cut(kv, "=")
		if len(v) >= 8 && !slices.Contains([]string{"PATH", "HOME", "USER", "TMPDIR", "LANG", "CI", "PWD", "OLDPWD", "SHLVL", "_", "TERM"}, k) {
			own = append(own, kv)
		}
	}

	ctl := onHost(t, false, "/", env, procProbe)
	if !strings.Contains(ctl, cwd) || !strings.Contains(ctl, "present /proc/"+pid) {
		t.Fatalf("control on the host did not see vouch's /proc entry and cwd %s; the probe proves nothing", cwd)
	}
	for _, kv := range own {
		if !strings.Contains(ctl, kv) {
			t.Fatalf("control on the host did not see vouch's variable %s; the probe proves nothing", strings.SplitN(kv, "=", 2)[0])
		}
	}

	_, out, _ := runAttack(t, attack{env: env, script: procProbe})
	for _, kv := range append(own, canary) {
		if strings.Contains(out, kv) {
			// Name only: the value may be a secret of the CI host.
			t.Errorf("vouch's environment variable %s readable from the sandbox", strings.SplitN(kv, "=", 2)[0])
		}
	}
	switch cwd {
	case "/", "/tmp", "/work", "/home/vouch", "/usr":
		t.Logf("vouch's working directory %s exists in the sandbox by design; not checked", cwd)
	default:
		if strings.Contains(out, cwd) {
			t.Errorf("vouch's working directory %s visible from the sandbox", cwd)
		}
	}
	if os.Getpid() > 100 && !strings.Contains(out, "absent /proc/"+pid) {
		t.Errorf("vouch's pid %s exists in the step's pid namespace", pid)
	}
	t.Logf("checked %d of vouch's variables and a canary", len(own))
}

const writeProbe = `exec 2>&1
for d in /usr /usr/local /usr/lib /etc / /home "$OUTSIDE"; do
  if touch "$d/vouch-hostile-$TOKEN" 2>/dev/null; then echo "WROTE $d"; else echo "denied $d"; fi
done
if mkdir "/usr/local/vouch-hostile-$TOKEN.d" 2>/dev/null; then echo "WROTE mkdir /usr/local"; fi
if echo "evil:x:0:0::/:/bin/sh" >> /etc/passwd 2>/dev/null; then echo "WROTE /etc/passwd"; fi
if true > /usr/bin/env 2>/dev/null; then echo "WROTE /usr/bin/env"; fi
exit 0
`

// TestHostileWritesOutsideWorkspace: a step writes to /usr, /usr/local,
// /etc, /, /home, truncates /usr/bin/env, appends to /etc/passwd, and
// writes to a world-writable host directory outside its workspace: no new
// file appears on the host and the files are unchanged. The same probe on
// the host as the sandbox uid does write into the world-writable directory.
func TestHostileWritesOutsideWorkspace(t *testing.T) {
	requireBwrap(t)
	tok := token()
	outside := filepath.Join(traversable(t), "open")
	if err := os.Mkdir(outside, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(outside, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	env := map[string]string{"TOKEN": tok, "OUTSIDE": outside}
	dirs := []string{"/usr", "/usr/local", "/usr/lib", "/etc", "/", "/home", outside}
	watched := []string{"/etc/passwd", "/usr/bin/env"}
	before := map[string]fileState{}
	for _, p := range watched {
		before[p] = stateOf(t, p)
	}

	ctl := onHost(t, true, "/", env, writeProbe)
	planted := filepath.Join(outside, "vouch-hostile-"+tok)
	if _, err := os.Stat(planted); err != nil || !strings.Contains(ctl, "WROTE "+outside) {
		t.Fatalf("control on the host could not write into %s (%v); the probe proves nothing:\n%s", outside, err, ctl)
	}
	if err := os.Remove(planted); err != nil {
		t.Fatal(err)
	}

	_, out, _ := runAttack(t, attack{env: env, script: writeProbe})
	if strings.Contains(out, "WROTE") {
		t.Errorf("the step says it wrote outside its workspace:\n%s", out)
	}
	for _, d := range dirs {
		for _, name := range []string{"vouch-hostile-" + tok, "vouch-hostile-" + tok + ".d"} {
			if _, err := os.Lstat(filepath.Join(d, name)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("host %s/%s: %v; want it absent", d, name, err)
				os.Remove(filepath.Join(d, name))
			}
		}
	}
	for _, p := range watched {
		if !sameState(before[p], stateOf(t, p)) {
			t.Errorf("host %s changed during the step", p)
		}
	}
}

const fillProbe = `exec 2>&1
python3 - <<'EOF'
import errno, os
chunk = b"\1" * (1 << 20)
for d in ("/tmp", os.environ["HOME"]):
    n, err = 0, "none"
    try:
        with open(os.path.join(d, "fill"), "wb", buffering=0) as f:
            while n < 64 << 20:
                n += f.write(chunk)
    except OSError as e:
        err = errno.errorcode.get(e.errno, str(e.errno))
    print("fill", d, n, err)
EOF
exit 0
`

// TestHostileFillTmpAndHome: with limits.tmp 8MiB, a step writing 64 MiB
// into /tmp and into HOME is stopped near 8 MiB in each with ENOSPC, and
// the free space of the host disk holding the workspaces is not reduced by
// what it wrote.
func TestHostileFillTmpAndHome(t *testing.T) {
	requireBwrap(t)
	runner, work := hostileRunner(t, false)
	dir, base, head := pullRequest(t, attack{limits: "{tmp: 8MiB}", script: fillProbe})
	if err := os.MkdirAll(work, 0o711); err != nil {
		t.Fatal(err)
	}
	free := func() int64 {
		var st unix.Statfs_t
		if err := unix.Statfs(work, &st); err != nil {
			t.Fatal(err)
		}
		return int64(st.Bavail) * st.Bsize
	}
	freeBefore := free()
	rc := executed(t, <-verifyAsync(t, runner, dir, base, head))
	freeAfter := free()
	out := rc.Steps[0].OutputTail

	const limit = 8 << 20
	for _, d := range []string{"/tmp", "/home/vouch"} {
		var n int64
		var errName string
		found := false
		for line := range strings.Lines(out) {
			if f := strings.Fields(line); len(f) == 4 && f[0] == "fill" && f[1] == d {
				n, _ = strconv.ParseInt(f[2], 10, 64)
				errName, found = f[3], true
			}
		}
		switch {
		case !found:
			t.Errorf("no fill result for %s:\n%s", d, out)
		case errName != "ENOSPC" || n > limit:
			t.Errorf("filling %s wrote %d bytes and ended with %s; want at most %d and ENOSPC", d, n, errName, limit)
		case n < limit/2:
			t.Errorf("filling %s stopped at %d bytes, well below the %d limit: something else stopped it", d, n, limit)
		}
	}
	// The step tried 128 MiB; a tmpfs on the host's disk would show it.
	if used := freeBefore - freeAfter; used > 32<<20 {
		t.Errorf("host disk free space fell by %d MiB during the step", used>>20)
	}
	t.Logf("step said:\n%s(host free space change %d KiB)", out, (freeBefore-freeAfter)>>10)
}

const bombProbe = `exec 2>&1
python3 - "$TOKEN" <<'EOF'
import os, signal
root = os.getpid()
while True:
    try:
        os.fork()
    except OSError:
        break
if os.getpid() == root:
    n = sum(1 for d in os.listdir("/proc") if d.isdigit())
    with open("bomb-full", "w") as f:
        f.write(str(n))
    print("bomb full at", n, "processes", flush=True)
while True:
    signal.pause()
EOF
`

// TestHostileForkBomb: a fork bomb (every process forks until refused, then
// waits forever) under limits.pids 32 is stopped at the limit: counted from
// the host while it holds, its processes never exceed 32; the host still
// starts processes, also as the sandbox uid; the timeout ends the step and
// none of its processes is alive afterwards.
func TestHostileForkBomb(t *testing.T) {
	requireBwrap(t)
	const pids = 32
	tok := token()
	runner, work := hostileRunner(t, true)
	dir, base, head := pullRequest(t, attack{env: map[string]string{"TOKEN": tok},
		limits: fmt.Sprintf("{pids: %d}", pids), timeout: "2s", script: bombProbe})
	done := verifyAsync(t, runner, dir, base, head)

	var (
		v       verified
		full    bool
		maxSeen int
	)
	deadline := time.Now().Add(10 * time.Second)
wait:
	for time.Now().Before(deadline) {
		select {
		case v = <-done:
			break wait
		default:
		}
		live := liveInNamespace(t, "", tok)
		maxSeen = max(maxSeen, len(live))
		if m, _ := filepath.Glob(filepath.Join(work, "run-*", "ws", "bomb-full")); len(m) > 0 && !full {
			full = true
			// The host is unaffected: it still starts processes, also as
			// the sandbox's host uid.
			onHost(t, true, "/", nil, "true")
			onHost(t, false, "/", nil, "true")
		}
		time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
	}
	if v.rc.Outcome == "" && v.err == nil {
		t.Fatal("Verify did not return within 10s of a 2s timeout")
	}
	rc := executed(t, v)
	if !full {
		t.Fatalf("the bomb never reported itself full; step said:\n%s", rc.Steps[0].OutputTail)
	}
	if maxSeen > pids {
		t.Errorf("counted %d bomb processes from the host, over the pids limit %d", maxSeen, pids)
	}
	if maxSeen < pids/2 {
		t.Errorf("at most %d bomb processes seen: the bomb did not bomb (limit %d)", maxSeen, pids)
	}
	if rc.Outcome != evidence.Fail || rc.Reason != evidence.ReasonTimeout {
		t.Errorf("Verify = %s %s, want FAIL TIMEOUT", rc.Outcome, rc.Reason)
	}
	requireNothingLeft(t, rc, tok)
	t.Logf("bomb: at most %d processes seen from the host (limit %d); step said %q", maxSeen, pids, rc.Steps[0].OutputTail)
}

const spinProbe = `exec 2>&1
python3 - "$TOKEN" <<'EOF'
import os, signal
for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
    signal.signal(s, signal.SIG_IGN)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        while True:
            pass  # an orphan in its own session, spinning
    os._exit(0)
print("spinning", flush=True)
while True:
    pass
EOF
`

// TestHostileSpinPastTimeout: a step that spins on the CPU, ignores
// SIGTERM and leaves a setsid'd double-forked spinning orphan is killed at
// its timeout, with nothing left alive; both spinners were seen running.
func TestHostileSpinPastTimeout(t *testing.T) {
	requireBwrap(t)
	tok := token()
	runner, _ := hostileRunner(t, false)
	dir, base, head := pullRequest(t, attack{env: map[string]string{"TOKEN": tok}, timeout: "1s", script: spinProbe})
	done := verifyAsync(t, runner, dir, base, head)
	var v verified
	maxSeen := 0
	deadline := time.Now().Add(10 * time.Second)
wait:
	for time.Now().Before(deadline) {
		select {
		case v = <-done:
			break wait
		default:
		}
		maxSeen = max(maxSeen, len(liveInNamespace(t, "", tok)))
		time.Sleep(5 * time.Millisecond) // polling a condition with a deadline
	}
	if v.rc.Outcome == "" && v.err == nil {
		t.Fatal("Verify did not return within 10s of a 1s timeout")
	}
	rc := executed(t, v)
	if rc.Outcome != evidence.Fail || rc.Reason != evidence.ReasonTimeout {
		t.Errorf("Verify = %s %s, want FAIL TIMEOUT", rc.Outcome, rc.Reason)
	}
	if maxSeen < 2 {
		t.Errorf("saw %d spinning processes from the host, want the spinner and its orphan", maxSeen)
	}
	requireNothingLeft(t, rc, tok)
}

const syscallProbe = `exec 2>&1
python3 - <<'EOF'
import ctypes, errno, os, time
libc = ctypes.CDLL(None, use_errno=True)
def sc(label, nr, *args):
    args = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    r = libc.syscall(ctypes.c_long(nr), *args)
    e = ctypes.get_errno()
    print(label, "ok" if r != -1 else errno.errorcode.get(e, e), flush=True)
    return r

# ptrace a sibling: a child that sleeps.
pid = os.fork()
if pid == 0:
    time.sleep(30)
    os._exit(0)
sc("ptrace_attach", 101, 16, pid, 0, 0)
tracer = [l.split()[1] for l in open("/proc/%d/status" % pid) if l.startswith("TracerPid:")][0]
print("sibling_tracer", tracer)
os.kill(pid, 9)
os.waitpid(pid, 0)

# mount a tmpfs over mnt/, then write a marker there.
os.mkdir("mnt")
sc("mount", 165, ctypes.c_char_p(b"none"), ctypes.c_char_p(os.path.abspath("mnt").encode()), ctypes.c_char_p(b"tmpfs"), 0, 0)
open("mnt/MOUNT-MARKER", "w").close()

# new user and mount namespaces.
sc("unshare", 272, 0x10000000 | 0x00020000)

# read the host's key by its serial.
buf = ctypes.create_string_buffer(256)
n = sc("keyctl_read", 250, 11, int(os.environ["KEY_ID"]), buf, 256)
if n > 0:
    print("key", buf.raw[:n].decode(errors="replace"))
sc("add_key", 248, ctypes.c_char_p(b"user"), ctypes.c_char_p(b"planted"), ctypes.c_char_p(b"x"), 1, -1)  # a thread keyring: gone at exit
EOF
exit 0
`

// Key permission bits (linux/keyctl.h) not in x/sys/unix.
const (
	keyPosAll  = 0x3f000000
	keyUsrAll  = 0x003f0000
	keyOthView = 0x00000001
	keyOthRead = 0x00000002
)

// TestHostileSyscalls: a step ptraces a sibling, mounts a tmpfs, unshares
// user and mount namespaces and reads a key the host put in its keyring
// (readable by any uid, so only the sandbox stands in the way). Each call
// fails with EPERM; the sibling is never traced; the marker written "into
// the mount" lands in the workspace on the host (nothing was mounted); the
// key's secret is not in the output. The same probe on the host as the
// sandbox uid does attach and does read the secret.
func TestHostileSyscalls(t *testing.T) {
	requireBwrap(t)
	secret := "vouch-key-secret-" + token()
	id, err := unix.AddKey("user", "vouch-canary-"+token(), []byte(secret), unix.KEY_SPEC_USER_KEYRING)
	if err == nil {
		t.Cleanup(func() { unix.KeyctlInt(unix.KEYCTL_UNLINK, id, unix.KEY_SPEC_USER_KEYRING, 0, 0) })
		err = unix.KeyctlSetperm(id, keyPosAll|keyUsrAll|keyOthView|keyOthRead)
	}
	if err != nil {
		// A container runtime may deny keyctl to the test itself; the
		// step's keyctl calls are still tried, against no key.
		t.Logf("no host key for the keyctl attempt: %v", err)
		id, secret = 0, ""
	}
	env := map[string]string{"KEY_ID": strconv.Itoa(id)}

	ctl := onHost(t, true, sandboxOwned(t), env, syscallProbe)
	if !strings.Contains(ctl, "ptrace_attach ok") || !strings.Contains(ctl, secret) {
		t.Fatalf("control on the host as the sandbox uid could not ptrace or read the key; the probe proves nothing:\n%s", ctl)
	}

	_, out, work := runAttack(t, attack{env: env, script: syscallProbe, keep: true})
	for _, want := range []string{"ptrace_attach EPERM", "sibling_tracer 0", "mount EPERM", "unshare EPERM", "keyctl_read EPERM", "add_key EPERM"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if secret != "" && strings.Contains(out, secret) {
		t.Errorf("the host's key was read from the sandbox")
	}
	if m, _ := filepath.Glob(filepath.Join(work, "run-*", "ws", "mnt", "MOUNT-MARKER")); len(m) != 1 {
		t.Errorf("marker not in the workspace's mnt/ on the host (%q): the step's mount took effect", m)
	}
	if t.Failed() {
		t.Logf("step said:\n%s", out)
	}
}

const ptyProbe = `exec 2>&1
python3 - <<'EOF'
import ctypes, errno, os, termios
libc = ctypes.CDLL(None, use_errno=True)
TIOCSTI, TIOCINQ = 0x5412, 0x541B
def ioctl(fd, cmd, arg):
    r = libc.syscall(ctypes.c_long(16), ctypes.c_long(fd), ctypes.c_ulong(cmd), arg)
    return "ok" if r == 0 else errno.errorcode.get(ctypes.get_errno(), "?")

try:
    fd = os.open(os.environ["HOST_PTY"], os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    c = ctypes.c_char(b"H")
    print("host_pty opened; tiocsti", ioctl(fd, TIOCSTI, ctypes.byref(c)))
except OSError as e:
    print("host_pty", errno.errorcode.get(e.errno, e.errno))

m, s = os.openpty()
name = os.ttyname(s)
pid = os.fork()
if pid == 0:
    os.setsid()
    t = os.open(name, os.O_RDWR)  # now the controlling terminal
    a = termios.tcgetattr(t)
    a[3] = (a[3] & ~termios.ICANON) | termios.ECHO
    termios.tcsetattr(t, termios.TCSANOW, a)
    for label, cmd, ch in (("tiocsti", TIOCSTI, b"X"), ("tiocsti_hi", TIOCSTI | 1 << 32, b"Y")):
        c = ctypes.c_char(ch)
        print(label, ioctl(t, cmd, ctypes.byref(c)), flush=True)
    n = ctypes.c_int(0)
    ioctl(t, TIOCINQ, ctypes.byref(n))
    print("queued", n.value, flush=True)
    os._exit(0)
os.waitpid(pid, 0)
os.set_blocking(m, False)
try:
    echoed = os.read(m, 64)
except BlockingIOError:
    echoed = b""
print("echoed", repr(echoed.decode(errors="replace")))
EOF
exit 0
`

// hostPty opens a pty pair the test owns, non-canonical so that one
// injected byte is counted in the input queue at once.
func hostPty(t *testing.T) (master, slave int, name string) {
	t.Helper()
	master, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	t.Cleanup(func() { unix.Close(master) })
	if err := unix.IoctlSetPointerInt(master, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(master, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	name = "/dev/pts/" + strconv.Itoa(n)
	slave, err = unix.Open(name, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatalf("open %s: %v", name, err)
	}
	t.Cleanup(func() { unix.Close(slave) })
	tio, err := unix.IoctlGetTermios(slave, unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	tio.Lflag &^= unix.ICANON | unix.ECHO
	if err := unix.IoctlSetTermios(slave, unix.TCSETS, tio); err != nil {
		t.Fatal(err)
	}
	return master, slave, name
}

// TestHostileTIOCSTI: a step cannot reach the pty the test owns (its path
// is absent from the sandbox's own /dev), and in a pty of its own TIOCSTI
// and TIOCSTI|1<<32 both fail: nothing reaches the input queue or the echo.
// The host pty's queue stays empty until the test itself injects (the
// control for the host-side check), and the same probe on the host as the
// sandbox uid does inject into its own pty (the control for the inside one).
func TestHostileTIOCSTI(t *testing.T) {
	requireBwrap(t)
	master, slave, name := hostPty(t)
	env := map[string]string{"HOST_PTY": name}

	ctl := onHost(t, true, "/", env, ptyProbe)
	if !strings.Contains(ctl, "tiocsti ok") || !strings.Contains(ctl, "queued 2") {
		t.Fatalf("control on the host as the sandbox uid could not inject into its own pty; the probe proves nothing:\n%s", ctl)
	}

	_, out, _ := runAttack(t, attack{env: env, script: ptyProbe})
	for _, want := range []string{"host_pty ENOENT", "tiocsti EPERM", "tiocsti_hi EPERM", "queued 0", "echoed ''"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if n, err := unix.IoctlGetInt(slave, unix.TIOCINQ); err != nil || n != 0 {
		t.Errorf("host pty input queue holds %d bytes (%v) after the step", n, err)
	}
	buf := make([]byte, 64)
	if n, err := unix.Read(master, buf); n > 0 {
		t.Errorf("host pty master received %q after the step", buf[:n])
	} else if !errors.Is(err, unix.EAGAIN) {
		t.Errorf("read host pty master: %v", err)
	}
	// Control: the test's own injection is seen by the same check.
	c := byte('Z')
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(slave), unix.TIOCSTI, uintptr(unsafe.Pointer(&c))); errno != 0 {
		t.Logf("control injection by the test refused (%v); host-side check unproven", errno)
	} else if n, err := unix.IoctlGetInt(slave, unix.TIOCINQ); err != nil || n != 1 {
		t.Errorf("after the test's own injection the queue holds %d (%v), want 1: the host-side check proves nothing", n, err)
	}
	if t.Failed() {
		t.Logf("step said:\n%s", out)
	}
}

const plantProbe = `exec 2>&1
ln -s /etc/shadow escape
ln -s /root dir
ln -s / rootlink
ln -s "$VICTIM" victim
ln -s "$(dirname "$VICTIM")" victimdir
ln /usr/bin/env env-hardlink; echo "hardlink exit $?"
mkdir -p locked/deep
ln -s /etc locked/deep/etc
ln -s "$VICTIM" locked/victim
chmod 000 locked/deep locked
chmod 777 .
echo planted
exit 0
`

// TestHostileSymlinksPlantedDuringRun: a step plants symlinks to
// /etc/shadow, /root, / and a host file outside the workspace (some inside
// directories it locks with mode 000), and tries to hardlink /usr/bin/env
// (EXDEV: /usr is another mount). vouch's post-run handling (output
// collection, workspace removal) follows none of them: every target is
// unchanged, to the ctime, and the workspace is gone. A run that keeps its
// workspace shows the links were planted.
func TestHostileSymlinksPlantedDuringRun(t *testing.T) {
	requireBwrap(t)
	victimDir := filepath.Join(traversable(t), "victim-dir")
	if err := os.Mkdir(victimDir, 0o755); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(victimDir, "victim")
	if err := os.WriteFile(victim, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"VICTIM": victim}
	watched := []string{"/etc/shadow", "/root", "/etc", "/", "/usr/bin/env", victim, victimDir}
	before := map[string]fileState{}
	for _, p := range watched {
		before[p] = stateOf(t, p)
	}
	a := attack{env: env, script: plantProbe}

	t.Run("kept: the links were planted", func(t *testing.T) {
		a := a
		a.keep = true
		_, out, work := runAttack(t, a)
		// The kept workspace holds a mode-000 directory: open it up before
		// the temp dir is removed (root would not need this; nobody does).
		t.Cleanup(func() {
			filepath.WalkDir(work, func(p string, d fs.DirEntry, err error) error { //nolint:errcheck // best effort
				if d != nil && d.IsDir() && d.Type()&fs.ModeSymlink == 0 {
					os.Chmod(p, 0o700) //nolint:errcheck // best effort
				}
				return nil
			})
		})
		if !strings.Contains(out, "planted") || !strings.Contains(out, "Invalid cross-device link") {
			t.Errorf("step output %q: want it planted and the hardlink refused with EXDEV", out)
		}
		ws, _ := filepath.Glob(filepath.Join(work, "run-*", "ws"))
		if len(ws) != 1 {
			t.Fatalf("kept workspaces: %q", ws)
		}
		for name, target := range map[string]string{"escape": "/etc/shadow", "dir": "/root", "rootlink": "/", "victim": victim, "victimdir": victimDir} {
			if got, err := os.Readlink(filepath.Join(ws[0], name)); err != nil || got != target {
				t.Errorf("planted %s -> %q (%v), want -> %s", name, got, err, target)
			}
		}
		if _, err := os.Lstat(filepath.Join(ws[0], "env-hardlink")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("hardlink to /usr/bin/env exists in the workspace: %v", err)
		}
	})
	t.Run("removed: nothing followed", func(t *testing.T) {
		_, _, work := runAttack(t, a)
		if entries, err := os.ReadDir(work); err != nil || len(entries) != 0 {
			t.Errorf("work root after the run: %v %v; want it empty", entries, err)
		}
	})
	for _, p := range watched {
		if !sameState(before[p], stateOf(t, p)) {
			t.Errorf("host %s changed: %+v, was %+v", p, stateOf(t, p), before[p])
		}
	}
}
