package evidence

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"vouch.dev/vouch/sandbox"
)

const testPage = "https://vouch.example/runs/42"

// checkGolden compares got with testdata/name, rewriting it under -update.
func checkGolden(t testing.TB, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run go test -update): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, diff)
	}
}

// statusText renders a status for a golden file.
func statusText(v StatusView) string {
	return fmt.Sprintf("state: %s\ncontext: %s\ntarget_url: %s\ndescription (%d runes): %s\n",
		v.State, v.Context, v.TargetURL, utf8.RuneCountInString(v.Description), v.Description)
}

// statusReceipts are goldenReceipts plus the outcomes and reasons only a
// status has to show.
func statusReceipts() map[string]Receipt {
	m := goldenReceipts()
	sup := Judge(admitted(unitStep), nil)
	sup.Outcome, sup.Reason, sup.Detail = Error, ReasonSuperseded, "head def5678 was pushed"
	m["superseded"] = sup

	tdFail := Judge(admitted(unitStep), &sandbox.Result{
		Provider: "none", Mode: sandbox.ModeTrustedDevelopment, Steps: []sandbox.StepResult{ran("unit", 2, goFail)},
	})
	m["fail_trusted_development"] = tdFail

	unavailable := Judge(admitted(unitStep), &sandbox.Result{Provider: "bubblewrap", Version: "bubblewrap 0.11.0"})
	m["blocked_sandbox_unavailable"] = unavailable

	m["stop_other"] = Receipt{Outcome: StopAndAsk, Reason: ReasonInternal, Head: testHead}
	return m
}

func TestStatusGolden(t *testing.T) {
	for name, rc := range statusReceipts() {
		t.Run(name, func(t *testing.T) {
			checkGolden(t, "status_"+name+".golden", statusText(Status(rc, testPage)))
		})
	}
	for _, p := range []Phase{Queued, Running} {
		t.Run(string(p), func(t *testing.T) {
			checkGolden(t, "status_pending_"+string(p)+".golden", statusText(Pending(p, testPage)))
		})
	}
}

func TestStatusState(t *testing.T) {
	tests := []struct {
		outcome Outcome
		reason  Reason
		want    string
	}{
		{Pass, ReasonAllStepsPassed, StateSuccess},
		{Fail, ReasonStepFailed, StateFailure},
		{Fail, ReasonTimeout, StateFailure},
		{StopAndAsk, ReasonUntrustedAuthor, StateFailure},
		{Blocked, ReasonIsolationUnproven, StateError},
		{Error, ReasonInternal, StateError},
		{Pass, ReasonSuperseded, StateError},
		{"PASS ", ReasonAllStepsPassed, StateError},
		{"", "", StateError},
	}
	for _, tt := range tests {
		got := Status(Receipt{Outcome: tt.outcome, Reason: tt.reason}, testPage)
		if got.State != tt.want || got.Context != StatusContext {
			t.Errorf("Status(%s/%s) = state %q context %q, want %q %q", tt.outcome, tt.reason, got.State, got.Context, tt.want, StatusContext)
		}
	}
	for _, p := range []Phase{Queued, Running, "other"} {
		if got := Pending(p, testPage); got.State != StatePending || got.Context != StatusContext || got.TargetURL != testPage {
			t.Errorf("Pending(%q) = %+v, want pending %s %s", p, got, StatusContext, testPage)
		}
	}
}

func TestStatusTargetURL(t *testing.T) {
	for u, want := range map[string]string{
		testPage:                       testPage,
		"http://127.0.0.1:8080/runs/1": "http://127.0.0.1:8080/runs/1",
		"javascript:alert(1)":          "",
		"/runs/1":                      "",
		"":                             "",
		"https://":                     "",
	} {
		if got := Status(Receipt{Outcome: Pass}, u).TargetURL; got != want {
			t.Errorf("Status(_, %q).TargetURL = %q, want %q", u, got, want)
		}
	}
}

