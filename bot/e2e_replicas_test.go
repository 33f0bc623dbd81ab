package bot

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "code.gitea.io/sdk/gitea"

	"vouch.dev/vouch/fixtures/pgtest"
)

// TestE2EReplicasOnPostgres: two `vouch serve` replicas share one
// PostgreSQL; 200 pull request events across 20 pull requests, sent to
// both replicas, verify every head exactly once (each head's check leaves
// a marker of its own in the workspace; the markers are counted across
// both replicas' work roots) and leave one evidence comment per head.
func TestE2EReplicasOnPostgres(t *testing.T) {
	const prs, perPR = 20, 10
	dsn := pgtest.Start(t)
	e := newE2E(t, "e2e-replicas")
	m := e.g.Maintainer

	e.cfg = e.config(t)
	e.cfg.Store = StoreConfig{Driver: StorePostgres, DSN: Secret(dsn)}
	e.start(t)
	r2 := &e2e{t: t, g: e.g, repo: e.repo}
	r2.cfg = r2.config(t)
	r2.cfg.Store = e.cfg.Store
	r2.cfg.SigningKey = e.cfg.SigningKey
	r2.start(t)

	// One push makes 20 branches; each head's check touches its own marker.
	c := e.cloneMain("work")
	git, url, dir, base := c.Git, c.URL, c.Dir, c.Base
	heads := make([]string, prs)
	var refspecs []string
	for i := range prs {
		git("checkout", "-q", "-B", fmt.Sprintf("pr-%d", i), base)
		if err := os.MkdirAll(filepath.Join(dir, "tests"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "tests", "mark.check"), fmt.Appendf(nil, "touch RAN-PR-%d\n", i), 0o644); err != nil {
			t.Fatal(err)
		}
		git("add", "-A")
		git("commit", "-q", "-m", fmt.Sprintf("pr %d", i))
		heads[i] = git("rev-parse", "HEAD")
		refspecs = append(refspecs, fmt.Sprintf("%s:refs/heads/pr-%d", heads[i], i))
	}
	git(append([]string{"push", "-q", url}, refspecs...)...)
	numbers := make([]int, prs)
	for i := range prs {
		numbers[i] = e.openPR(m, fmt.Sprintf("pr-%d", i), fmt.Sprintf("change %d", i))
	}

	// 200 events: every pull request's head announced ten times, under ten
	// delivery ids, alternately to each replica (as a forge retrying, or
	// redelivering, would).
	for round := range perPR {
		for i := range prs {
			target := e
			if (round+i)%2 == 1 {
				target = r2
			}
			code := target.deliverSync(numbers[i], base, heads[i], fmt.Sprintf("replica-%d-%d", i, round))
			if code != http.StatusAccepted && code != http.StatusOK {
				t.Fatalf("delivery %d/%d answered %d", i, round, code)
			}
		}
	}
	for i, h := range heads {
		if st := e.waitFinal(h); st.State != sdk.StatusSuccess {
			t.Errorf("pr %d head status = %s %q", i, st.State, st.Description)
		}
	}
	for i, h := range heads {
		launches := e.markers(fmt.Sprintf("RAN-PR-%d", i)) + r2.markers(fmt.Sprintf("RAN-PR-%d", i))
		if launches != 1 {
			t.Errorf("pr %d: head verified %d times in the sandbox, want exactly once", i, launches)
		}
		e.waitFor("pr's comment", func() bool { return len(e.evidenceComments(numbers[i])[h]) >= 1 })
		if got := e.evidenceComments(numbers[i]); len(got) != 1 || len(got[h]) != 1 || !strings.HasPrefix(got[h][0], "**vouch: PASS**") {
			t.Errorf("pr %d: evidence comments %v, want one PASS comment for its head", i, got)
		}
	}
	// Both replicas did work.
	byReplica := map[*e2e]int{}
	for _, r := range []*e2e{e, r2} {
		for i := range prs {
			byReplica[r] += r.markers(fmt.Sprintf("RAN-PR-%d", i))
		}
	}
	t.Logf("sandbox launches: replica 1 %d, replica 2 %d", byReplica[e], byReplica[r2])
}
