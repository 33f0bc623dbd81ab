package gate

// Refusal is why the gate did not admit a head. Its values are the contract's
// reason codes; the empty Refusal means admitted.
type Refusal string

// The gate's refusals, as named by the contract.
const (
	RefusalNone            Refusal = ""
	RefusalNoTrustedRecipe Refusal = "NO_TRUSTED_RECIPE"
	RefusalInvalidRecipe   Refusal = "INVALID_RECIPE"
	RefusalProtectedPath   Refusal = "PROTECTED_PATH_CHANGED"
	RefusalUnsafeTree      Refusal = "UNSAFE_TREE"
)

// Violation is one path that broke a rule.
type Violation struct {
	// Path is the repository-relative path.
	Path string `json:"path"`
	// Rule names what caught it. Protected paths: "always:.vouch.yml",
	// "recipe:<glob>", "step:<step name>", "operator:<glob>"; a glob's
	// rule reached through a symlink of base reads
	// "recipe:<glob> via symlink <link> -> <target>"; any of them is
	// followed by " (differs from base)" when only base..head, not
	// merge-base..head, changes the path. Unsafe trees: "symlink-escape",
	// "dotdot", "dotgit", "absolute-path", "bad-name", "bad-mode",
	// "bad-tree" (an object of head that is malformed, missing or of the
	// wrong type), "gitlink", "max-files", "max-bytes", "max-tree-bytes".
	Rule string `json:"rule"`
}

// Decision is the gate's verdict on one frozen (base, head) pair. Only an
// admitted decision carries a Plan.
type Decision struct {
	// Base, Head and MergeBase are the frozen 40-hex SHAs.
	Base, Head, MergeBase string
	// Recipe is base's recipe, nil when absent or invalid.
	Recipe *Recipe
	// RecipeSHA256 is the hex digest of base's recipe bytes, "" when absent.
	RecipeSHA256 string
	// Changed lists every path merge-base..head touches, sorted, unique.
	Changed []string
	// Violations lists the paths that caused a refusal, with their rules.
	Violations []Violation
	// Refusal is why the head was not admitted; RefusalNone when admitted.
	Refusal Refusal
	// Detail explains the refusal for humans (parser message with line, ...).
	Detail string

	plan *Plan
}

// Admitted reports whether the head may run, and if so the plan to run.
func (d *Decision) Admitted() (*Plan, bool) {
	if d == nil || d.Refusal != RefusalNone || d.plan == nil {
		return nil, false
	}
	return d.plan, true
}
