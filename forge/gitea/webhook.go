package gitea

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"vouch.dev/vouch/forge"
)

// Webhook verifies and parses Gitea and Forgejo webhook deliveries. Mount it
// on its own endpoint (/webhook/gitea): Gitea also sends X-GitHub-* and
// X-Hub-Signature-256 headers, so the endpoint, never the headers, decides
// which parser reads a delivery.
type Webhook struct {
	secret []byte
	// BotLogin is the bot's own login; its comments are ignored so that the
	// bot never answers itself.
	BotLogin string
}

var _ forge.WebhookParser = (*Webhook)(nil)

// NewWebhook returns a parser for deliveries signed with secret. An empty
// secret is refused: an unsigned webhook would let anyone start a run.
func NewWebhook(secret []byte) (*Webhook, error) {
	if len(secret) == 0 {
		return nil, errors.New("gitea webhook: empty secret")
	}
	return &Webhook{secret: append([]byte(nil), secret...)}, nil
}

// Signature is the value Gitea puts in X-Gitea-Signature (and Forgejo in
// X-Forgejo-Signature) for body: the bare hex HMAC-SHA256 under secret.
func Signature(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// Headers named by Forgejo and Gitea; Forgejo sends both, and its own win.
const (
	hdrForgejoSignature = "X-Forgejo-Signature"
	hdrGiteaSignature   = "X-Gitea-Signature"
	hdrForgejoEvent     = "X-Forgejo-Event"
	hdrGiteaEvent       = "X-Gitea-Event"
	hdrForgejoEventType = "X-Forgejo-Event-Type"
	hdrGiteaEventType   = "X-Gitea-Event-Type"
	hdrForgejoDelivery  = "X-Forgejo-Delivery"
	hdrGiteaDelivery    = "X-Gitea-Delivery"
)

// Parse verifies the delivery's signature over the raw body, in constant
// time and before reading anything else, then turns it into a neutral event.
// Deliveries that need no action return forge.ErrIgnored.
func (w *Webhook) Parse(header http.Header, body []byte) (*forge.Event, error) {
	if err := w.verify(header, body); err != nil {
		return nil, err
	}
	event := first(header, hdrForgejoEvent, hdrGiteaEvent)
	eventType := first(header, hdrForgejoEventType, hdrGiteaEventType)
	delivery := first(header, hdrForgejoDelivery, hdrGiteaDelivery)
	switch {
	case event == "pull_request" && (eventType == "" || eventType == "pull_request" || eventType == "pull_request_sync"):
		return parsePullRequest(delivery, body)
	case event == "issue_comment":
		return w.parseComment(delivery, eventType, body)
	case ignoredEvents[event]:
		if !json.Valid(body) {
			return nil, fmt.Errorf("%w: %s event is not JSON", forge.ErrMalformed, event)
		}
		return nil, fmt.Errorf("%w: event %s/%s", forge.ErrIgnored, event, eventType)
	case event == "":
		return nil, fmt.Errorf("%w: no %s header", forge.ErrUnknownEvent, hdrGiteaEvent)
	default:
		return nil, fmt.Errorf("%w: %.64q", forge.ErrUnknownEvent, event)
	}
}

// ignoredEvents are the events Gitea and Forgejo send (as X-Gitea-Event)
// that vouch deliberately does not act on. pull_request covers the label,
// assignee, milestone and review-request variants, which arrive with their
// own event types and are ignored below.
var ignoredEvents = map[string]bool{
	"create": true, "delete": true, "fork": true, "push": true,
	"issues": true, "issue_assign": true, "issue_label": true, "issue_milestone": true,
	"pull_request": true, "pull_request_approved": true, "pull_request_rejected": true,
	"pull_request_comment": true, "pull_request_review": true,
	"wiki": true, "repository": true, "release": true, "package": true, "status": true,
	"schedule": true, "workflow_run": true, "workflow_job": true, "workflow_dispatch": true,
	"action_run_failure": true, "action_run_recover": true, "action_run_success": true,
	"ping": true,
}

// verify checks the signature header against the body. It looks at nothing
// else in the delivery first.
func (w *Webhook) verify(header http.Header, body []byte) error {
	if len(body) > forge.MaxWebhookBody {
		return fmt.Errorf("%w: %d bytes, limit %d", forge.ErrTooLarge, len(body), forge.MaxWebhookBody)
	}
	name := hdrForgejoSignature
	sigs := header.Values(name)
	if len(sigs) == 0 {
		name = hdrGiteaSignature
		sigs = header.Values(name)
	}
	if len(sigs) == 0 || (len(sigs) == 1 && sigs[0] == "") {
		return fmt.Errorf("%w: want %s or %s", forge.ErrNoSignature, hdrForgejoSignature, hdrGiteaSignature)
	}
	if len(sigs) > 1 {
		return fmt.Errorf("%w: %d %s headers", forge.ErrBadSignature, len(sigs), name)
	}
	// The length is checked before decoding: hex.Decode writes len/2 bytes.
	got := make([]byte, sha256.Size)
	if len(sigs[0]) != 2*sha256.Size {
		return fmt.Errorf("%w: %s is not a hex HMAC-SHA256", forge.ErrBadSignature, name)
	}
	if n, err := hex.Decode(got, []byte(sigs[0])); err != nil || n != sha256.Size {
		return fmt.Errorf("%w: %s is not a hex HMAC-SHA256", forge.ErrBadSignature, name)
	}
	mac := hmac.New(sha256.New, w.secret)
	mac.Write(body)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return fmt.Errorf("%w: %s", forge.ErrBadSignature, name)
	}
	return nil
}

