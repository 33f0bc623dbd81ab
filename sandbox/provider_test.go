package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUntrustedProviderRefused: a bwrap that others could have replaced is
// refused before it is ever run (its marker is absent).
func TestUntrustedProviderRefused(t *testing.T) {
	real := requireBwrap(t)
	tests := []struct {
		name string
		mode os.FileMode
		uid  int
		want string
	}{
		{"world-writable", 0o777, -1, "writable by group or others"},
		{"group-writable", 0o775, -1, "writable by group or others"},
		{"owned by another user", 0o755, DefaultUID, "owned by uid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.uid >= 0 && os.Geteuid() != 0 {
				t.Skip("chown to another uid needs root")
			}
			dir := traversableDir(t)
			ran := filepath.Join(dir, "provider-ran")
			fake := fakeBwrap(t, dir, "bwrap", "#!/bin/sh\ntouch "+ran+"\nexec "+real+" \"$@\"\n")
			if err := os.Chmod(fake, tt.mode); err != nil {
				t.Fatal(err)
			}
			if tt.uid >= 0 {
				if err := os.Chown(fake, tt.uid, tt.uid); err != nil {
					t.Fatal(err)
				}
			}
			r := testRunner(t, func(c *Config) { c.Bwrap = fake })
			res, err := r.Probe(t.Context())
			if err != nil {
				t.Fatalf("Probe: %v", err)
			}
			if res.Unproven == nil || !strings.Contains(res.Unproven.Cause, tt.want) || res.Isolated {
				t.Fatalf("Probe = %+v, want unproven: %s", res, tt.want)
			}
			if _, err := os.Stat(ran); err == nil {
				t.Error("the untrusted provider was run")
			}
		})
	}
}

// TestProviderDigestRecorded: the result names the exact binary that ran.
func TestProviderDigestRecorded(t *testing.T) {
	requireBwrap(t)
	r := testRunner(t, nil)
	res, err := r.Probe(t.Context())
	if err != nil {
		t.Fatalf("Probe: %v", err)
	}
	if len(res.SHA256) != 64 || res.SHA256 != fileSHA256(res.Path) {
		t.Errorf("SHA256 = %q for %s", res.SHA256, res.Path)
	}
}
