package evidence

import (
	"fmt"
	"time"

	"vouch.dev/vouch/gate"
	"vouch.dev/vouch/sandbox"
)

// Fixed commits of the test fixtures.
const (
	testBase      = "1111111111111111111111111111111111111111"
	testHead      = "abc1234def5678901234567890abcdef12345678"
	testMergeBase = "2222222222222222222222222222222222222222"
	testRecipeSHA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
)

// admitted returns an admitted decision whose recipe has the given steps.
func admitted(steps ...gate.Step) *gate.Decision {
	return &gate.Decision{
		Base:         testBase,
		Head:         testHead,
		MergeBase:    testMergeBase,
		Recipe:       &gate.Recipe{Version: 1, Steps: steps},
		RecipeSHA256: testRecipeSHA,
		Changed:      []string{"README.md", "calc/add.go", "calc/add_test.go"},
	}
}

// refused returns a decision the gate refused.
func refused(why gate.Refusal, detail string, violations ...gate.Violation) *gate.Decision {
	d := &gate.Decision{
		Base:         testBase,
		Head:         testHead,
		MergeBase:    testMergeBase,
		RecipeSHA256: testRecipeSHA,
		Changed:      []string{"calc/add.go", "scripts/check.sh"},
		Violations:   violations,
		Refusal:      why,
		Detail:       detail,
	}
	if why == gate.RefusalNoTrustedRecipe {
		d.RecipeSHA256 = ""
	}
	return d
}

// proof returns a complete isolation proof: every namespace differs.
func proof() map[string]sandbox.NamespacePair {
	ns := map[string]sandbox.NamespacePair{}
	for i, k := range sandbox.Namespaces {
		ns[k] = sandbox.NamespacePair{
			Host:  fmt.Sprintf("%s:[%d]", k, 4026531835+i),
			Child: fmt.Sprintf("%s:[%d]", k, 4026532200+i),
		}
	}
	return ns
}

// ran returns a step result that ran isolated.
func ran(name string, exit int, output string) sandbox.StepResult {
	return sandbox.StepResult{
		Name:        name,
		ExitCode:    exit,
		Duration:    1234 * time.Millisecond,
		Output:      []byte(output),
		OutputBytes: int64(len(output)),
		Namespaces:  proof(),
	}
}

// isolated returns a proven sandbox result of the given steps.
func isolated(steps ...sandbox.StepResult) *sandbox.Result {
	return &sandbox.Result{
		Provider:   "bubblewrap",
		Version:    "bubblewrap 0.11.0",
		Path:       "/usr/bin/bwrap",
		Isolated:   true,
		Namespaces: proof(),
		Limits: []sandbox.AppliedLimit{
			{Name: "timeout", Value: 600000, Mechanism: "vouch:kill"},
			{Name: "output", Value: 1 << 20, Mechanism: "vouch:kill"},
			{Name: "pids", Value: 256, Mechanism: "rlimit:NPROC"},
			{Name: "memory", Value: 1 << 30, Mechanism: "rlimit:AS"},
			{Name: "tmp", Value: 256 << 20, Mechanism: "tmpfs-size"},
		},
		Steps: steps,
	}
}

// unitStep is the recipe step most fixtures use.
var unitStep = gate.Step{Name: "unit", Run: []string{"go", "test", "-json", "./..."}, Tests: "go"}

// goPass is `go test -json` output of two passing tests.
const goPass = `{"Action":"run","Package":"demo/calc","Test":"TestAdd"}
{"Action":"output","Package":"demo/calc","Test":"TestAdd","Output":"--- PASS: TestAdd (0.00s)\n"}
{"Action":"pass","Package":"demo/calc","Test":"TestAdd","Elapsed":0}
{"Action":"run","Package":"demo/calc","Test":"TestSub"}
{"Action":"pass","Package":"demo/calc","Test":"TestSub","Elapsed":0}
{"Action":"pass","Package":"demo/calc","Elapsed":0.003}
`

// goSkip is `go test -json` output of one pass and one skip.
const goSkip = `{"Action":"pass","Package":"demo/calc","Test":"TestAdd","Elapsed":0}
{"Action":"skip","Package":"demo/calc","Test":"TestNetwork","Elapsed":0}
`

// goFail is `go test -v` output of a failing test.
const goFail = `=== RUN   TestAdd
--- PASS: TestAdd (0.00s)
=== RUN   TestSub
    calc_test.go:14: Sub(3, 1) = 4, want 2
--- FAIL: TestSub (0.00s)
FAIL
FAIL	demo/calc	0.004s
FAIL
`