// first returns the first non-empty value among the named headers.
func first(h http.Header, names ...string) string {
	for _, n := range names {
		if v := h.Get(n); v != "" {
			return v
		}
	}
	return ""
}

// The parts of Gitea's payloads vouch reads (modules/structs in Gitea).
type (
	user struct {
		Login string `json:"login"`
	}
	repository struct {
		Name     string `json:"name"`
		Owner    *user  `json:"owner"`
		CloneURL string `json:"clone_url"`
	}
	branch struct {
		Ref  string      `json:"ref"`
		SHA  string      `json:"sha"`
		Repo *repository `json:"repo"`
	}
	pullRequest struct {
		Number int     `json:"number"`
		User   *user   `json:"user"`
		Merged bool    `json:"merged"`
		Base   *branch `json:"base"`
		Head   *branch `json:"head"`
	}
	pullRequestPayload struct {
		Action      string       `json:"action"`
		Number      int          `json:"number"`
		PullRequest *pullRequest `json:"pull_request"`
		Repository  *repository  `json:"repository"`
		Sender      *user        `json:"sender"`
	}
	issue struct {
		Number int   `json:"number"`
		User   *user `json:"user"`
	}
	comment struct {
		ID        int64     `json:"id"`
		User      *user     `json:"user"`
		Body      string    `json:"body"`
		CreatedAt time.Time `json:"created_at"`
	}
	commentPayload struct {
		Action      string       `json:"action"`
		Issue       *issue       `json:"issue"`
		PullRequest *pullRequest `json:"pull_request"`
		Comment     *comment     `json:"comment"`
		Repository  *repository  `json:"repository"`
		Sender      *user        `json:"sender"`
		IsPull      bool         `json:"is_pull"`
	}
)

var prActions = map[string]forge.Action{
	"opened":       forge.ActionOpened,
	"reopened":     forge.ActionReopened,
	"synchronized": forge.ActionSynchronized,
	"closed":       forge.ActionClosed,
}

func parsePullRequest(delivery string, body []byte) (*forge.Event, error) {
	var p pullRequestPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("%w: pull_request: %v", forge.ErrMalformed, err)
	}
	action, ok := prActions[p.Action]
	if !ok {
		return nil, fmt.Errorf("%w: pull_request action %.32q", forge.ErrIgnored, p.Action)
	}
	repo, err := toRepo("repository", p.Repository)
	if err != nil {
		return nil, err
	}
	if p.PullRequest == nil {
		return nil, fmt.Errorf("%w: pull_request: no pull_request object", forge.ErrMalformed)
	}
	number := p.Number
	if number == 0 {
		number = p.PullRequest.Number
	}
	ev := &forge.Event{
		Forge:    forge.Gitea,
		Delivery: delivery,
		Type:     forge.EventPullRequest,
		Action:   action,
		Repo:     repo,
		Number:   number,
		Sender:   login(p.Sender),
	}
	if err := fillPull(ev, p.PullRequest, true); err != nil {
		return nil, err
	}
	return ev, nil
}

