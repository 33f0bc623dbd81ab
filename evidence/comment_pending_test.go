package evidence

import (
	"strings"
	"testing"
)

// TestPendingComment: the pending comment carries the run marker on its
// second line (so the service finds it again), claims no verdict, and keeps
// hostile input inert.
func TestPendingComment(t *testing.T) {
	head := "0123456789abcdef0123456789abcdef01234567"
	for _, tt := range []struct {
		name  string
		phase Phase
		url   string
	}{
		{"comment_pending_running.golden", Running, "https://vouch.example/runs/7"},
		{"comment_pending_queued.golden", Queued, "javascript:alert(1)"},
	} {
		got := PendingComment("maintainer/project", 12, head, tt.phase, tt.url)
		checkGolden(t, tt.name, got)
		repo, pr, h, ok := ParseMarker(got)
		if !ok || repo != "maintainer/project" || pr != 12 || h != head {
			t.Errorf("%s: ParseMarker = %q %d %q %v", tt.name, repo, pr, h, ok)
		}
		for _, bad := range []string{"PASS", "FAIL", "javascript:"} {
			if strings.Contains(got, bad) {
				t.Errorf("%s: pending comment contains %q:\n%s", tt.name, bad, got)
			}
		}
	}
	hostile := PendingComment("a/b -->\n<script>", 1, "zz<!--", Running, "")
	if strings.Contains(hostile, "<script>") || strings.Count(hostile, "-->") != 1 {
		t.Errorf("hostile arguments escaped the marker:\n%s", hostile)
	}
}
