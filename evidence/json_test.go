package evidence

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestReceiptJSONHasContractKeys(t *testing.T) {
	rc := goldenReceipts()["pass"]
	rc.Gate.Violations = []Violation{{Path: "p", Rule: "r"}}
	b, err := rc.JSON()
	if err != nil {
		t.Fatalf("JSON() error: %v", err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("JSON() is not JSON: %v", err)
	}
	got := map[string]bool{}
	collectKeys(v, "", got)
	for _, k := range []string{
		"outcome", "reason", "base", "head", "merge_base",
		"recipe.path", "recipe.sha256",
		"gate.changed", "gate.violations", "gate.violations[].path", "gate.violations[].rule",
		"executed",
		"sandbox.provider", "sandbox.version", "sandbox.isolated", "sandbox.namespaces",
		"sandbox.namespaces.net.host", "sandbox.namespaces.net.child",
		"steps", "steps[].name", "steps[].exit_code", "steps[].duration_ms",
		"steps[].tests.passed", "steps[].tests.failed", "steps[].tests.skipped",
	} {
		if !got[k] {
			t.Errorf("JSON() lacks key %q; has %v", k, slices.Sorted(func(yield func(string) bool) {
				for k := range got {
					if !yield(k) {
						return
					}
				}
			}))
		}
	}
}

// collectKeys records every key path of v, with "[]" for array elements.
func collectKeys(v any, prefix string, into map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			p := strings.TrimPrefix(prefix+"."+k, ".")
			into[p] = true
			collectKeys(child, p, into)
		}
	case []any:
		for _, child := range v {
			collectKeys(child, prefix+"[]", into)
		}
	}
}

func TestReceiptJSONNeverNull(t *testing.T) {
	b, err := Receipt{Outcome: Error, Reason: ReasonInternal}.JSON()
	if err != nil {
		t.Fatalf("JSON() error: %v", err)
	}
	if strings.Contains(string(b), "null") {
		t.Errorf("JSON() of a zero receipt has null:\n%s", b)
	}
	again, _ := Receipt{Outcome: Error, Reason: ReasonInternal}.JSON()
	if string(again) != string(b) {
		t.Errorf("JSON() is not stable")
	}
}
