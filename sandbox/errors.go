package sandbox

import "fmt"

// ProofError says isolation could not be proven for a launch. The child was
// killed before it was released, so nothing of the step ran.
type ProofError struct {
	// Namespace is the kind found shared with the host, "" for other causes.
	Namespace string
	// Host and Child are the two namespace links compared, when known.
	Host, Child string
	// Cause describes what went wrong (no child pid reported, bwrap missing, ...).
	Cause string
	// Observed holds every namespace pair read before the launch was refused,
	// when the child's namespaces could be read at all.
	Observed map[string]NamespacePair
	// Stderr is what the provider wrote to stderr, bounded.
	Stderr string
	// Step names the recipe step whose launch was refused, "" before any.
	Step string
}

// Error says which namespace was shared, or why the proof failed otherwise.
func (e *ProofError) Error() string {
	if e.Namespace != "" {
		return fmt.Sprintf("isolation unproven: %s namespace shared with host (%s == %s)", e.Namespace, e.Host, e.Child)
	}
	return "isolation unproven: " + e.Cause
}
