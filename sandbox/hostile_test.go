package sandbox

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// anotherRunProbe tries to read and overwrite run B's file by its host
// path, then discovers its own workspace's host path from mountinfo and
// tries every sibling workspace from there.
const anotherRunProbe = `exec 2>&1
cat "$B_FILE" && echo "READ B by its host path"
echo tampered > "$B_FILE" && echo "WROTE B by its host path"
src=
while read -r _ _ _ root mp _; do [ "$mp" = /work ] && src=$root; done < /proc/self/mountinfo
echo "work is $src on the host"
for f in "$src"/../../run-*/ws/secret; do
  cat "$f" && echo "READ $f"
  echo tampered > "$f" && echo "WROTE $f"
done
ls -la "$src/../.." 2>&1 | head -5
exit 0
`

// TestAnotherRunsWorkspaceUnreachable: two runs' workspaces exist side by
// side; the step of run A reads and overwrites run B's file, by the host
// path it is given and by the path it discovers from /proc/self/mountinfo.
// Both fail (only A's workspace is mounted) and B's file is unchanged. On
// the host the sandbox uid does read B's file: the mount namespace, not
// permissions, keeps runs apart.
func TestAnotherRunsWorkspaceUnreachable(t *testing.T) {
	r := testRunner(t, nil)
	a, b := testWorkspace(t, r), testWorkspace(t, r)
	const secret = "run-b-secret-3c91d"
	bFile := filepath.Join(b.dir, "secret")
	if err := os.WriteFile(bFile, []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(bFile, r.cfg.UID, r.cfg.GID); err != nil {
			t.Fatal(err)
		}
	}
	before, err := os.Stat(bFile)
	if err != nil {
		t.Fatal(err)
	}

	// Control: the sandbox uid, outside the sandbox, reaches B's file.
	ctl := exec.Command("cat", bFile)
	if os.Geteuid() == 0 {
		ctl.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(r.cfg.UID), Gid: uint32(r.cfg.GID), Groups: []uint32{}}}
	}
	if out, err := ctl.CombinedOutput(); err != nil || string(out) != secret {
		t.Fatalf("control: the sandbox uid on the host read %q, %v; want B's secret (else the test proves nothing)", out, err)
	}

	s := testSpec(r, a, "sh", "-c", anotherRunProbe)
	s.env = append(s.env, "B_FILE="+bFile)
	step := mustProven(t, mustLaunch(t, r, s))
	out := string(step.Output)
	if !strings.Contains(out, "work is "+a.dir+" on the host") {
		t.Errorf("the step did not find its workspace's host path %s in mountinfo: the discovery attempt proves nothing", a.dir)
	}
	if strings.Contains(out, secret) || strings.Contains(out, "READ") || strings.Contains(out, "WROTE") {
		t.Errorf("run A reached run B's workspace")
	}
	after, err := os.Stat(bFile)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(bFile); err != nil || !bytes.Equal(got, []byte(secret)) || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("run B's file changed: %q (%v), mtime %v, was %v", got, err, after.ModTime(), before.ModTime())
	}
	if t.Failed() {
		t.Logf("step said:\n%s", out)
	}
	requireNamespaceEmpty(t, step)
}
