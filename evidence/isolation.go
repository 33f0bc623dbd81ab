package evidence

import (
	"fmt"

	"vouch.dev/vouch/sandbox"
)

// checkIsolation re-checks, independently of the sandbox, that r proves every
// launched step ran in namespaces that differ from the host's: r.Isolated is
// set, and r.Namespaces and each step's Namespaces hold every kind in
// sandbox.Namespaces with a non-empty host and child that differ. It returns
// "" when proven, otherwise what is missing.
func checkIsolation(r *sandbox.Result) string {
	if !r.Isolated {
		return "the sandbox did not report isolation"
	}
	if why := checkNamespaces(r.Namespaces); why != "" {
		return why
	}
	for _, s := range r.Steps {
		if why := checkNamespaces(s.Namespaces); why != "" {
			return fmt.Sprintf("step %q: %s", s.Name, why)
		}
	}
	return ""
}

// checkNamespaces reports why ns is not a proof of isolation, or "".
func checkNamespaces(ns map[string]sandbox.NamespacePair) string {
	if len(ns) == 0 {
		return "no namespace proof was recorded"
	}
	for _, kind := range sandbox.Namespaces {
		p, ok := ns[kind]
		switch {
		case !ok || p.Host == "" || p.Child == "":
			return fmt.Sprintf("%s namespace was not observed", kind)
		case p.Host == p.Child:
			return fmt.Sprintf("%s namespace shared with host (%s == %s)", kind, p.Host, p.Child)
		}
	}
	return ""
}
