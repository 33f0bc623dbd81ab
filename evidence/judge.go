package evidence

import (
	"fmt"
	"strings"

	"vouch.dev/vouch/gate"
	"vouch.dev/vouch/sandbox"
)

// maxStderrDetail bounds the provider stderr quoted in a receipt's Detail.
const maxStderrDetail = 8 << 10

// Judge builds the receipt of one verification from what the gate decided and
// what the sandbox observed (nil when nothing was launched). It claims only
// what r shows: isolation is re-checked here, and any doubt is BLOCKED, never
// PASS. The rules, first match wins:
//
//   - d refused: STOP_AND_ASK with the refusal as reason (ERROR/INTERNAL if a
//     step nevertheless ran).
//   - d admitted but r or the recipe missing: ERROR/INTERNAL.
//   - r.Unproven, or isolation not proven here: BLOCKED/ISOLATION_UNPROVEN.
//   - launched steps that do not match the recipe: ERROR/INTERNAL.
//   - a step timed out, hit the output limit, exited non-zero, or counted a
//     failed test: FAIL with TIMEOUT, OUTPUT_LIMIT or STEP_FAILED.
//   - a recipe step that was not launched without a failure: ERROR/INTERNAL.
//   - a step whose tests could not be counted, or counted a skip without
//     allow_skips, or no step at all: BLOCKED/REQUIRED_PROOF_NOT_PASSED.
//   - otherwise PASS/ALL_STEPS_PASSED.
func Judge(d *gate.Decision, r *sandbox.Result) Receipt {
	if d == nil {
		rc := NewError("", "", ReasonInternal, "no gate decision")
		addSandbox(&rc, r, nil)
		return rc
	}
	rc := fromDecision(d)
	addSandbox(&rc, r, d.Recipe)

	if d.Refusal != gate.RefusalNone {
		if rc.Executed {
			return rc.verdict(Error, ReasonInternal, fmt.Sprintf("the gate refused (%s) but the sandbox ran steps", d.Refusal))
		}
		reason, ok := refusalReasons[d.Refusal]
		if !ok {
			return rc.verdict(Error, ReasonInternal, fmt.Sprintf("unknown gate refusal %q: %s", d.Refusal, d.Detail))
		}
		return rc.verdict(StopAndAsk, reason, d.Detail)
	}
	if r == nil {
		return rc.verdict(Error, ReasonInternal, "the gate admitted the head but there is no sandbox result")
	}
	if d.Recipe == nil {
		return rc.verdict(Error, ReasonInternal, "the gate admitted the head without a recipe")
	}
	if pe := r.Unproven; pe != nil {
		detail := pe.Error()
		if pe.Step != "" {
			detail = fmt.Sprintf("step %q not released: %s", pe.Step, detail)
		}
		if pe.Stderr != "" {
			detail += "\nprovider stderr:\n" + headString(strings.ToValidUTF8(pe.Stderr, "\uFFFD"), maxStderrDetail)
		}
		return rc.verdict(Blocked, ReasonIsolationUnproven, detail)
	}
	if !rc.Sandbox.Isolated && r.Mode != sandbox.ModeTrustedDevelopment {
		return rc.verdict(Blocked, ReasonIsolationUnproven, "isolation unproven: "+rc.Sandbox.Error)
	}
	steps := d.Recipe.Steps
	if len(r.Steps) > len(steps) {
		return rc.verdict(Error, ReasonInternal, fmt.Sprintf("the sandbox launched %d steps, the recipe has %d", len(r.Steps), len(steps)))
	}
	for i, s := range r.Steps {
		if s.Name != steps[i].Name {
			return rc.verdict(Error, ReasonInternal, fmt.Sprintf("launched step %d is %q, the recipe's is %q", i+1, s.Name, steps[i].Name))
		}
	}

	// A definite failure outranks a missing proof: FAIL before BLOCKED.
	var blocked string
	for i, s := range r.Steps {
		rec := rc.Steps[i]
		switch {
		case s.TimedOut:
			return rc.verdict(Fail, ReasonTimeout, fmt.Sprintf("step %q timed out and was killed", s.Name))
		case s.OutputLimited:
			return rc.verdict(Fail, ReasonOutputLimit, fmt.Sprintf("step %q passed the output limit and was killed", s.Name))
		case s.ExitCode != 0:
			return rc.verdict(Fail, ReasonStepFailed, fmt.Sprintf("step %q exited %d", s.Name, s.ExitCode))
		case rec.Tests != nil && rec.Tests.Failed > 0:
			return rc.verdict(Fail, ReasonStepFailed, fmt.Sprintf("step %q exited 0 but %d tests failed", s.Name, rec.Tests.Failed))
		}
		if blocked != "" {
			continue
		}
		switch want := steps[i]; {
		case want.Tests != "" && rec.Tests == nil:
			blocked = fmt.Sprintf("step %q: the recipe says tests: %s but no test results could be counted in its output", s.Name, want.Tests)
		case rec.Tests != nil && rec.Tests.Skipped > 0 && !want.AllowSkips:
			blocked = fmt.Sprintf("step %q: %d tests skipped and allow_skips is false", s.Name, rec.Tests.Skipped)
		}
	}
	if len(r.Steps) < len(steps) {
		return rc.verdict(Error, ReasonInternal, fmt.Sprintf("step %q was not launched", steps[len(r.Steps)].Name))
	}
	if blocked != "" {
		return rc.verdict(Blocked, ReasonRequiredProofNotPassed, blocked)
	}
	if len(r.Steps) == 0 {
		return rc.verdict(Blocked, ReasonRequiredProofNotPassed, "the recipe has no steps, so nothing was proven")
	}
	return rc.verdict(Pass, ReasonAllStepsPassed, "")
}

