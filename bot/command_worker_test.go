package bot

import "testing"

// TestMayChat: help-only replies go to one commenter on one pull request at
// most once per chatterEvery.
func TestMayChat(t *testing.T) {
	w := &commandWorker{}
	a := commandArgs{Forge: "github", Repo: "o/r", PR: 1, Author: "Someone"}
	other := a
	other.Author = "other"
	otherPR := a
	otherPR.PR = 2
	for i, tt := range []struct {
		args commandArgs
		want bool
	}{
		{a, true}, {a, false}, {other, true}, {otherPR, true},
		{commandArgs{Forge: "github", Repo: "o/r", PR: 1, Author: "someone"}, false}, // logins compare without case
	} {
		if got := w.mayChat(tt.args); got != tt.want {
			t.Errorf("%d: mayChat(%+v) = %v, want %v", i, tt.args, got, tt.want)
		}
	}
}
