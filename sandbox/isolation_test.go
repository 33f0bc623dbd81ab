package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"vouch.dev/vouch/gate"
)

// listeners are a TCP and a UDP listener on the host's 127.0.0.1 that report
// every connection and datagram they receive.
type listeners struct {
	tcpPort, udpPort int
	conns, packets   chan string
}

func listen(tb testing.TB) *listeners {
	tb.Helper()
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ul, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { tl.Close(); ul.Close() })
	l := &listeners{
		tcpPort: tl.Addr().(*net.TCPAddr).Port, udpPort: ul.LocalAddr().(*net.UDPAddr).Port,
		conns: make(chan string, 16), packets: make(chan string, 16),
	}
	go func() {
		for {
			c, err := tl.Accept()
			if err != nil {
				return
			}
			l.conns <- c.RemoteAddr().String()
			c.Close()
		}
	}()
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := ul.ReadFrom(buf)
			if err != nil {
				return
			}
			l.packets <- fmt.Sprintf("%s: %q", from, buf[:n])
		}
	}()
	return l
}

// probe is a shell script that tries TCP and UDP to the listeners and always
// exits 0: the verdict is taken on the listener side.
func (l *listeners) probe() string {
	return fmt.Sprintf(`exec 2>&1
		echo hello >/dev/udp/127.0.0.1/%[2]d
		echo "udp exit $?"
		python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b"py", ("127.0.0.1", %[2]d))'
		echo "python udp exit $?"
		if exec 3<>/dev/tcp/127.0.0.1/%[1]d; then echo connected >&3; echo "tcp connected"; else echo "tcp failed"; fi
		exit 0`, l.tcpPort, l.udpPort)
}

// expectTraffic waits a bounded time for n connections and m datagrams.
func (l *listeners) received(wait time.Duration) (conns, packets []string) {
	deadline := time.After(wait)
	for {
		select {
		case c := <-l.conns:
			conns = append(conns, c)
		case p := <-l.packets:
			packets = append(packets, p)
		case <-deadline:
			return conns, packets
		}
	}
}

// TestNoNetwork: a step that tries TCP and UDP to a host listener on
// 127.0.0.1 reaches neither. The same probe run on the host reaches both, so
// the listeners and the probe work.
func TestNoNetwork(t *testing.T) {
	r := testRunner(t, nil)
	ws := testWorkspace(t, r)
	l := listen(t)

	host := exec.Command("bash", "-c", l.probe())
	host.Env = []string{"PATH=/usr/bin:/bin"}
	if out, err := host.CombinedOutput(); err != nil {
		t.Fatalf("probe on the host: %v: %s", err, out)
	}
	conns, packets := l.received(2 * time.Second)
	if len(conns) != 1 || len(packets) != 2 {
		t.Fatalf("control on the host: %d connections, %d datagrams; want 1 and 2", len(conns), len(packets))
	}

	step := mustProven(t, mustLaunch(t, r, testSpec(r, ws, "bash", "-c", l.probe())))
	if step.ExitCode != 0 {
		t.Fatalf("probe exited %d: %s", step.ExitCode, step.Output)
	}
	// The step has exited: whatever it sent is already in flight or nowhere.
	conns, packets = l.received(500 * time.Millisecond)
	if len(conns) > 0 || len(packets) > 0 {
		t.Errorf("host listener reached from the sandbox: connections %q, datagrams %q (step said %s)", conns, packets, step.Output)
	}
}

// fakeBwrap writes an executable provider script the sandbox uid can run.
func fakeBwrap(tb testing.TB, dir, name, body string) string {
	tb.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		tb.Fatal(err)
	}
	return path
}

// dropArgs is a provider that runs the real bwrap without some of its flags.
func dropArgs(real string, drop ...string) string {
	var cond []string
	for _, d := range drop {
		cond = append(cond, fmt.Sprintf(`[ "$a" = %q ]`, d))
	}
	// --hostname takes a value, dropped with it.
	return fmt.Sprintf(`#!/bin/bash
args=(); skip=
for a in "$@"; do
  if [ -n "$skip" ]; then skip=; continue; fi
  if %s; then [ "$a" = --hostname ] && skip=1; continue; fi
  args+=("$a")
done
exec %s "${args[@]}"
`, strings.Join(cond, " || "), real)
}