func (w *Webhook) parseComment(delivery, eventType string, body []byte) (*forge.Event, error) {
	var p commentPayload
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("%w: issue_comment: %v", forge.ErrMalformed, err)
	}
	switch {
	case !p.IsPull || (eventType != "" && eventType != "pull_request_comment"):
		return nil, fmt.Errorf("%w: comment on an issue, not a pull request", forge.ErrIgnored)
	case p.Action != "created":
		return nil, fmt.Errorf("%w: comment action %.32q", forge.ErrIgnored, p.Action)
	case p.Comment == nil || p.Issue == nil:
		return nil, fmt.Errorf("%w: issue_comment: no comment or issue object", forge.ErrMalformed)
	}
	author := login(p.Comment.User)
	if author == "" {
		author = login(p.Sender)
	}
	if w.BotLogin != "" && strings.EqualFold(author, w.BotLogin) {
		return nil, fmt.Errorf("%w: the bot's own comment", forge.ErrIgnored)
	}
	repo, err := toRepo("repository", p.Repository)
	if err != nil {
		return nil, err
	}
	if p.Issue.Number <= 0 {
		return nil, fmt.Errorf("%w: issue_comment: issue number %d", forge.ErrMalformed, p.Issue.Number)
	}
	ev := &forge.Event{
		Forge:    forge.Gitea,
		Delivery: delivery,
		Type:     forge.EventComment,
		Repo:     repo,
		Number:   p.Issue.Number,
		Author:   login(p.Issue.User),
		Sender:   login(p.Sender),
		Comment:  &forge.Comment{ID: p.Comment.ID, Author: author, Body: p.Comment.Body, CreatedAt: p.Comment.CreatedAt},
	}
	if p.PullRequest != nil {
		if err := fillPull(ev, p.PullRequest, false); err != nil {
			return nil, err
		}
	}
	return ev, nil
}

// fillPull copies a payload's pull request into ev. Pull request events
// must name both commits; comment events carry them when Gitea could
// resolve them, and otherwise leave them for the bot to read.
func fillPull(ev *forge.Event, pr *pullRequest, needSHAs bool) error {
	if ev.Number <= 0 {
		ev.Number = pr.Number
	}
	if ev.Number <= 0 {
		return fmt.Errorf("%w: pull request number %d", forge.ErrMalformed, ev.Number)
	}
	if pr.Base == nil || pr.Head == nil {
		if needSHAs {
			return fmt.Errorf("%w: pull request without base or head", forge.ErrMalformed)
		}
		return nil
	}
	for _, c := range []struct{ name, sha string }{{"base", pr.Base.SHA}, {"head", pr.Head.SHA}} {
		if c.sha == "" && !needSHAs {
			continue
		}
		if !isObjectID(c.sha) {
			return fmt.Errorf("%w: %s sha %.80q is not a commit id", forge.ErrMalformed, c.name, c.sha)
		}
	}
	ev.BaseSHA = strings.ToLower(pr.Base.SHA)
	ev.HeadSHA = strings.ToLower(pr.Head.SHA)
	ev.BaseRef = pr.Base.Ref
	ev.Merged = pr.Merged
	if a := login(pr.User); a != "" {
		ev.Author = a
	}
	if pr.Head.Repo != nil {
		// A deleted fork arrives as a null repo; HeadRepo stays empty.
		if hr, err := toRepo("head repo", pr.Head.Repo); err == nil {
			ev.HeadRepo = hr
		}
	}
	return nil
}

func toRepo(what string, r *repository) (forge.Repo, error) {
	if r == nil || r.Name == "" || login(r.Owner) == "" {
		return forge.Repo{}, fmt.Errorf("%w: %s without owner and name", forge.ErrMalformed, what)
	}
	return forge.Repo{Owner: r.Owner.Login, Name: r.Name, CloneURL: r.CloneURL}, nil
}

func login(u *user) string {
	if u == nil {
		return ""
	}
	return u.Login
}

// isObjectID reports whether s is a full SHA-1 or SHA-256 object id in hex.
func isObjectID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
