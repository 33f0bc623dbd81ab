package sandbox

import (
	"os"
	"strings"
	"testing"

	"vouch.dev/vouch/fixtures"
	"vouch.dev/vouch/gate"
)

// TestRunAdmittedPlan goes through the real gate: the admitted head tree is
// materialized into the workspace, owned by the sandbox uid, and base's
// recipe runs there.
func TestRunAdmittedPlan(t *testing.T) {
	r := testRunner(t, nil)
	repo := fixtures.NewRepo(t)
	base := fixtures.Files(map[string]string{
		".vouch.yml": "version: 1\nsteps:\n  - name: check\n    run: [\"sh\", \"check.sh\"]\n    timeout: 30s\n",
		"check.sh":   "set -e\ntest \"$(cat src/data.txt)\" = head-data\ntest -x tool.sh && ./tool.sh\ntouch src/written\necho checked\n",
	})
	head := base.With(fixtures.Tree{
		"src/data.txt": {Content: "head-data\n"},
		"tool.sh":      fixtures.Exec("#!/bin/sh\necho tool-ran\n"),
	})
	baseSHA := repo.Commit("base", base)
	headSHA := repo.Commit("head", head, baseSHA)
	d, err := gate.Decide(t.Context(), repo.Git(), baseSHA, headSHA, gate.DefaultPolicy())
	if err != nil {
		t.Fatal(err)
	}
	plan, ok := d.Admitted()
	if !ok {
		t.Fatalf("gate refused: %s %s %v", d.Refusal, d.Detail, d.Violations)
	}
	res, err := r.Run(t.Context(), plan)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Unproven != nil || !res.Isolated {
		t.Fatalf("not isolated: %v", res.Unproven)
	}
	if len(res.Steps) != 1 || res.Steps[0].ExitCode != 0 {
		t.Fatalf("steps = %+v", res.Steps)
	}
	if out := string(res.Steps[0].Output); !strings.Contains(out, "tool-ran") || !strings.Contains(out, "checked") {
		t.Errorf("output = %q", out)
	}
	if entries, err := os.ReadDir(r.cfg.WorkRoot); err != nil || len(entries) != 0 {
		t.Errorf("work root after the run: %v, %v; want empty", entries, err)
	}
}