// TestStatusDescriptionBounded renders every outcome × reason × detail ×
// sandbox mode, including long and hostile text, and checks the description
// is at most 140 runes, one inert line, and still says what it must.
func TestStatusDescriptionBounded(t *testing.T) {
	t.Parallel()
	outcomes := []Outcome{Pass, Fail, StopAndAsk, Blocked, Error, "", Outcome(strings.Repeat("X", 500)), "PASS\n<!-- x -->\x1b[31m"}
	reasons := []Reason{
		ReasonAllStepsPassed, ReasonStepFailed, ReasonTimeout, ReasonOutputLimit, ReasonProtectedPathChanged,
		ReasonNoTrustedRecipe, ReasonInvalidRecipe, ReasonUnsafeTree, ReasonUntrustedAuthor, ReasonIsolationUnproven,
		ReasonRequiredProofNotPassed, ReasonSuperseded, ReasonInternal, "", Reason(strings.Repeat("R", 300)), "A\u202eB\nC",
	}
	details := []string{
		"",
		"step \"unit\" exited 1",
		strings.Repeat("a", 10000),
		strings.Repeat("界", 5000),
		strings.Repeat("🦀", 300),
		"\n\n   \nsecond line is the first non-empty",
		hostile,
		strings.Repeat("\x00\x1b", 400),
		"\xff\xfe invalid utf-8 " + strings.Repeat("é", 200),
	}
	heads := []string{testHead, "", strings.Repeat("f", 1000), "<script>"}
	modes := []struct {
		mode     string
		isolated bool
	}{{"isolated", true}, {"isolated", false}, {string(sandbox.ModeTrustedDevelopment), false}, {"", false}}
	stepLists := [][]StepRecord{nil, {{Name: strings.Repeat("s", 2000)}}, make([]StepRecord, 10000)}

	n := 0
	for _, o := range outcomes {
		for _, r := range reasons {
			for _, d := range details {
				for _, h := range heads {
					for _, m := range modes {
						for _, steps := range stepLists {
							rc := Receipt{Outcome: o, Reason: r, Detail: d, Head: h, Steps: steps,
								Sandbox: SandboxFacts{Mode: m.mode, Isolated: m.isolated}}
							checkDescription(t, rc, Status(rc, testPage))
							n++
						}
					}
				}
			}
		}
	}
	for _, p := range []Phase{Queued, Running, Phase(strings.Repeat("p", 400))} {
		checkDescription(t, Receipt{}, Pending(p, testPage))
	}
	t.Logf("checked %d status descriptions", n)
}

// checkDescription checks one rendered status of rc.
func checkDescription(t *testing.T, rc Receipt, v StatusView) {
	t.Helper()
	d := v.Description
	if n := utf8.RuneCountInString(d); n > MaxStatusDescription || n == 0 {
		t.Fatalf("Status(%.60q/%.60q) description has %d runes, want 1..%d: %q", rc.Outcome, rc.Reason, n, MaxStatusDescription, d)
	}
	if !utf8.ValidString(d) {
		t.Fatalf("description is not valid UTF-8: %q", d)
	}
	for _, r := range d {
		if r != ' ' && r != '\u200b' && !unicode.IsGraphic(r) {
			t.Fatalf("description has control rune %U: %q", r, d)
		}
	}
	if strings.Contains(d, "<!--") {
		t.Fatalf("description has an HTML comment opener: %q", d)
	}
	if v.State == StatePending {
		return
	}
	if rc.Reason == ReasonSuperseded {
		if !strings.HasPrefix(d, "SUPERSEDED: ") || v.State != StateError {
			t.Fatalf("superseded status = %s %q, want error, SUPERSEDED first", v.State, d)
		}
		return
	}
	if want := defuse(oneLine(string(rc.Outcome), 32)); !strings.HasPrefix(d, want+" (") {
		t.Fatalf("description %q does not start with the outcome %q", d, want)
	}
	if want := "(" + defuse(oneLine(string(rc.Reason), 40)) + ")"; !strings.Contains(d, want) {
		t.Fatalf("description %q does not name the reason %q", d, want)
	}
	wantNI := rc.Sandbox.Mode == string(sandbox.ModeTrustedDevelopment) || rc.Outcome == Blocked && !rc.Sandbox.Isolated
	if got := strings.Contains(d, NotIsolated); got != wantNI {
		t.Fatalf("description %q says NOT ISOLATED = %v, want %v", d, got, wantNI)
	}
	if (rc.Outcome == Blocked || wantNI) && !strings.Contains(d, ": ") {
		t.Fatalf("description %q gives no why", d)
	}
}

func TestStatusBlockedSaysWhy(t *testing.T) {
	rc := Judge(admitted(unitStep), &sandbox.Result{
		Provider: "bubblewrap", Version: "bubblewrap 0.11.0",
		Unproven: &sandbox.ProofError{Namespace: "net", Host: "net:[1]", Child: "net:[1]", Step: "unit"},
	})
	d := Status(rc, testPage).Description
	for _, want := range []string{"BLOCKED", "ISOLATION_UNPROVEN", NotIsolated, "net namespace shared"} {
		if !strings.Contains(d, want) {
			t.Errorf("Status(blocked).Description = %q, want it to contain %q", d, want)
		}
	}
	skipped := Judge(admitted(unitStep), isolated(ran("unit", 0, goSkip)))
	d = Status(skipped, testPage).Description
	if strings.Contains(d, NotIsolated) || !strings.Contains(d, "skipped") {
		t.Errorf("Status(blocked, isolated, skipped).Description = %q, want the skip and no NOT ISOLATED: the run was isolated", d)
	}
}
