package github

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	gh "github.com/google/go-github/v66/github"

	"vouch.dev/vouch/forge"
)

// Webhook delivery headers GitHub sends.
const (
	headerSignature256  = "X-Hub-Signature-256"
	headerSignatureSHA1 = "X-Hub-Signature"
	headerEvent         = "X-GitHub-Event"
	headerDelivery      = "X-GitHub-Delivery"
)

// Webhook verifies and parses GitHub webhook deliveries (the
// /webhook/github endpoint). It is safe for concurrent use once configured.
type Webhook struct {
	secret []byte
	// BotLogin is the bot's own login ("vouch-bot", or "<app-slug>[bot]"
	// for a GitHub App); comments it wrote are ignored. Compared without
	// regard to case, as GitHub logins are.
	BotLogin string
}

var _ forge.WebhookParser = (*Webhook)(nil)

// NewWebhook returns a parser that accepts deliveries signed with secret.
// It refuses an empty secret: an unsigned endpoint would run anyone's code.
func NewWebhook(secret []byte) (*Webhook, error) {
	if len(secret) == 0 {
		return nil, errors.New("github webhook: empty secret")
	}
	return &Webhook{secret: append([]byte(nil), secret...)}, nil
}

// Parse verifies the X-Hub-Signature-256 HMAC over the raw body, in
// constant time and before anything reads the body, then turns the delivery
// into a neutral event. Deliveries that need no action return an error
// wrapping forge.ErrIgnored; rejections wrap the other forge.Err* webhook
// sentinels (see forge.StatusOf).
func (w *Webhook) Parse(header http.Header, body []byte) (*forge.Event, error) {
	if len(body) > forge.MaxWebhookBody {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", forge.ErrTooLarge, len(body), forge.MaxWebhookBody)
	}
	if err := w.verify(header, body); err != nil {
		return nil, err
	}
	// Gitea and Forgejo also send X-Hub-Signature-256: a delivery of theirs
	// that verifies here (same secret on both endpoints) must not be read as
	// a GitHub repository's event.
	for name := range header {
		if n := strings.ToLower(name); strings.HasPrefix(n, "x-gitea-") || strings.HasPrefix(n, "x-forgejo-") || strings.HasPrefix(n, "x-gogs-") {
			return nil, fmt.Errorf("%w: a Gitea/Forgejo delivery (%s) on the GitHub endpoint", forge.ErrMalformed, name)
		}
	}
	delivery := header.Get(headerDelivery)
	switch name := header.Get(headerEvent); name {
	case "pull_request":
		return parsePullRequest(delivery, body)
	case "issue_comment":
		return w.parseComment(delivery, body)
	case "":
		return nil, fmt.Errorf("%w: no %s header", forge.ErrUnknownEvent, headerEvent)
	default:
		if gh.EventForType(name) == nil {
			return nil, fmt.Errorf("%w: %s %.64q", forge.ErrUnknownEvent, headerEvent, name)
		}
		// ping, push, check_suite...: real GitHub events vouch does not act on.
		return nil, fmt.Errorf("%w: %s event", forge.ErrIgnored, name)
	}
}

