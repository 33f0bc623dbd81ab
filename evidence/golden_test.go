package evidence

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"vouch.dev/vouch/gate"
	"vouch.dev/vouch/sandbox"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenReceipts are the receipts whose renderings are pinned in testdata/.
func goldenReceipts() map[string]Receipt {
	timedOut := ran("unit", -1, "=== RUN   TestSlow\n")
	timedOut.TimedOut = true
	timedOut.Duration = 600000 * 1e6

	limited := ran("unit", -1, "yyyyyyyyyyyyyyyy\n")
	limited.OutputLimited = true
	limited.OutputBytes = 1 << 20

	return map[string]Receipt{
		"pass":              Judge(admitted(unitStep, gate.Step{Name: "vet", Run: []string{"go", "vet", "./..."}}), isolated(ran("unit", 0, goPass), ran("vet", 0, ""))),
		"fail_step_failed":  Judge(admitted(unitStep), isolated(ran("unit", 1, goFail))),
		"fail_timeout":      Judge(admitted(unitStep), isolated(timedOut)),
		"fail_output_limit": Judge(admitted(unitStep), isolated(limited)),
		"blocked_isolation_unproven": Judge(admitted(unitStep), &sandbox.Result{
			Provider: "bubblewrap", Version: "bubblewrap 0.11.0",
			Unproven: &sandbox.ProofError{Namespace: "net", Host: "net:[4026531840]", Child: "net:[4026531840]", Step: "unit", Stderr: "bwrap: Creating new namespace failed: Operation not permitted"},
		}),
		"blocked_required_proof": Judge(admitted(unitStep), isolated(ran("unit", 0, goSkip))),
		"stop_protected_path": Judge(refused(gate.RefusalProtectedPath, "",
			gate.Violation{Path: "scripts/check.sh", Rule: "step-argv:unit"},
			gate.Violation{Path: ".vouch.yml", Rule: "always:.vouch.yml"}), nil),
		"stop_no_trusted_recipe": Judge(refused(gate.RefusalNoTrustedRecipe, "no .vouch.yml in base 1111111111111111111111111111111111111111"), nil),
		"stop_invalid_recipe":    Judge(refused(gate.RefusalInvalidRecipe, "line 4: field stepz not found in type recipe"), nil),
		"stop_unsafe_tree": Judge(refused(gate.RefusalUnsafeTree, "",
			gate.Violation{Path: "docs/passwd", Rule: "symlink-escape"},
			gate.Violation{Path: "vendor/lib", Rule: "gitlink"}), nil),
		"stop_untrusted_author": AwaitApproval(admitted(unitStep), "author mallory is not a collaborator"),
		"error_internal":        NewError(testBase, testHead, ReasonInternal, "disk full"),
		"pass_trusted_development": Judge(admitted(unitStep), &sandbox.Result{
			Provider: "none", Mode: sandbox.ModeTrustedDevelopment, Steps: []sandbox.StepResult{ran("unit", 0, goPass)},
		}),
	}
}

func TestGolden(t *testing.T) {
	renderers := map[string]func(Receipt) string{
		"comment": Comment,
		"summary": Summary,
		"receipt": func(rc Receipt) string {
			b, err := rc.JSON()
			if err != nil {
				t.Fatalf("JSON() error: %v", err)
			}
			return string(b)
		},
	}
	for name, rc := range goldenReceipts() {
		for kind, render := range renderers {
			t.Run(kind+"_"+name, func(t *testing.T) {
				got := render(rc)
				path := filepath.Join("testdata", kind+"_"+name+".golden")
				if *update {
					if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("read golden (run go test -update): %v", err)
				}
				if diff := cmp.Diff(string(want), got); diff != "" {
					t.Errorf("%s(%s) differs from %s (-want +got):\n%s", kind, name, path, diff)
				}
			})
		}
	}
}
