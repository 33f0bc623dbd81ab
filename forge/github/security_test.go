package github

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"

	"vouch.dev/vouch/forge"
)

// TestFetchSourceRefusesForeignHost: a clone URL naming another host (from
// a forged payload or a hostile answer) never receives the token.
func TestFetchSourceRefusesForeignHost(t *testing.T) {
	c, _, _ := setup(t)
	for _, u := range []string{"https://evil.example/o/r.git", "http://github.com/o/r.git", "https://github.com.evil.example/o/r.git"} {
		src, err := c.FetchSource(t.Context(), &forge.PullRequest{Repo: forge.Repo{Owner: "o", Name: "r", CloneURL: u}, Number: 7})
		if err == nil {
			t.Errorf("FetchSource(%s) = %+v, want refused", u, src)
			continue
		}
		if strings.Contains(err.Error(), "ghp_") {
			t.Errorf("FetchSource(%s) error carries the token: %v", u, err)
		}
	}
}

// TestGiteaDeliveryOnGitHubEndpoint: with the same secret on both endpoints,
// a Gitea delivery (which also carries X-Hub-Signature-256) is refused here.
func TestGiteaDeliveryOnGitHubEndpoint(t *testing.T) {
	secret := []byte("shared-secret")
	w, err := NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"action":"opened","number":1}`)
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	sig := hex.EncodeToString(mac.Sum(nil))
	h := http.Header{}
	h.Set("X-Hub-Signature-256", "sha256="+sig)
	h.Set("X-GitHub-Event", "pull_request")
	h.Set("X-Gitea-Signature", sig)
	h.Set("X-Gitea-Event", "pull_request")
	if ev, err := w.Parse(h, body); !errors.Is(err, forge.ErrMalformed) {
		t.Fatalf("Parse = %+v, %v; want ErrMalformed", ev, err)
	}
}