// TestLyingProviders: providers that misreport or weaken isolation are
// caught before the step is released: Unproven is set, no step result is
// recorded, and the marker the step would write is absent.
func TestLyingProviders(t *testing.T) {
	real := requireBwrap(t)
	dir := traversableDir(t)
	for _, tt := range []struct {
		name   string
		script string
		wantNS string // the namespace found shared, "" for other causes
	}{
		{"without --unshare-net", dropArgs(real, "--unshare-net"), "net"},
		{"without --unshare-pid", dropArgs(real, "--unshare-pid"), "pid"},
		// bwrap itself refuses --disable-userns without --unshare-user.
		{"without --unshare-user", dropArgs(real, "--unshare-user"), ""},
		{"without any --unshare", dropArgs(real, "--unshare-user", "--disable-userns", "--unshare-net", "--unshare-pid",
			"--unshare-ipc", "--unshare-uts", "--unshare-cgroup", "--hostname"), "net"},
		{"exits 0", "#!/bin/sh\nexit 0\n", ""},
		{"reports a decoy child", "#!/bin/sh\nif [ \"$1\" != --version ]; then sleep 300 & printf '{\"child-pid\": %d}\\n' $! >&3; fi\nexec " + real + " \"$@\"\n", "user"},
		// A regression here kills the test binary itself, loudly.
		{"reports vouch's pid", "#!/bin/sh\nprintf '{\"child-pid\": %d}\\n' $PPID >&3\nexec " + real + " \"$@\"\n", ""},
		{"reports its own pid", "#!/bin/sh\nprintf '{\"child-pid\": %d}\\n' $$ >&3\nexec " + real + " \"$@\"\n", ""},
		{"dies after reporting", "#!/bin/sh\nprintf '{\"child-pid\": %d}\\n' $$ >&3\nexit 0\n", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fake := fakeBwrap(t, dir, strings.ReplaceAll(tt.name, " ", "-"), tt.script)
			r := testRunner(t, func(c *Config) { c.Bwrap = fake; c.KeepWorkspace = true })
			recipe := gate.Recipe{Version: 1, Steps: []gate.Step{{Name: "mark", Run: []string{"touch", "/work/marker"}, Timeout: 10 * time.Second}}}
			res, err := r.run(t.Context(), r.logger, recipe, func(*os.Root) error { return nil })
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if res.Unproven == nil {
				t.Fatalf("lying provider %q: isolation reported proven (steps %+v)", tt.name, res.Steps)
			}
			if res.Isolated || len(res.Steps) != 0 {
				t.Errorf("Isolated = %v, %d steps recorded; want false, 0", res.Isolated, len(res.Steps))
			}
			if tt.wantNS != "" && res.Unproven.Namespace != tt.wantNS {
				t.Errorf("Unproven = %v, want the %s namespace found shared", res.Unproven, tt.wantNS)
			}
			if res.Unproven.Step != "mark" {
				t.Errorf("Unproven.Step = %q, want %q", res.Unproven.Step, "mark")
			}
			err = filepath.WalkDir(r.cfg.WorkRoot, func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.Name() == "marker" {
					return fmt.Errorf("marker %s exists: the step ran", p)
				}
				return err
			})
			if err != nil {
				t.Error(err)
			}
			if pids := livePidsMentioning(t, r.cfg.WorkRoot); len(pids) > 0 {
				t.Errorf("processes of the refused launch still alive: %v", pids)
			}
			t.Logf("unproven: %v; stderr %q", res.Unproven, res.Unproven.Stderr)
		})
	}
}

// TestWithoutUnshareUserStillOwnNamespace documents a measured fact: an
// unprivileged bwrap adds a user namespace even when --unshare-user is left
// out, so a provider dropping that flag (and --disable-userns, which bwrap
// refuses without it) is still observed isolated. The
// proof trusts what it observes, never the flags.
func TestWithoutUnshareUserStillOwnNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("as root the sandbox runs under the dedicated unprivileged uid")
	}
	fake := fakeBwrap(t, traversableDir(t), "bwrap", dropArgs(requireBwrap(t), "--unshare-user", "--disable-userns"))
	r := testRunner(t, func(c *Config) { c.Bwrap = fake })
	ws := testWorkspace(t, r)
	step := mustProven(t, mustLaunch(t, r, testSpec(r, ws, "true")))
	if p := step.Namespaces["user"]; p.Host == p.Child {
		t.Fatalf("user namespace shared but proven: %+v", p)
	}
}

