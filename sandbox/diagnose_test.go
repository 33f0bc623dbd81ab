package sandbox

import (
	"strings"
	"testing"
)

func TestDiagnose(t *testing.T) {
	tests := []struct {
		name string
		pe   *ProofError
		want string
	}{
		{"nil", nil, ""},
		{"missing", &ProofError{Cause: `bwrap: exec: "bwrap": executable file not found in $PATH`}, "apt-get install -y bubblewrap"},
		{"apparmor", &ProofError{Cause: "bwrap exited", Stderr: "bwrap: setting up uid map: Permission denied"}, "apparmor_restrict_unprivileged_userns"},
		{"max namespaces", &ProofError{Cause: "bwrap exited", Stderr: "bwrap: No space left on device"}, "user.max_user_namespaces"},
		{"userns clone off", &ProofError{Cause: "bwrap exited", Stderr: "bwrap: Creating new namespace failed: Operation not permitted"}, "unprivileged_userns_clone"},
		{"shared net", &ProofError{Namespace: "net", Host: "net:[1]", Child: "net:[1]"}, "shares the host's net namespace"},
		{"unknown", &ProofError{Cause: "something else"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Diagnose(tt.pe)
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("Diagnose(%+v) = %q, want it to contain %q", tt.pe, got, tt.want)
			}
		})
	}
}
