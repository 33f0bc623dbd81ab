package sandbox

import (
	"os"
	"strings"
	"testing"
	"time"

	"vouch.dev/vouch/gate"
)

// TestDefaultModeIsolated: nothing turns trusted-development on by default.
func TestDefaultModeIsolated(t *testing.T) {
	if m := DefaultConfig().Mode; m != ModeIsolated {
		t.Fatalf("DefaultConfig().Mode = %q, want isolated", m)
	}
	var zero Config
	if zero.Mode != ModeIsolated {
		t.Fatalf("zero Config.Mode = %q, want isolated", zero.Mode)
	}
	bad := DefaultConfig()
	bad.Mode = "fast"
	if err := bad.Validate(); err == nil {
		t.Fatal("Validate accepted an unknown mode")
	}
}

// TestTrustedDevelopmentRuns: the operator's trusted mode runs steps without
// bwrap (even when none is installed), records Isolated false, still keeps
// the clean environment, the fresh workspace, the timeout and the output cap.
func TestTrustedDevelopmentRuns(t *testing.T) {
	t.Setenv("VOUCH_CANARY", "must-not-leak")
	r := testRunner(t, func(c *Config) {
		c.Mode = ModeTrustedDevelopment
		c.Bwrap = "/nonexistent/bwrap"
	})
	recipe := gate.Recipe{Version: 1, Limits: gate.Limits{Output: 4096}, Steps: []gate.Step{
		{Name: "env", Run: []string{"sh", "-c", `test -f input && test -z "$VOUCH_CANARY" && test "$CI" = true && touch "$HOME/h" && echo ok`}},
		{Name: "fresh", Run: []string{"sh", "-c", `echo changed > input`}},
		{Name: "slow", Run: []string{"sleep", "30"}, Timeout: 200 * time.Millisecond},
	}}
	res, err := r.run(t.Context(), r.logger, recipe, writeFile("input", "tree"))
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if res.Isolated || res.Mode != ModeTrustedDevelopment || res.Unproven != nil || len(res.Namespaces) != 0 {
		t.Fatalf("result isolated=%v mode=%q unproven=%v ns=%v; want unisolated trusted-development", res.Isolated, res.Mode, res.Unproven, res.Namespaces)
	}
	if len(res.Steps) != 3 {
		t.Fatalf("steps = %+v, want 3", res.Steps)
	}
	if s := res.Steps[0]; s.ExitCode != 0 || !strings.Contains(string(s.Output), "ok") {
		t.Errorf("env step = %d %q", s.ExitCode, s.Output)
	}
	if s := res.Steps[2]; !s.TimedOut || s.Duration > 10*time.Second {
		t.Errorf("slow step = %+v, want timed out", s)
	}
	entries, err := os.ReadDir(r.cfg.WorkRoot)
	if err != nil || len(entries) != 0 {
		t.Errorf("work root holds %v (%v) after the run, want nothing", entries, err)
	}
}