// verify checks the sha256 signature. Nothing else authenticates a
// delivery: sha1 signatures and other forges' headers are refused.
func (w *Webhook) verify(header http.Header, body []byte) error {
	sigs := header.Values(headerSignature256)
	switch {
	case len(sigs) == 0 || sigs[0] == "":
		switch {
		case header.Get(headerSignatureSHA1) != "":
			return fmt.Errorf("%w: only %s is accepted, not the sha1 %s", forge.ErrNoSignature, headerSignature256, headerSignatureSHA1)
		case header.Get("X-Gitea-Signature") != "" || header.Get("X-Forgejo-Signature") != "":
			return fmt.Errorf("%w: a Gitea/Forgejo delivery on the GitHub endpoint", forge.ErrNoSignature)
		}
		return fmt.Errorf("%w: no %s header", forge.ErrNoSignature, headerSignature256)
	case len(sigs) > 1:
		return fmt.Errorf("%w: %d %s headers", forge.ErrBadSignature, len(sigs), headerSignature256)
	}
	hexSig, ok := strings.CutPrefix(sigs[0], "sha256=")
	if !ok {
		return fmt.Errorf("%w: %s is not sha256=<hex>", forge.ErrBadSignature, headerSignature256)
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil || len(got) != sha256.Size {
		return fmt.Errorf("%w: %s is not sha256=<64 hex digits>", forge.ErrBadSignature, headerSignature256)
	}
	mac := hmac.New(sha256.New, w.secret)
	mac.Write(body)
	if !hmac.Equal(mac.Sum(nil), got) {
		return forge.ErrBadSignature
	}
	return nil
}

func parsePullRequest(delivery string, body []byte) (*forge.Event, error) {
	var ev gh.PullRequestEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, fmt.Errorf("%w: pull_request: %v", forge.ErrMalformed, err)
	}
	var action forge.Action
	switch a := ev.GetAction(); a {
	case "opened":
		action = forge.ActionOpened
	case "reopened":
		action = forge.ActionReopened
	case "synchronize":
		action = forge.ActionSynchronized
	case "closed":
		action = forge.ActionClosed
	default:
		return nil, fmt.Errorf("%w: pull_request action %.32q", forge.ErrIgnored, a)
	}
	pr := ev.GetPullRequest()
	if pr == nil || pr.Base == nil || pr.Head == nil {
		return nil, fmt.Errorf("%w: pull_request: no pull_request.base/head", forge.ErrMalformed)
	}
	repo := repoOf(pr.Base.Repo)
	if repo.Owner == "" || repo.Name == "" {
		repo = repoOf(ev.Repo)
	}
	e := &forge.Event{
		Forge:    forge.GitHub,
		Delivery: delivery,
		Type:     forge.EventPullRequest,
		Action:   action,
		Repo:     repo,
		Number:   pr.GetNumber(),
		BaseSHA:  pr.Base.GetSHA(),
		HeadSHA:  pr.Head.GetSHA(),
		BaseRef:  pr.Base.GetRef(),
		HeadRepo: repoOf(pr.Head.Repo),
		Author:   pr.GetUser().GetLogin(),
		Sender:   ev.GetSender().GetLogin(),
		Merged:   action == forge.ActionClosed && pr.GetMerged(),
	}
	if err := checkEvent(e); err != nil {
		return nil, fmt.Errorf("%w: pull_request: %v", forge.ErrMalformed, err)
	}
	if !isSHA(e.BaseSHA) || !isSHA(e.HeadSHA) {
		return nil, fmt.Errorf("%w: pull_request: base/head sha not 40 hex digits", forge.ErrMalformed)
	}
	return e, nil
}

func (w *Webhook) parseComment(delivery string, body []byte) (*forge.Event, error) {
	var ev gh.IssueCommentEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return nil, fmt.Errorf("%w: issue_comment: %v", forge.ErrMalformed, err)
	}
	if a := ev.GetAction(); a != "created" {
		return nil, fmt.Errorf("%w: issue_comment action %.32q", forge.ErrIgnored, a)
	}
	if ev.Issue == nil || ev.Comment == nil {
		return nil, fmt.Errorf("%w: issue_comment: no issue/comment", forge.ErrMalformed)
	}
	if !ev.Issue.IsPullRequest() {
		return nil, fmt.Errorf("%w: comment on a plain issue", forge.ErrIgnored)
	}
	author := ev.Comment.GetUser().GetLogin()
	if w.BotLogin != "" && strings.EqualFold(author, w.BotLogin) {
		return nil, fmt.Errorf("%w: the bot's own comment", forge.ErrIgnored)
	}
	e := &forge.Event{
		Forge:    forge.GitHub,
		Delivery: delivery,
		Type:     forge.EventComment,
		Repo:     repoOf(ev.Repo),
		Number:   ev.Issue.GetNumber(),
		Author:   ev.Issue.GetUser().GetLogin(),
		Sender:   ev.GetSender().GetLogin(),
		Comment: &forge.Comment{
			ID:        ev.Comment.GetID(),
			Author:    author,
			Body:      ev.Comment.GetBody(),
			CreatedAt: ev.Comment.GetCreatedAt().Time,
		},
	}
	if err := checkEvent(e); err != nil {
		return nil, fmt.Errorf("%w: issue_comment: %v", forge.ErrMalformed, err)
	}
	if e.Comment.ID <= 0 || author == "" {
		return nil, fmt.Errorf("%w: issue_comment: no comment id or author", forge.ErrMalformed)
	}
	return e, nil
}

// checkEvent refuses events missing what the bot keys work on.
func checkEvent(e *forge.Event) error {
	if e.Repo.Owner == "" || e.Repo.Name == "" {
		return errors.New("no repository owner/name")
	}
	if e.Number <= 0 {
		return fmt.Errorf("pull request number %d", e.Number)
	}
	return nil
}

// repoOf converts a go-github repository; nil (a deleted fork) is the zero Repo.
func repoOf(r *gh.Repository) forge.Repo {
	if r == nil {
		return forge.Repo{}
	}
	return forge.Repo{Owner: r.GetOwner().GetLogin(), Name: r.GetName(), CloneURL: r.GetCloneURL()}
}

// isSHA reports whether s is a full 40-hex-digit commit id.
func isSHA(s string) bool {
	if len(s) != 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