// blockedIn reads /proc/<pid>/syscall and reports whether pid is blocked in
// read(2) on fd.
func blockedIn(pid, fd int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/syscall")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) > 1 && f[0] == strconv.Itoa(unix.SYS_READ) && f[1] == "0x"+strconv.FormatInt(int64(fd), 16)
}

// TestBlockFdHoldsBeforeExec shows where bwrap holds its child: after the
// sandbox is set up (namespaces, mounts, uid map, capabilities dropped) and
// before it forks the command or execs anything. While held, the reported
// child is bwrap itself, blocked in read(2) on the block fd, with no
// children, and the step's marker does not exist.
func TestBlockFdHoldsBeforeExec(t *testing.T) {
	r := testRunner(t, nil)
	ws := testWorkspace(t, r)
	bwrap := requireBwrap(t)
	s := testSpec(r, ws, "touch", "/work/marker")
	l, perr, err := r.start(bwrap, s)
	if err != nil || perr != nil {
		t.Fatalf("start: %v %v", err, perr)
	}
	host, _ := namespaceLinks("self")
	if _, _, perr := l.prove(t.Context(), host, s, 10*time.Second); perr != nil {
		t.Fatalf("prove: %v", perr)
	}
	defer l.finish()
	defer l.kill()

	deadline := time.Now().Add(5 * time.Second)
	for !blockedIn(l.childPid, fdBlock) {
		if time.Now().After(deadline) {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(l.childPid) + "/syscall")
			t.Fatalf("child %d never blocked in read(%d): syscall %q", l.childPid, fdBlock, b)
		}
		time.Sleep(time.Millisecond) // polling a condition with a deadline
	}
	proc := "/proc/" + strconv.Itoa(l.childPid)
	if exe, err := os.Readlink(proc + "/exe"); err != nil || filepath.Base(exe) != "bwrap" {
		t.Errorf("blocked child's exe = %q, %v; want bwrap (nothing exec'd yet)", exe, err)
	}
	if kids, err := os.ReadFile(proc + "/task/" + strconv.Itoa(l.childPid) + "/children"); err != nil || strings.TrimSpace(string(kids)) != "" {
		t.Errorf("blocked child has children %q (%v); want none", kids, err)
	}
	if mi, err := os.ReadFile(proc + "/mountinfo"); err != nil || !strings.Contains(string(mi), " /work ") {
		t.Errorf("blocked child's mounts lack /work (%v): sandbox not set up yet?", err)
	}
	if _, err := os.Stat(filepath.Join(ws.dir, "marker")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("marker exists while blocked: %v", err)
	}

	if _, err := l.blockW.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	<-l.waited
	if _, err := os.Stat(filepath.Join(ws.dir, "marker")); err != nil {
		t.Fatalf("marker after release: %v", err)
	}
}

// TestClosingBlockPipeReleases records why a failed proof kills first:
// closing the block pipe without writing releases the child, which then
// runs the step.
func TestClosingBlockPipeReleases(t *testing.T) {
	r := testRunner(t, nil)
	ws := testWorkspace(t, r)
	s := testSpec(r, ws, "touch", "/work/marker")
	l, perr, err := r.start(requireBwrap(t), s)
	if err != nil || perr != nil {
		t.Fatalf("start: %v %v", err, perr)
	}
	host, _ := namespaceLinks("self")
	if _, _, perr := l.prove(t.Context(), host, s, 10*time.Second); perr != nil {
		t.Fatalf("prove: %v", perr)
	}
	l.blockW.Close()
	l.blockW = nil
	<-l.waited
	l.finish()
	if _, err := os.Stat(filepath.Join(ws.dir, "marker")); err != nil {
		t.Fatalf("closing the block pipe did not release the child (marker: %v); the kill-first rule may be moot", err)
	}
}
