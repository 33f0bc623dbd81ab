package bot

import (
	"fmt"
	"strings"
	"testing"

	sdk "code.gitea.io/sdk/gitea"
)

// TestE2EMaintainerPR: a maintainer opens a pull request ⇒ pending, then
// success on the head, with one evidence comment. A push while the head is
// being verified ⇒ that run ends SUPERSEDED (cancelled in the sandbox) and
// the new head gets its own result; a third head leaves exactly three
// evidence comments, the older two collapsed to one line.
func TestE2EMaintainerPR(t *testing.T) {
	e := startE2E(t, "e2e-maintainer")
	m := e.g.Maintainer

	// Head 1 is slow: its check sleeps, so head 2 lands mid-run.
	head1 := e.push(m, e.repo, "feature", map[string]string{"tests/slow.check": "touch SLOW-STARTED; sleep 30; touch SLOW-FINISHED\n"})
	pr := e.openPR(m, "feature", "a feature")
	e.waitFor("head 1 running in the sandbox", func() bool { return e.ran("SLOW-STARTED") })
	if sts := e.statuses(head1); len(sts) == 0 || sts[len(sts)-1].State != sdk.StatusPending {
		t.Fatalf("head 1 is running but its status is %+v, want pending", sts)
	}

	head2 := e.push(m, e.repo, "feature", map[string]string{"tests/slow.check": ""})
	st1 := e.waitFinal(head1)
	if st1.State != sdk.StatusError || !strings.HasPrefix(st1.Description, "SUPERSEDED") {
		t.Errorf("head 1 final status = %s %q, want error SUPERSEDED", st1.State, st1.Description)
	}
	if e.ran("SLOW-FINISHED") {
		t.Error("head 1's step was not stopped when head 2 arrived")
	}
	st2 := e.waitFinal(head2)
	if st2.State != sdk.StatusSuccess || !strings.HasPrefix(st2.Description, "PASS") {
		t.Fatalf("head 2 final status = %s %q, want success PASS", st2.State, st2.Description)
	}
	if !strings.HasPrefix(st2.TargetURL, e.url+"/runs/") {
		t.Errorf("head 2 status target %q is not its evidence page", st2.TargetURL)
	}
	sts2 := e.statuses(head2)
	if sts2[0].State != sdk.StatusPending {
		t.Errorf("head 2's first status = %s, want pending first", sts2[0].State)
	}

	head3 := e.push(m, e.repo, "feature", map[string]string{"feature.go": "package main\n\nvar feature = 3\n"})
	if st := e.waitFinal(head3); st.State != sdk.StatusSuccess {
		t.Fatalf("head 3 final status = %s %q", st.State, st.Description)
	}
	var byHead map[string][]string
	e.waitFor("head 2's comment collapsed and head 3's posted", func() bool {
		byHead = e.evidenceComments(pr)
		return len(byHead[head2]) == 1 && strings.Contains(byHead[head2][0], "superseded by") &&
			len(byHead[head3]) == 1 && strings.HasPrefix(byHead[head3][0], "**vouch: PASS**")
	})
	if len(byHead) != 3 {
		t.Fatalf("evidence comments for %d heads, want 3: %v", len(byHead), byHead)
	}
	for head, bodies := range byHead {
		if len(bodies) != 1 {
			t.Errorf("head %s has %d evidence comments, want 1", head[:7], len(bodies))
		}
	}
	for _, old := range []string{head1, head2} {
		body := byHead[old][0]
		if !strings.HasPrefix(body, "**vouch:** superseded by") || strings.Count(strings.TrimSpace(body), "\n") != 1 {
			t.Errorf("old head %s comment is not one collapsed line:\n%s", old[:7], body)
		}
	}
	if c := byHead[head3][0]; !strings.HasPrefix(c, "**vouch: PASS**") || !strings.Contains(c, head3) {
		t.Errorf("head 3 comment:\n%s", c)
	}

	// The evidence page and the signed receipt are served.
	runs := e.runsOf(pr, head3)
	if len(runs) != 1 || runs[0].Receipt == nil || !runs[0].Receipt.Executed || !runs[0].Receipt.Sandbox.Isolated {
		t.Fatalf("head 3 runs = %+v", runs)
	}
	if run, err := e.svc.store.Run(t.Context(), runs[0].ID); err != nil || len(run.Envelope) == 0 {
		t.Errorf("head 3's receipt was not signed (%v)", err)
	}
	if key := e.get(t, e.url+"/key"); !strings.Contains(key, "PUBLIC KEY") {
		t.Errorf("/key = %q", key)
	}
	if env := e.get(t, fmt.Sprintf("%s/runs/%d/receipt.json", e.url, runs[0].ID)); !strings.Contains(env, `"payloadType"`) {
		t.Errorf("receipt.json is not a DSSE envelope: %.200s", env)
	}
}
