package gate

import "time"

// RecipePath is where the trusted recipe lives, at the root of the base tree.
const RecipePath = ".vouch.yml"

// Recipe is the parsed `.vouch.yml` of the base commit (contract: "The recipe").
type Recipe struct {
	// Version is the recipe format version; only 1 exists.
	Version int
	// Protected are doublestar globs, repository-relative, that head may not touch.
	Protected []string
	// Steps run in order in the sandbox, with the head tree as working directory.
	Steps []Step
	// Env is added to the sandbox's otherwise clean environment.
	Env map[string]string
	// Toolchains name operator-configured read-only host mounts.
	Toolchains []string
	// Limits asked for by the recipe; zero fields mean "the operator default".
	Limits Limits
}

// Step is one command of a recipe.
type Step struct {
	// Name identifies the step in evidence.
	Name string
	// Run is the argv; no shell unless argv names one.
	Run []string
	// Timeout bounds the step's wall time; zero means DefaultStepTimeout.
	Timeout time.Duration
	// Tests names the output format to count tests in: "", "go", "pytest", "tap" or "plain".
	Tests string
	// AllowSkips lets a counted skipped test still pass.
	AllowSkips bool
}

// DefaultStepTimeout applies to a step whose recipe entry sets no timeout.
const DefaultStepTimeout = 10 * time.Minute

// Deadline is the step's timeout, DefaultStepTimeout when the recipe set none.
func (s Step) Deadline() time.Duration {
	if s.Timeout <= 0 {
		return DefaultStepTimeout
	}
	return s.Timeout
}

// Limits are resource bounds; zero means "not set".
type Limits struct {
	// Memory is in bytes.
	Memory int64
	// Pids is the maximum number of processes.
	Pids int
	// Tmp is the size in bytes of each tmpfs (/tmp and HOME).
	Tmp int64
	// Output is the cap in bytes on one step's combined stdout and stderr.
	Output int64
}
