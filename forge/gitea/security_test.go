package gitea

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	sdk "code.gitea.io/sdk/gitea"

	"vouch.dev/vouch/forge"
)

// TestOverlongSignatureNoPanic: an unauthenticated sender with a 66+ hex
// digit signature gets a clean refusal, not a panic.
func TestOverlongSignatureNoPanic(t *testing.T) {
	w, err := NewWebhook([]byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{62, 64 + 2, 128, 4096} {
		h := http.Header{}
		h.Set("X-Gitea-Signature", strings.Repeat("ab", n/2))
		h.Set("X-Gitea-Event", "pull_request")
		if _, err := w.Parse(h, []byte(`{}`)); !errors.Is(err, forge.ErrBadSignature) {
			t.Errorf("signature of %d hex digits: %v, want ErrBadSignature", n, err)
		}
	}
}

// TestDeletedForkIsAFork: a pull request whose head repository is gone is
// treated as coming from a fork.
func TestDeletedForkIsAFork(t *testing.T) {
	pr := toPullRequest(forge.Repo{Owner: "o", Name: "r"}, &sdk.PullRequest{Index: 1, Head: &sdk.PRBranchInfo{Sha: strings.Repeat("a", 40)}})
	if !pr.Fork {
		t.Error("deleted head repository read as not a fork")
	}
}

// TestCloneURLFromAnswerNotPayload: the base clone URL comes from the
// forge's answer even when the caller's Repo (from a webhook) names one.
func TestCloneURLFromAnswerNotPayload(t *testing.T) {
	pr := toPullRequest(forge.Repo{Owner: "o", Name: "r", CloneURL: "http://evil.example/steal.git"}, &sdk.PullRequest{
		Index: 1,
		Base:  &sdk.PRBranchInfo{Ref: "main", Sha: strings.Repeat("b", 40), Repository: &sdk.Repository{CloneURL: "http://127.0.0.1:3000/o/r.git"}},
	})
	if pr.Repo.CloneURL != "http://127.0.0.1:3000/o/r.git" {
		t.Errorf("CloneURL = %q, want the forge's answer", pr.Repo.CloneURL)
	}
}

func TestValidName(t *testing.T) {
	for s, want := range map[string]bool{"o": true, "my-repo.go": true, "": false, "..": false, "a/b": false, "a@b": false, "a%2f": false} {
		if got := validName(s); got != want {
			t.Errorf("validName(%q) = %v, want %v", s, got, want)
		}
	}
}