// refusalReasons maps each gate refusal to its reason code.
var refusalReasons = map[gate.Refusal]Reason{
	gate.RefusalNoTrustedRecipe: ReasonNoTrustedRecipe,
	gate.RefusalInvalidRecipe:   ReasonInvalidRecipe,
	gate.RefusalProtectedPath:   ReasonProtectedPathChanged,
	gate.RefusalUnsafeTree:      ReasonUnsafeTree,
}

// verdict sets the outcome, reason and detail of rc and returns it.
func (rc Receipt) verdict(o Outcome, reason Reason, detail string) Receipt {
	rc.Outcome, rc.Reason, rc.Detail = o, reason, detail
	return rc
}

// fromDecision fills what the gate knows: SHAs, recipe and gate result.
func fromDecision(d *gate.Decision) Receipt {
	rc := empty(d.Base, d.Head)
	rc.MergeBase = d.MergeBase
	rc.Recipe = RecipeRef{Path: gate.RecipePath, SHA256: d.RecipeSHA256}
	budget := MaxReceiptPathBytes
	keep := func(p string) bool {
		budget -= len(p)
		return len(rc.Gate.Changed)+len(rc.Gate.Violations) < 2*MaxReceiptPaths && budget >= 0
	}
	for _, p := range d.Changed {
		if len(rc.Gate.Changed) == MaxReceiptPaths || !keep(p) {
			break
		}
		rc.Gate.Changed = append(rc.Gate.Changed, p)
	}
	for _, v := range d.Violations {
		if len(rc.Gate.Violations) == MaxReceiptPaths || !keep(v.Path+v.Rule) {
			break
		}
		rc.Gate.Violations = append(rc.Gate.Violations, Violation{Path: v.Path, Rule: v.Rule})
	}
	if len(rc.Gate.Changed) < len(d.Changed) || len(rc.Gate.Violations) < len(d.Violations) {
		rc.Gate.ChangedTotal, rc.Gate.ViolationsTotal = len(d.Changed), len(d.Violations)
	}
	return rc
}

// MaxReceiptPathBytes bounds the bytes of the paths (and rules) a receipt
// lists, whatever their number.
const MaxReceiptPathBytes = 2 << 20

// MaxReceiptPaths bounds the changed paths and the violations a receipt
// lists (each list, and with MaxReceiptPathBytes their bytes), so that one
// pull request cannot make every receipt, envelope and evidence page of it
// huge; past either bound, the totals are recorded beside what is listed.
const MaxReceiptPaths = 10000

// addSandbox copies what r observed into rc: facts, whether anything was
// released to run, and one record per launched step, with its tests counted
// when the recipe's step of the same position and name names a format.
func addSandbox(rc *Receipt, r *sandbox.Result, recipe *gate.Recipe) {
	rc.Steps = []StepRecord{}
	if r == nil {
		return
	}
	rc.Executed = len(r.Steps) > 0
	rc.Sandbox.Provider = r.Provider
	rc.Sandbox.Version = r.Version
	rc.Sandbox.Mode = "isolated"
	if r.Mode == sandbox.ModeTrustedDevelopment {
		rc.Sandbox.Mode = string(sandbox.ModeTrustedDevelopment)
	}
	rc.Sandbox.Path = r.Path
	rc.Sandbox.SHA256 = r.SHA256
	for k, p := range r.Namespaces {
		rc.Sandbox.Namespaces[k] = p
	}
	if pe := r.Unproven; pe != nil {
		for k, p := range pe.Observed {
			rc.Sandbox.Namespaces[k] = p
		}
		if pe.Namespace != "" {
			rc.Sandbox.Namespaces[pe.Namespace] = sandbox.NamespacePair{Host: pe.Host, Child: pe.Child}
		}
	}
	rc.Sandbox.Limits = append([]sandbox.AppliedLimit(nil), r.Limits...)
	if rc.Executed && r.Seccomp.SHA256 != "" {
		sc := r.Seccomp
		rc.Sandbox.Seccomp = &sc
	}
	switch {
	case r.Unproven != nil:
		rc.Sandbox.Error = r.Unproven.Error()
	default:
		rc.Sandbox.Error = checkIsolation(r)
		rc.Sandbox.Isolated = rc.Sandbox.Error == ""
	}
	for i, s := range r.Steps {
		rec := StepRecord{
			Name:          s.Name,
			ExitCode:      s.ExitCode,
			DurationMS:    s.Duration.Milliseconds(),
			TimedOut:      s.TimedOut,
			OutputLimited: s.OutputLimited,
			OOMKilled:     s.OOMKilled,
			CPUMS:         s.CPUTime.Milliseconds(),
			OutputBytes:   s.OutputBytes,
			OutputTail:    Tail(s.Output, MaxOutputTail),
		}
		if recipe != nil && i < len(recipe.Steps) && recipe.Steps[i].Name == s.Name && recipe.Steps[i].Tests != "" {
			if c, ok := CountTests(recipe.Steps[i].Tests, s.Output); ok {
				rec.Tests = &c
			}
		}
		rc.Steps = append(rc.Steps, rec)
	}
}
