package evidence

import (
	"encoding/json"

	"vouch.dev/vouch/sandbox"
)

// JSON returns the receipt as indented JSON followed by a newline. The
// output is stable: fixed key order, sorted namespace keys, and empty lists
// and maps written as [] and {}, never null.
func (rc Receipt) JSON() ([]byte, error) {
	rc.Gate.Changed = nonNil(rc.Gate.Changed)
	rc.Gate.Violations = nonNil(rc.Gate.Violations)
	rc.Steps = nonNil(rc.Steps)
	if rc.Sandbox.Namespaces == nil {
		rc.Sandbox.Namespaces = map[string]sandbox.NamespacePair{}
	}
	b, err := json.MarshalIndent(rc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// nonNil returns s, or an empty slice when s is nil.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
