package evidence

import (
	"fmt"
	"strings"
	"testing"

	"vouch.dev/vouch/gate"
)

// TestReceiptPathBound: a head with more changed paths than
// MaxReceiptPaths gives a receipt listing the first MaxReceiptPaths and the
// true total, and the comment counts the total.
func TestReceiptPathBound(t *testing.T) {
	d := &gate.Decision{Base: testBase, Head: testHead, Refusal: gate.RefusalProtectedPath}
	for i := range MaxReceiptPaths + 5 {
		d.Changed = append(d.Changed, fmt.Sprintf("dir/file-%05d.go", i))
	}
	d.Violations = []gate.Violation{{Path: "Makefile", Rule: "recipe:Makefile"}}
	rc := Judge(d, nil)
	if len(rc.Gate.Changed) != MaxReceiptPaths || rc.Gate.ChangedTotal != MaxReceiptPaths+5 || rc.Gate.ViolationsTotal != 1 {
		t.Fatalf("receipt lists %d paths, total %d, violations total %d", len(rc.Gate.Changed), rc.Gate.ChangedTotal, rc.Gate.ViolationsTotal)
	}
	if c := Comment(rc); !strings.Contains(c, fmt.Sprintf("%d changed paths", MaxReceiptPaths+5)) {
		t.Errorf("comment does not count every changed path")
	}
	small := Judge(&gate.Decision{Base: testBase, Head: testHead, Changed: []string{"a"}}, nil)
	if small.Gate.ChangedTotal != 0 {
		t.Errorf("an uncut list records a total: %+v", small.Gate)
	}
}

// TestAwaitApprovalUnread: an untrusted head that was not even fetched asks
// for approval without claiming anything about its tree or the recipe.
func TestAwaitApprovalUnread(t *testing.T) {
	rc := AwaitApprovalUnread(testBase, testHead, "the author outsider has read permission")
	if rc.Outcome != StopAndAsk || rc.Reason != ReasonUntrustedAuthor || rc.Executed || rc.Recipe.Path != "" {
		t.Fatalf("receipt = %+v", rc)
	}
	checkGolden(t, "comment_stop_untrusted_unread.golden", RunComment("owner/name", 12, rc))
}

// TestReceiptPathBytesBound: long paths are cut by bytes, not only count.
func TestReceiptPathBytesBound(t *testing.T) {
	d := &gate.Decision{Base: testBase, Head: testHead}
	long := strings.Repeat("d/", 2000)
	for i := range 600 {
		d.Changed = append(d.Changed, fmt.Sprintf("%s%04d", long, i))
	}
	rc := Judge(d, nil)
	n := 0
	for _, p := range rc.Gate.Changed {
		n += len(p)
	}
	if n > MaxReceiptPathBytes || rc.Gate.ChangedTotal != 600 || len(rc.Gate.Changed) == 0 {
		t.Errorf("receipt lists %d paths (%d bytes), total %d", len(rc.Gate.Changed), n, rc.Gate.ChangedTotal)
	}
}
