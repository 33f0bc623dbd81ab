package evidence

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"vouch.dev/vouch/gate"
	"vouch.dev/vouch/sandbox"
)

func TestJudge(t *testing.T) {
	shared := func(r *sandbox.Result, kind string) *sandbox.Result {
		p := r.Namespaces[kind]
		p.Child = p.Host
		r.Namespaces[kind] = p
		return r
	}
	withoutKind := func(r *sandbox.Result, kind string) *sandbox.Result {
		delete(r.Namespaces, kind)
		return r
	}
	tests := []struct {
		name         string
		d            *gate.Decision
		r            *sandbox.Result
		want         Outcome
		wantReason   Reason
		wantExecuted bool
		wantIsolated bool
		wantDetail   string // substring
	}{
		{
			name: "all good", d: admitted(unitStep), r: isolated(ran("unit", 0, goPass)),
			want: Pass, wantReason: ReasonAllStepsPassed, wantExecuted: true, wantIsolated: true,
		},
		{
			name: "step without tests format passes on exit 0", d: admitted(gate.Step{Name: "lint"}), r: isolated(ran("lint", 0, "")),
			want: Pass, wantReason: ReasonAllStepsPassed, wantExecuted: true, wantIsolated: true,
		},
		{
			name: "protected path refused", d: refused(gate.RefusalProtectedPath, "", gate.Violation{Path: "scripts/check.sh", Rule: "step-argv:unit"}),
			want: StopAndAsk, wantReason: ReasonProtectedPathChanged,
		},
		{
			name: "no trusted recipe", d: refused(gate.RefusalNoTrustedRecipe, "no .vouch.yml at base"),
			want: StopAndAsk, wantReason: ReasonNoTrustedRecipe, wantDetail: "no .vouch.yml",
		},
		{
			name: "invalid recipe carries detail", d: refused(gate.RefusalInvalidRecipe, "line 3: unknown key \"stepz\""),
			want: StopAndAsk, wantReason: ReasonInvalidRecipe, wantDetail: "line 3",
		},
		{
			name: "unsafe tree", d: refused(gate.RefusalUnsafeTree, "", gate.Violation{Path: "link", Rule: "symlink-escape"}),
			want: StopAndAsk, wantReason: ReasonUnsafeTree,
		},
		{
			name: "refused yet steps ran is an internal error", d: refused(gate.RefusalProtectedPath, ""), r: isolated(ran("unit", 0, goPass)),
			want: Error, wantReason: ReasonInternal, wantExecuted: true, wantIsolated: true, wantDetail: "refused",
		},
		{
			name: "unknown refusal", d: refused("SOMETHING_NEW", "x"),
			want: Error, wantReason: ReasonInternal, wantDetail: "SOMETHING_NEW",
		},
		{
			name: "nil decision", d: nil,
			want: Error, wantReason: ReasonInternal,
		},
		{
			name: "admitted without result", d: admitted(unitStep), r: nil,
			want: Error, wantReason: ReasonInternal, wantDetail: "no sandbox result",
		},
		{
			name: "admitted without recipe", d: func() *gate.Decision { d := admitted(); d.Recipe = nil; return d }(), r: isolated(),
			want: Error, wantReason: ReasonInternal, wantIsolated: true,
		},
		{
			name: "unproven: step not released", d: admitted(unitStep),
			r: &sandbox.Result{Provider: "bubblewrap", Version: "bubblewrap 0.11.0", Unproven: &sandbox.ProofError{
				Namespace: "net", Host: "net:[4026531840]", Child: "net:[4026531840]", Stderr: "bwrap: warning: fell back",
			}},
			want: Blocked, wantReason: ReasonIsolationUnproven, wantDetail: "provider stderr:\nbwrap: warning: fell back",
		},
		{
			name: "unproven on the second step: the first ran", d: admitted(gate.Step{Name: "a"}, gate.Step{Name: "b"}),
			r: func() *sandbox.Result {
				r := isolated(ran("a", 0, ""))
				r.Isolated = false
				r.Unproven = &sandbox.ProofError{Cause: "no child pid reported"}
				return r
			}(),
			want: Blocked, wantReason: ReasonIsolationUnproven, wantExecuted: true, wantDetail: "no child pid",
		},
		{
			name: "not isolated is never a pass", d: admitted(unitStep),
			r:    func() *sandbox.Result { r := isolated(ran("unit", 0, goPass)); r.Isolated = false; return r }(),
			want: Blocked, wantReason: ReasonIsolationUnproven, wantExecuted: true,
		},
		{
			name: "defence in depth: Isolated but a pair is equal", d: admitted(unitStep),
			r:    shared(isolated(ran("unit", 0, goPass)), "net"),
			want: Blocked, wantReason: ReasonIsolationUnproven, wantExecuted: true, wantDetail: "net namespace shared",
		},
		{
			name: "defence in depth: Isolated but a kind is missing", d: admitted(unitStep),
			r:    withoutKind(isolated(ran("unit", 0, goPass)), "cgroup"),
			want: Blocked, wantReason: ReasonIsolationUnproven, wantExecuted: true, wantDetail: "cgroup namespace was not observed",
		},
		{
			name: "defence in depth: Isolated without any proof", d: admitted(unitStep),
			r:    func() *sandbox.Result { r := isolated(ran("unit", 0, goPass)); r.Namespaces = nil; return r }(),
			want: Blocked, wantReason: ReasonIsolationUnproven, wantExecuted: true,
		},
		{
			name: "defence in depth: a step's own proof shares a namespace", d: admitted(unitStep),
			r: func() *sandbox.Result {
				s := ran("unit", 0, goPass)
				p := s.Namespaces["pid"]
				p.Child = p.Host
				s.Namespaces["pid"] = p
				return isolated(s)
			}(),
			want: Blocked, wantReason: ReasonIsolationUnproven, wantExecuted: true, wantDetail: `step "unit": pid namespace shared`,
		},
		{
			name: "timeout", d: admitted(unitStep),
			r: func() *sandbox.Result {
				s := ran("unit", -1, "=== RUN   TestSlow\n")
				s.TimedOut = true
				return isolated(s)
			}(),
			want: Fail, wantReason: ReasonTimeout, wantExecuted: true, wantIsolated: true,
		},
		{
			name: "timeout outranks output limit", d: admitted(unitStep),
			r: func() *sandbox.Result {
				s := ran("unit", -1, "")
				s.TimedOut, s.OutputLimited = true, true
				return isolated(s)
			}(),
			want: Fail, wantReason: ReasonTimeout, wantExecuted: true, wantIsolated: true,
		},
		{
			name: "output limit", d: admitted(unitStep),
			r:    func() *sandbox.Result { s := ran("unit", -1, "yyyy"); s.OutputLimited = true; return isolated(s) }(),
			want: Fail, wantReason: ReasonOutputLimit, wantExecuted: true, wantIsolated: true,
		},
		{
			name: "non-zero exit", d: admitted(unitStep), r: isolated(ran("unit", 1, goFail)),
			want: Fail, wantReason: ReasonStepFailed, wantExecuted: true, wantIsolated: true, wantDetail: `step "unit" exited 1`,
		},
		{
			name: "counted failure with exit 0", d: admitted(gate.Step{Name: "unit", Tests: "plain"}), r: isolated(ran("unit", 0, "3 passed, 1 failed\n")),
			want: Fail, wantReason: ReasonStepFailed, wantExecuted: true, wantIsolated: true, wantDetail: "1 tests failed",
		},
		{
			name: "nothing countable", d: admitted(unitStep), r: isolated(ran("unit", 0, "ok  \tdemo/calc\t0.003s\n")),
			want: Blocked, wantReason: ReasonRequiredProofNotPassed, wantExecuted: true, wantIsolated: true, wantDetail: "no test results could be counted",
		},
		{
			name: "skip without allow_skips", d: admitted(unitStep), r: isolated(ran("unit", 0, goSkip)),
			want: Blocked, wantReason: ReasonRequiredProofNotPassed, wantExecuted: true, wantIsolated: true, wantDetail: "1 tests skipped",
		},
		{
			name: "pytest 67 passed 2 skipped is not a pass", d: admitted(gate.Step{Name: "py", Tests: "pytest"}),
			r:    isolated(ran("py", 0, "==== 67 passed, 2 skipped in 0.12s ====\n")),
			want: Blocked, wantReason: ReasonRequiredProofNotPassed, wantExecuted: true, wantIsolated: true,
		},
		{
			name: "skip with allow_skips", d: admitted(gate.Step{Name: "unit", Tests: "go", AllowSkips: true}), r: isolated(ran("unit", 0, goSkip)),
			want: Pass, wantReason: ReasonAllStepsPassed, wantExecuted: true, wantIsolated: true,
		},
		{
			name: "a later failure outranks an earlier missing proof", d: admitted(unitStep, gate.Step{Name: "lint"}),
			r:    isolated(ran("unit", 0, goSkip), ran("lint", 2, "vet: bad\n")),
			want: Fail, wantReason: ReasonStepFailed, wantExecuted: true, wantIsolated: true, wantDetail: `"lint" exited 2`,
		},
		{
			name: "a step not launched without failure", d: admitted(unitStep, gate.Step{Name: "lint"}), r: isolated(ran("unit", 0, goPass)),
			want: Error, wantReason: ReasonInternal, wantExecuted: true, wantIsolated: true, wantDetail: `"lint" was not launched`,
		},
		{
			name: "steps after a failure are not launched", d: admitted(gate.Step{Name: "build"}, unitStep), r: isolated(ran("build", 1, "")),
			want: Fail, wantReason: ReasonStepFailed, wantExecuted: true, wantIsolated: true,
		},
		{
			name: "launched step does not match the recipe", d: admitted(unitStep), r: isolated(ran("other", 0, goPass)),
			want: Error, wantReason: ReasonInternal, wantExecuted: true, wantIsolated: true,
		},
		{
			name: "more steps launched than the recipe has", d: admitted(unitStep), r: isolated(ran("unit", 0, goPass), ran("extra", 0, "")),
			want: Error, wantReason: ReasonInternal, wantExecuted: true, wantIsolated: true,
		},
		{
			name: "empty recipe proves nothing", d: admitted(), r: isolated(),
			want: Blocked, wantReason: ReasonRequiredProofNotPassed, wantIsolated: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := Judge(tt.d, tt.r)
			if rc.Outcome != tt.want || rc.Reason != tt.wantReason {
				t.Errorf("Judge() = %s/%s (%q), want %s/%s", rc.Outcome, rc.Reason, rc.Detail, tt.want, tt.wantReason)
			}
			if rc.Executed != tt.wantExecuted {
				t.Errorf("Judge().Executed = %v, want %v", rc.Executed, tt.wantExecuted)
			}
			if rc.Sandbox.Isolated != tt.wantIsolated {
				t.Errorf("Judge().Sandbox.Isolated = %v, want %v (error %q)", rc.Sandbox.Isolated, tt.wantIsolated, rc.Sandbox.Error)
			}
			if !strings.Contains(rc.Detail, tt.wantDetail) {
				t.Errorf("Judge().Detail = %q, want it to contain %q", rc.Detail, tt.wantDetail)
			}
			if rc.Sandbox.Isolated && rc.Sandbox.Error != "" {
				t.Errorf("Judge() isolated with sandbox error %q", rc.Sandbox.Error)
			}
			if rc.Outcome == Pass && (!rc.Sandbox.Isolated || !rc.Executed) {
				t.Errorf("Judge() = PASS with isolated=%v executed=%v", rc.Sandbox.Isolated, rc.Executed)
			}
			if rc.Gate.Changed == nil || rc.Gate.Violations == nil || rc.Steps == nil || rc.Sandbox.Namespaces == nil {
				t.Errorf("Judge() left a nil list or map: %+v", rc)
			}
		})
	}
}

