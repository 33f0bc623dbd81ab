package evidence

import "vouch.dev/vouch/sandbox"

// Receipt is the machine-readable evidence of one verification, with at least
// the keys the contract names.
type Receipt struct {
	Outcome   Outcome      `json:"outcome"`
	Reason    Reason       `json:"reason"`
	Detail    string       `json:"detail,omitempty"`
	Base      string       `json:"base"`
	Head      string       `json:"head"`
	MergeBase string       `json:"merge_base"`
	Recipe    RecipeRef    `json:"recipe"`
	Gate      GateResult   `json:"gate"`
	Executed  bool         `json:"executed"`
	Sandbox   SandboxFacts `json:"sandbox"`
	Steps     []StepRecord `json:"steps"`
}

// RecipeRef names the trusted recipe that was used.
type RecipeRef struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// GateResult is what the gate saw.
type GateResult struct {
	Changed    []string    `json:"changed"`
	Violations []Violation `json:"violations"`
	// ChangedTotal and ViolationsTotal are set only when a list was cut at
	// MaxReceiptPaths: they are the full counts.
	ChangedTotal    int `json:"changed_total,omitempty"`
	ViolationsTotal int `json:"violations_total,omitempty"`
}

// Violation is a path and the rule that caught it.
type Violation struct {
	Path string `json:"path"`
	Rule string `json:"rule"`
}

// SandboxFacts are what the sandbox observed; empty when nothing was launched.
type SandboxFacts struct {
	Provider string `json:"provider"`
	Version  string `json:"version"`
	// Path and SHA256 identify the provider binary that was run.
	Path     string `json:"path,omitempty"`
	SHA256   string `json:"sha256,omitempty"`
	Isolated bool   `json:"isolated"`
	// Mode is "isolated", or "trusted-development" when the operator chose
	// to run steps without isolation.
	Mode       string                           `json:"mode,omitempty"`
	Namespaces map[string]sandbox.NamespacePair `json:"namespaces"`
	Limits     []sandbox.AppliedLimit           `json:"limits,omitempty"`
	// Seccomp identifies the syscall filter the launched steps ran under.
	Seccomp *sandbox.SeccompFacts `json:"seccomp,omitempty"`
	Error   string                `json:"error,omitempty"`
}

// StepRecord is one launched step.
type StepRecord struct {
	Name          string `json:"name"`
	ExitCode      int    `json:"exit_code"`
	DurationMS    int64  `json:"duration_ms"`
	TimedOut      bool   `json:"timed_out,omitempty"`
	OutputLimited bool   `json:"output_limited,omitempty"`
	// OOMKilled is set when the kernel killed a process of the step for
	// exceeding its memory limit.
	OOMKilled bool `json:"oom_killed,omitempty"`
	// CPUMS is the CPU time the step's processes used, when accounted.
	CPUMS       int64 `json:"cpu_ms,omitempty"`
	OutputBytes int64 `json:"output_bytes"`
	// Tests is nil when the recipe asked for no counting or none was found.
	Tests *TestCounts `json:"tests,omitempty"`
	// OutputTail is the last part of the step's output, bounded.
	OutputTail string `json:"output_tail,omitempty"`
}

// TestCounts are the tests counted in a step's output.
type TestCounts struct {
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
}
