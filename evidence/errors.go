package evidence

import (
	"vouch.dev/vouch/gate"
	"vouch.dev/vouch/sandbox"
)

// NewError returns the receipt of a verification the bot itself could not
// complete (outcome ERROR): nothing is claimed beyond the two SHAs, and
// nothing ran. reason is normally ReasonInternal.
func NewError(base, head string, reason Reason, detail string) Receipt {
	rc := empty(base, head)
	return rc.verdict(Error, reason, detail)
}

// AwaitApproval returns the STOP_AND_ASK/UNTRUSTED_AUTHOR receipt for a head
// the gate admitted but whose author may not run code until a maintainer
// approves this exact head. Nothing ran. detail says who the author is.
func AwaitApproval(d *gate.Decision, detail string) Receipt {
	if d == nil {
		return NewError("", "", ReasonInternal, "no gate decision")
	}
	rc := fromDecision(d)
	return rc.verdict(StopAndAsk, ReasonUntrustedAuthor, detail)
}

// AwaitApprovalUnread returns the STOP_AND_ASK/UNTRUSTED_AUTHOR receipt of
// a head vouch did not even fetch: an untrusted author's code is neither
// downloaded nor gated until a maintainer approves the head, so the
// receipt names only the two commits (recipe path empty: not read).
func AwaitApprovalUnread(base, head, detail string) Receipt {
	rc := empty(base, head)
	return rc.verdict(StopAndAsk, ReasonUntrustedAuthor, detail)
}

// empty is a receipt with the given SHAs whose lists and maps are empty
// rather than nil, so that its JSON shows [] and {} instead of null.
func empty(base, head string) Receipt {
	return Receipt{
		Base:    base,
		Head:    head,
		Gate:    GateResult{Changed: []string{}, Violations: []Violation{}},
		Sandbox: SandboxFacts{Namespaces: map[string]sandbox.NamespacePair{}},
		Steps:   []StepRecord{},
	}
}
