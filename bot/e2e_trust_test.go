package bot

import (
	"strings"
	"testing"

	sdk "code.gitea.io/sdk/gitea"

	"vouch.dev/vouch/evidence"
	"vouch.dev/vouch/forge"
)

// fork forks the e2e repository as the outsider.
func (e *e2e) fork() forge.Repo {
	e.t.Helper()
	api := e.g.API(e.g.Outsider)
	api.SetContext(e.t.Context())
	f, _, err := api.CreateFork(e.repo.Owner, e.repo.Name, sdk.CreateForkOption{})
	if err != nil {
		e.t.Fatalf("fork: %v", err)
	}
	return forge.Repo{Owner: e.g.Outsider.Login, Name: f.Name}
}

// TestE2EUntrustedFork: an outsider's pull request from a fork is not run
// (STOP_AND_ASK UNTRUSTED_AUTHOR naming the exact reply; the marker its
// code would write is absent); the outsider's own approval is refused and
// runs nothing; a maintainer's approval runs that exact head; a further
// push needs a new approval. A fork head that edits the recipe is refused
// for good: the approval lets the gate see it, and the gate refuses it.
func TestE2EUntrustedFork(t *testing.T) {
	e := startE2E(t, "e2e-untrusted")
	o, m := e.g.Outsider, e.g.Maintainer
	fork := e.fork()

	head1 := e.push(o, fork, "evil", map[string]string{"tests/evil.check": "touch HOSTILE-V1\n"})
	pr := e.openPR(o, o.Login+":evil", "an outsider's change")
	st := e.waitFinal(head1)
	if st.State != sdk.StatusFailure || !strings.Contains(st.Description, "UNTRUSTED_AUTHOR") {
		t.Fatalf("head 1 status = %s %q, want failure STOP_AND_ASK (UNTRUSTED_AUTHOR)", st.State, st.Description)
	}
	e.waitFor("the STOP_AND_ASK comment", func() bool {
		c := e.evidenceComments(pr)[head1]
		return len(c) == 1 && strings.Contains(c[0], "OUTCOME=STOP_AND_ASK")
	})
	ask := e.evidenceComments(pr)[head1][0]
	for _, want := range []string{"REASON=UNTRUSTED_AUTHOR", "REPLY=/verify approve " + head1[:7], "EXECUTED=NO", "WHO="} {
		if !strings.Contains(ask, want) {
			t.Errorf("STOP_AND_ASK comment lacks %q:\n%s", want, ask)
		}
	}
	if e.ran("HOSTILE-V1") {
		t.Fatal("the outsider's code ran before any approval")
	}
	if e.fetched(head1) {
		t.Fatal("the outsider's head was downloaded before any approval")
	}

	// The outsider approves their own head: refused, nothing runs.
	e.comment(o, pr, "/verify approve")
	e.waitFor("the refusal", func() bool { return len(e.replies(pr)) == 1 })
	if r := e.replies(pr)[0]; !strings.Contains(r, "refused") || !strings.Contains(r, o.Login) {
		t.Errorf("reply to the outsider's approval:\n%s", r)
	}
	if _, ok, _ := e.svc.store.ApprovalFor(t.Context(), forge.Gitea, e.repo, pr, head1); ok {
		t.Error("the outsider's approval was recorded")
	}
	if e.ran("HOSTILE-V1") || len(e.runsOf(pr, head1)) != 1 {
		t.Fatal("the outsider's own approval ran their code")
	}

	// A maintainer approves: that exact head runs.
	e.comment(m, pr, "/verify approve")
	e.waitFor("the approved head's verdict", func() bool {
		for _, r := range e.runsOf(pr, head1) {
			if r.Receipt.Outcome == evidence.Pass {
				return true
			}
		}
		return false
	})
	if !e.ran("HOSTILE-V1") {
		t.Error("the approved head passed but its code left no marker")
	}
	if !e.fetched(head1) {
		t.Error("the approved head ran but the fetch check does not see it (the check is blind)")
	}
	if st := e.waitFinal(head1); st.State != sdk.StatusSuccess {
		t.Errorf("approved head status = %s %q", st.State, st.Description)
	}

	// A push: the approval lapses.
	head2 := e.push(o, fork, "evil", map[string]string{"tests/evil.check": "touch HOSTILE-V2\n"})
	st2 := e.waitFinal(head2)
	if st2.State != sdk.StatusFailure || !strings.Contains(st2.Description, "UNTRUSTED_AUTHOR") {
		t.Errorf("head 2 status = %s %q, want STOP_AND_ASK (UNTRUSTED_AUTHOR)", st2.State, st2.Description)
	}
	if e.ran("HOSTILE-V2") || e.fetched(head2) {
		t.Error("the approval of head 1 let head 2 run or be downloaded")
	}

	// A fork head that edits the recipe: refused, and a maintainer's
	// approval does not unlock it.
	head3 := e.push(o, fork, "recipe", map[string]string{
		".vouch.yml":         "version: 1\nsteps:\n  - name: x\n    run: [\"touch\", \"HOSTILE-RECIPE\"]\n",
		"tests/recipe.check": "touch HOSTILE-V3\n",
	})
	pr3 := e.openPR(o, o.Login+":recipe", "change the recipe")
	if st := e.waitFinal(head3); !strings.Contains(st.Description, "UNTRUSTED_AUTHOR") {
		t.Fatalf("recipe head status before approval = %s %q, want UNTRUSTED_AUTHOR", st.State, st.Description)
	}
	e.comment(m, pr3, "/verify approve "+head3[:7]) // named, as the REPLY line says
	e.waitFor("the gate's refusal of the approved head", func() bool {
		for _, r := range e.runsOf(pr3, head3) {
			if r.Receipt.Reason == evidence.ReasonProtectedPathChanged {
				return true
			}
		}
		return false
	})
	st3 := e.waitFinal(head3)
	if st3.State != sdk.StatusFailure || !strings.Contains(st3.Description, "PROTECTED_PATH_CHANGED") {
		t.Errorf("approved recipe head status = %s %q, want STOP_AND_ASK (PROTECTED_PATH_CHANGED)", st3.State, st3.Description)
	}
	if e.ran("HOSTILE-V3") || e.ran("HOSTILE-RECIPE") {
		t.Error("a head that edits the recipe ran")
	}
	if n := len(e.runsOf(pr3, head3)); n != 2 {
		t.Errorf("recipe head has %d runs, want 2 (the ask, the gate's refusal)", n)
	}
}
