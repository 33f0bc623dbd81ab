package bot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sdk "code.gitea.io/sdk/gitea"

	"vouch.dev/vouch/forge/gitea"
)

// deliverSync posts a signed Gitea "synchronized" delivery for head of the
// pull request to the service, built from a delivery Gitea really sent.
func (e *e2e) deliverSync(pr int, base, head, delivery string) int {
	e.t.Helper()
	code := e.deliverSyncOnce(pr, base, head, delivery)
	if code == 0 {
		e.t.Fatalf("delivery %s: no answer", delivery)
	}
	return code
}

// deliverSyncOnce is deliverSync that answers 0 when the service could
// not be reached.
func (e *e2e) deliverSyncOnce(pr int, base, head, delivery string) int {
	e.t.Helper()
	var p map[string]any
	if err := json.Unmarshal(giteaPayload(e.t, "pull_request_synchronized.json"), &p); err != nil {
		e.t.Fatal(err)
	}
	p["number"] = pr
	repo := p["repository"].(map[string]any)
	repo["name"], repo["full_name"] = e.repo.Name, e.repo.FullName()
	repo["owner"].(map[string]any)["login"] = e.repo.Owner
	pull := p["pull_request"].(map[string]any)
	pull["number"] = pr
	pull["head"].(map[string]any)["sha"] = head
	pull["base"].(map[string]any)["sha"] = base
	body, err := json.Marshal(p)
	if err != nil {
		e.t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, e.url+"/webhook/gitea", bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Gitea-Event", "pull_request")
	req.Header.Set("X-Gitea-Event-Type", "pull_request_sync")
	req.Header.Set("X-Gitea-Delivery", delivery)
	req.Header.Set("X-Gitea-Signature", gitea.Signature([]byte(e2eSecret), body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestE2EPushStorm: 100 heads of one pull request announced within a few
// seconds ⇒ only the last head gets a verdict that is not SUPERSEDED, every
// other head that got a status ends SUPERSEDED, and no head has more than
// one evidence comment.
//
// Gitea here takes about 1.5 s per push (its hooks start the gitea binary),
// so 100 real pushes take minutes. The storm is therefore 98 signed
// "synchronized" deliveries, shaped like Gitea's, for real commits pushed
// to side branches in one push, between two real pushes to the pull
// request's branch: its first head and its last.
func TestE2EPushStorm(t *testing.T) {
	const heads = 100
	e := startE2E(t, "e2e-storm")
	m := e.g.Maintainer
	ctx := t.Context()
	c := e.cloneMain("storm")
	git, url, dir, base := c.Git, c.URL, c.Dir, c.Base
	// Every head's check takes ten seconds, so a head is still being
	// verified when the next one is announced.
	var shas, refspecs []string
	for i := range heads {
		if err := os.MkdirAll(filepath.Join(dir, "tests"), 0o755); err != nil {
			t.Fatal(err)
		}
		check := fmt.Sprintf("# head %d\nsleep 10\n", i)
		if err := os.WriteFile(filepath.Join(dir, "tests", "slow.check"), []byte(check), 0o644); err != nil {
			t.Fatal(err)
		}
		git("add", "-A")
		git("commit", "-q", "-m", fmt.Sprintf("head %d", i))
		sha := git("rev-parse", "HEAD")
		shas = append(shas, sha)
		refspecs = append(refspecs, fmt.Sprintf("%s:refs/heads/storm-%d", sha, i))
	}
	git(append([]string{"push", "-q", url}, refspecs...)...)
	git("push", "-q", url, shas[0]+":refs/heads/storm")
	pr := e.openPR(m, "storm", "a storm of pushes")
	start := time.Now()
	for i, h := range shas[1 : heads-1] {
		if code := e.deliverSync(pr, base, h, fmt.Sprintf("storm-%d", i)); code != http.StatusAccepted {
			t.Fatalf("delivery %d answered %d", i, code)
		}
	}
	git("push", "-q", url, shas[heads-1]+":refs/heads/storm")
	t.Logf("%d heads announced in %s", heads, time.Since(start).Round(time.Millisecond))

	last := shas[heads-1]
	if st := e.waitFinal(last); st.State != sdk.StatusSuccess {
		t.Fatalf("last head status = %s %q, want success", st.State, st.Description)
	}
	e.waitFor("the queue to drain", func() bool {
		n, err := e.svc.store.QueueDepth(ctx)
		return err == nil && n == 0
	})
	superseded := 0
	for _, h := range shas[:heads-1] {
		sts := e.statuses(h)
		if len(sts) == 0 {
			continue
		}
		final := sts[len(sts)-1]
		if final.State != sdk.StatusError || !strings.HasPrefix(final.Description, "SUPERSEDED") {
			t.Errorf("head %s ends %s %q, want SUPERSEDED", h[:7], final.State, final.Description)
		}
		superseded++
	}
	for head, bodies := range e.evidenceComments(pr) {
		if len(bodies) > 1 {
			t.Errorf("head %s has %d evidence comments", head[:7], len(bodies))
		}
		if head != last && !strings.Contains(bodies[0], "superseded by") {
			t.Errorf("head %s's comment is not collapsed:\n%s", head[:7], bodies[0])
		}
	}
	t.Logf("%d of %d older heads got a SUPERSEDED status; %d evidence comments", superseded, heads-1, len(e.evidenceComments(pr)))
}
