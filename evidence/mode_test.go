package evidence

import (
	"strings"
	"testing"

	"vouch.dev/vouch/sandbox"
)

// TestTrustedDevelopmentSaysNotIsolated: a run in the operator's
// trusted-development mode is judged on its steps, but the receipt says
// isolated: false with the mode, and the comment and summary say NOT
// ISOLATED on their first line. Without the mode, the same unisolated
// result is BLOCKED.
func TestTrustedDevelopmentSaysNotIsolated(t *testing.T) {
	trusted := &sandbox.Result{Provider: "none", Mode: sandbox.ModeTrustedDevelopment, Steps: []sandbox.StepResult{ran("unit", 0, goPass)}}
	rc := Judge(admitted(unitStep), trusted)
	if rc.Outcome != Pass || rc.Sandbox.Isolated || rc.Sandbox.Mode != "trusted-development" || !rc.Executed {
		t.Errorf("Judge = %s isolated=%v mode=%q executed=%v, want PASS, false, trusted-development, true",
			rc.Outcome, rc.Sandbox.Isolated, rc.Sandbox.Mode, rc.Executed)
	}
	for name, text := range map[string]string{"comment": Comment(rc), "summary": Summary(rc)} {
		first, _, _ := strings.Cut(text, "\n")
		if !strings.Contains(first, NotIsolated) {
			t.Errorf("%s first line %q does not say %s", name, first, NotIsolated)
		}
	}

	unproven := &sandbox.Result{Provider: "bubblewrap", Steps: []sandbox.StepResult{ran("unit", 0, goPass)}}
	if rc := Judge(admitted(unitStep), unproven); rc.Outcome != Blocked || rc.Reason != ReasonIsolationUnproven {
		t.Errorf("unisolated result without the mode = %s %s, want BLOCKED ISOLATION_UNPROVEN", rc.Outcome, rc.Reason)
	}
	if rc := Judge(admitted(unitStep), isolated(ran("unit", 0, goPass))); rc.Sandbox.Mode != "isolated" || strings.Contains(Comment(rc), NotIsolated) {
		t.Errorf("isolated run: mode %q, comment mentions %s: %v", rc.Sandbox.Mode, NotIsolated, strings.Contains(Comment(rc), NotIsolated))
	}
}