func TestJudgeCopiesFacts(t *testing.T) {
	d := refused(gate.RefusalProtectedPath, "", gate.Violation{Path: "scripts/check.sh", Rule: "step-argv:unit"})
	d.Changed = nil
	rc := Judge(d, nil)
	want := Receipt{
		Outcome:   StopAndAsk,
		Reason:    ReasonProtectedPathChanged,
		Base:      testBase,
		Head:      testHead,
		MergeBase: testMergeBase,
		Recipe:    RecipeRef{Path: ".vouch.yml", SHA256: testRecipeSHA},
		Gate:      GateResult{Changed: []string{}, Violations: []Violation{{Path: "scripts/check.sh", Rule: "step-argv:unit"}}},
		Sandbox:   SandboxFacts{Namespaces: map[string]sandbox.NamespacePair{}},
		Steps:     []StepRecord{},
	}
	if diff := cmp.Diff(want, rc); diff != "" {
		t.Errorf("Judge(protected) (-want +got):\n%s", diff)
	}

	s := ran("unit", 0, goPass)
	r := isolated(s)
	rc = Judge(admitted(unitStep), r)
	wantStep := StepRecord{
		Name: "unit", ExitCode: 0, DurationMS: 1234, OutputBytes: int64(len(goPass)),
		Tests: &TestCounts{Passed: 2}, OutputTail: goPass,
	}
	if diff := cmp.Diff([]StepRecord{wantStep}, rc.Steps); diff != "" {
		t.Errorf("Judge(pass).Steps (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(r.Namespaces, rc.Sandbox.Namespaces); diff != "" {
		t.Errorf("Judge(pass).Sandbox.Namespaces (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(r.Limits, rc.Sandbox.Limits); diff != "" {
		t.Errorf("Judge(pass).Sandbox.Limits (-want +got):\n%s", diff)
	}
	if rc.Sandbox.Provider != "bubblewrap" || rc.Sandbox.Version != "bubblewrap 0.11.0" {
		t.Errorf("Judge(pass).Sandbox = %+v, want provider and version copied", rc.Sandbox)
	}
}

func TestJudgeUnprovenRecordsSharedPair(t *testing.T) {
	r := &sandbox.Result{Provider: "bubblewrap", Unproven: &sandbox.ProofError{Namespace: "net", Host: "net:[1]", Child: "net:[1]"}}
	rc := Judge(admitted(unitStep), r)
	if got := rc.Sandbox.Namespaces["net"]; got != (sandbox.NamespacePair{Host: "net:[1]", Child: "net:[1]"}) {
		t.Errorf("Judge(unproven).Sandbox.Namespaces[net] = %+v, want the shared pair", got)
	}
	if rc.Sandbox.Error != r.Unproven.Error() {
		t.Errorf("Judge(unproven).Sandbox.Error = %q, want %q", rc.Sandbox.Error, r.Unproven.Error())
	}
	if rc.Executed || rc.Sandbox.Isolated {
		t.Errorf("Judge(unproven) executed=%v isolated=%v, want both false", rc.Executed, rc.Sandbox.Isolated)
	}
}

func TestJudgeOutputTail(t *testing.T) {
	// 5 MB of output ending in multi-byte runes placed across the 4 KiB cut.
	out := []byte(strings.Repeat("x", 5<<20) + strings.Repeat("é", 3000) + "\xff end")
	rc := Judge(admitted(gate.Step{Name: "big"}), isolated(ran("big", 0, string(out))))
	tail := rc.Steps[0].OutputTail
	if len(tail) > MaxOutputTail {
		t.Errorf("OutputTail is %d bytes, want at most %d", len(tail), MaxOutputTail)
	}
	if !strings.HasSuffix(tail, "\uFFFD end") || !strings.HasPrefix(tail, "é") {
		t.Errorf("OutputTail = %q...%q, want whole runes and U+FFFD for invalid bytes", tail[:8], tail[len(tail)-8:])
	}
	if rc.Steps[0].OutputBytes != int64(len(out)) {
		t.Errorf("OutputBytes = %d, want %d", rc.Steps[0].OutputBytes, len(out))
	}
}

func TestTail(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"hello", 10, "hello"},
		{"hello", 3, "llo"},
		{"aé", 1, ""},
		{"aéb", 2, "b"},
		{"aéb", 3, "éb"},
		{"a\xffb", 3, "b"},
		{"a\xffb", 4, "\uFFFDb"},
		{"abc", 0, ""},
	}
	for _, tt := range tests {
		if got := Tail([]byte(tt.in), tt.max); got != tt.want {
			t.Errorf("Tail(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
	}
}
