package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDoctor(t *testing.T) {
	real := requireBwrap(t)
	tests := []struct {
		name   string
		script string // "" uses the real bwrap
		code   int
		want   []string
	}{
		{"real bwrap", "", 0, []string{"isolation proven", "net:[", "differs", "seccomp:   mode 2", "effective 0000000000000000", "NoNewPrivs 1", "Uid 1000"}},
		{"missing bwrap", "-", 1, []string{"NOT ISOLATED", "apt-get install -y bubblewrap"}},
		{"shares the network", lyingProviders(real)["drops --unshare-net"], 1, []string{"NOT ISOLATED", "SHARED", "shares the host's net namespace"}},
		{"exits 0", lyingProviders(real)["exits 0"], 1, []string{"NOT ISOLATED", "never reported a sandboxed child"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			switch tt.script {
			case "":
				t.Setenv("VOUCH_BWRAP", real)
			case "-":
				t.Setenv("VOUCH_BWRAP", filepath.Join(t.TempDir(), "no-such-bwrap"))
			default:
				fake := filepath.Join(traversable(t), "bwrap")
				if err := os.WriteFile(fake, []byte(tt.script), 0o755); err != nil {
					t.Fatal(err)
				}
				t.Setenv("VOUCH_BWRAP", fake)
			}
			code, stdout, stderr := vouch(t, "doctor")
			if code != tt.code {
				t.Errorf("vouch doctor exit = %d, want %d\n%s%s", code, tt.code, stdout, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("vouch doctor output lacks %q:\n%s", w, stdout)
				}
			}
		})
	}
}
