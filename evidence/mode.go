package evidence

import "vouch.dev/vouch/sandbox"

// NotIsolated is what every surface says about a run in the operator's
// trusted-development mode.
const NotIsolated = "NOT ISOLATED"

// notIsolatedTag is appended to a verdict line: empty for isolated runs and
// runs that launched nothing, " — NOT ISOLATED (trusted-development mode)"
// otherwise.
func notIsolatedTag(rc Receipt) string {
	if rc.Sandbox.Mode == string(sandbox.ModeTrustedDevelopment) {
		return " — " + NotIsolated + " (trusted-development mode: steps ran without a sandbox)"
	}
	return ""
}
