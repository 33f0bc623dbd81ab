package evidence

import (
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"vouch.dev/vouch/sandbox"
)

// StatusContext is the commit status context every vouch status is posted under.
const StatusContext = "vouch/verify"

// MaxStatusDescription is the most characters (runes) a commit status
// description may have.
const MaxStatusDescription = 140

// The commit status states vouch posts; GitHub and Gitea both accept them.
const (
	StateSuccess = "success"
	StateFailure = "failure"
	StateError   = "error"
	StatePending = "pending"
)

// StatusView is a commit status ready to post: the forge-neutral fields of
// GitHub's and Gitea's "create a commit status" calls.
type StatusView struct {
	State       string
	Context     string
	Description string
	TargetURL   string
}

// Phase is where a verification that has no receipt yet is.
type Phase string

// The phases shown as a pending status.
const (
	Queued  Phase = "queued"
	Running Phase = "running"
)

// Status returns the commit status of rc: state per the contract (PASS
// success; FAIL and STOP_AND_ASK failure; BLOCKED and ERROR error), context
// StatusContext, target URL pageURL (dropped unless it is an absolute http(s)
// URL) and a description of at most MaxStatusDescription runes that starts
// with the outcome and reason and then says why. A run that was not isolated
// (trusted-development mode, or BLOCKED without observed isolation) always
// says "NOT ISOLATED" before the why, which is what gets cut when space runs
// out. Text from the pull request in the why is made one inert line.
//
// A receipt with reason SUPERSEDED gets state "error" and a description
// starting "SUPERSEDED", whatever its outcome: a newer head replaced the
// commit before it got a verdict. "success" would vouch for code nobody
// verified, "failure" would blame the code for something it did not do, and
// "pending" would never resolve; "error" is GitHub's and Gitea's "no result
// could be produced", which is exactly the case.
func Status(rc Receipt, pageURL string) StatusView {
	v := StatusView{Context: StatusContext, TargetURL: targetURL(pageURL)}
	if rc.Reason == ReasonSuperseded {
		v.State = StateError
		v.Description = describe("SUPERSEDED", "not verified, a newer head replaced this one", firstLine(rc.Detail))
		return v
	}
	v.State = statusState(rc.Outcome)
	head := fmt.Sprintf("%s (%s)", oneLine(string(rc.Outcome), 32), oneLine(string(rc.Reason), 40))
	if notIsolated(rc) {
		head += " " + NotIsolated
	}
	v.Description = describe(head, statusWhy(rc), "")
	return v
}

// Pending returns the pending status of a verification in phase (Queued
// unless Running), whose evidence page is pageURL.
func Pending(phase Phase, pageURL string) StatusView {
	name, why := "QUEUED", "waiting for a worker to verify this head"
	if phase == Running {
		name, why = "RUNNING", "verifying this head in the sandbox"
	}
	return StatusView{
		State:       StatePending,
		Context:     StatusContext,
		Description: describe(name, why, ""),
		TargetURL:   targetURL(pageURL),
	}
}

// statusState maps an outcome to the contract's commit status state; an
// unknown outcome is an error, never a success.
func statusState(o Outcome) string {
	switch o {
	case Pass:
		return StateSuccess
	case Fail, StopAndAsk:
		return StateFailure
	default:
		return StateError
	}
}

// notIsolated reports whether the status must say NOT ISOLATED: the steps
// ran in trusted-development mode, or the run is BLOCKED and isolation was not
// observed.
func notIsolated(rc Receipt) bool {
	return rc.Sandbox.Mode == string(sandbox.ModeTrustedDevelopment) || rc.Outcome == Blocked && !rc.Sandbox.Isolated
}

// statusWhy is the reason in words: fixed text for outcomes whose detail may
// hold internals or is too long to help, else the first line of the detail.
func statusWhy(rc Receipt) string {
	if rc.Sandbox.Mode == string(sandbox.ModeTrustedDevelopment) && rc.Outcome != Blocked {
		prefix := "trusted-development mode, no sandbox"
		if rc.Outcome == Pass {
			return prefix + fmt.Sprintf("; %d %s passed", len(rc.Steps), plural(len(rc.Steps), "step", "steps"))
		}
		return prefix + "; " + firstLine(rc.Detail)
	}
	switch rc.Outcome {
	case Pass:
		return fmt.Sprintf("%d %s passed in an isolated sandbox", len(rc.Steps), plural(len(rc.Steps), "step", "steps"))
	case StopAndAsk:
		return askWhy(rc)
	case Error:
		return "vouch itself failed; no verdict on this pull request"
	}
	if why := firstLine(rc.Detail); why != "" {
		return why
	}
	return outcomeSentence(rc.Outcome)
}

// askWhy says in a few words what a STOP_AND_ASK needs.
func askWhy(rc Receipt) string {
	switch rc.Reason {
	case ReasonUntrustedAuthor:
		return "nothing ran; a maintainer may reply /verify approve for " + shortSHA(rc.Head)
	case ReasonProtectedPathChanged:
		return "nothing ran; protected paths changed, a maintainer must land them via their own branch"
	case ReasonNoTrustedRecipe:
		return "nothing ran; the base has no .vouch.yml"
	case ReasonInvalidRecipe:
		return "nothing ran; the base's .vouch.yml is invalid"
	case ReasonUnsafeTree:
		return "nothing ran; the head has entries vouch will not check out"
	default:
		return "nothing ran; a maintainer must decide"
	}
}

// firstLine is the first non-empty line of s, inert and bounded.
func firstLine(s string) string {
	for l := range strings.SplitSeq(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			// Cut before escaping: the description keeps 140 runes at most.
			return oneLine(headString(l, 8*MaxStatusDescription), 1024)
		}
	}
	return ""
}

// describe joins head, why and more into "head: why; more", with HTML
// comment openers broken, cutting why and more, never head, to
// MaxStatusDescription runes.
func describe(head, why, more string) string {
	if more != "" {
		why += "; " + more
	}
	s := head
	if why != "" {
		s += ": " + why
	}
	// Cut before escaping: what a description keeps fits in 8 bytes a rune.
	return boundRunes(defuse(headString(s, 8*MaxStatusDescription)), MaxStatusDescription)
}

// boundRunes cuts s to at most n runes, ending with "…" when cut.
func boundRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i, count := 0, 0
	for i = range s {
		if count == n-1 {
			break
		}
		count++
	}
	return strings.TrimRight(s[:i], " ;:,") + "…"
}

// targetURL returns u when it is an absolute http or https URL, else "".
func targetURL(u string) string {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return ""
	}
	return u
}
