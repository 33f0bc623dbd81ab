package sandbox

import "strings"

// Diagnose names the likely cause of an unproven sandbox and its remedy, from
// what the provider said. It returns "" when nothing specific is recognised.
func Diagnose(pe *ProofError) string {
	if pe == nil {
		return ""
	}
	text := pe.Cause + "\n" + pe.Stderr
	switch {
	case strings.Contains(pe.Cause, "not found") || strings.Contains(pe.Cause, "executable file not found"):
		return "bubblewrap is not installed or not on PATH: apt-get install -y bubblewrap (or set VOUCH_BWRAP)"
	case strings.Contains(text, "setting up uid map") || strings.Contains(text, "uid_map"):
		return "the kernel refused the user namespace's uid map; on Ubuntu set kernel.apparmor_restrict_unprivileged_userns=0 " +
			"or install an AppArmor profile for bwrap granting 'userns,'"
	case strings.Contains(text, "No space left on device"):
		return "user namespaces are exhausted or disabled: check sysctl user.max_user_namespaces (must be > 0)"
	case strings.Contains(text, "Operation not permitted") && strings.Contains(text, "namespace"):
		return "unprivileged user namespaces are disabled: set kernel.unprivileged_userns_clone=1 (Debian) " +
			"or check kernel.apparmor_restrict_unprivileged_userns (Ubuntu)"
	case pe.Namespace != "":
		return "the provider exited normally but its child shares the host's " + pe.Namespace +
			" namespace: the bwrap binary is not the real one or ignores its flags; check VOUCH_BWRAP and PATH"
	case strings.Contains(pe.Cause, "child-pid") || strings.Contains(pe.Cause, "child pid") || strings.Contains(pe.Cause, "bwrap info"):
		return "the provider never reported a sandboxed child: the bwrap binary is not the real one or is too old (needs --info-fd and --block-fd)"
	}
	return ""
}
