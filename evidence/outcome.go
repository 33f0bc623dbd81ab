// Package evidence turns what the gate decided and the sandbox observed into
// the contract's receipt, the human summary and the maintainer's comment. It
// never claims what was not observed.
package evidence

// Outcome is the contract's verdict of one verification.
type Outcome string

// The contract's outcomes.
const (
	Pass       Outcome = "PASS"
	Fail       Outcome = "FAIL"
	StopAndAsk Outcome = "STOP_AND_ASK"
	Blocked    Outcome = "BLOCKED"
	Error      Outcome = "ERROR"
)

// Reason is the contract's reason code; one per receipt.
type Reason string

// The contract's reason codes.
const (
	ReasonAllStepsPassed         Reason = "ALL_STEPS_PASSED"
	ReasonStepFailed             Reason = "STEP_FAILED"
	ReasonTimeout                Reason = "TIMEOUT"
	ReasonOutputLimit            Reason = "OUTPUT_LIMIT"
	ReasonProtectedPathChanged   Reason = "PROTECTED_PATH_CHANGED"
	ReasonNoTrustedRecipe        Reason = "NO_TRUSTED_RECIPE"
	ReasonInvalidRecipe          Reason = "INVALID_RECIPE"
	ReasonUnsafeTree             Reason = "UNSAFE_TREE"
	ReasonUntrustedAuthor        Reason = "UNTRUSTED_AUTHOR"
	ReasonIsolationUnproven      Reason = "ISOLATION_UNPROVEN"
	ReasonRequiredProofNotPassed Reason = "REQUIRED_PROOF_NOT_PASSED"
	ReasonSuperseded             Reason = "SUPERSEDED"
	ReasonInternal               Reason = "INTERNAL"
)

// ExitCode maps an outcome to `vouch verify`'s exit status (contract).
func ExitCode(o Outcome) int {
	switch o {
	case Pass:
		return 0
	case Fail:
		return 1
	case StopAndAsk:
		return 3
	case Blocked:
		return 4
	default:
		return 2
	}
}
