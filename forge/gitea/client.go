// Package gitea is vouch's forge for Gitea and Forgejo: a webhook parser
// that verifies X-Gitea-Signature / X-Forgejo-Signature deliveries, and a
// forge.Client over the Gitea API (code.gitea.io/sdk/gitea).
package gitea

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	sdk "code.gitea.io/sdk/gitea"

	"vouch.dev/vouch/forge"
)

// Client is a forge.Client for one Gitea or Forgejo server, authenticated
// with an access token. It is safe for concurrent use.
type Client struct {
	baseURL string
	token   string
	http    *http.Client
	now     func() time.Time

	mu   sync.Mutex
	self string // the token's login, once known
}

var _ forge.Client = (*Client)(nil)

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client the API calls use (timeouts, proxies,
// transports). The default has a 30-second timeout.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithClock sets the clock used to turn Retry-After into a time.
func WithClock(now func() time.Time) Option { return func(c *Client) { c.now = now } }

// NewClient returns a client for the server at baseURL (its ROOT_URL, e.g.
// "https://codeberg.org/") using token. It does not contact the server.
func NewClient(baseURL, token string, opts ...Option) (*Client, error) {
	baseURL = strings.TrimRight(baseURL, "/")
	if !strings.HasPrefix(baseURL, "https://") && !strings.HasPrefix(baseURL, "http://") {
		return nil, fmt.Errorf("gitea client: base URL %q is not http(s)", baseURL)
	}
	if strings.Contains(strings.TrimPrefix(strings.TrimPrefix(baseURL, "https://"), "http://"), "@") {
		return nil, errors.New("gitea client: base URL must not carry credentials")
	}
	if token == "" {
		return nil, errors.New("gitea client: empty token")
	}
	c := &Client{baseURL: baseURL, token: token, http: &http.Client{Timeout: 30 * time.Second}, now: time.Now}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// api returns an SDK client bound to ctx. The SDK keeps its context in the
// client, so each call gets its own (cheap) SDK client rather than sharing
// one whose context another call could replace.
func (c *Client) api(ctx context.Context) *sdk.Client {
	api, err := sdk.NewClient(c.baseURL,
		sdk.SetToken(c.token),
		sdk.SetHTTPClient(c.http),
		sdk.SetContext(ctx),
		sdk.SetUserAgent("vouch"),
		sdk.SetGiteaVersion(""), // no version probe per call
	)
	if err != nil {
		// Only options can fail, and these cannot.
		panic(fmt.Sprintf("gitea: sdk client: %v", err))
	}
	return api
}

// Self is the login of the token's user, read once and remembered.
func (c *Client) Self(ctx context.Context) (string, error) {
	c.mu.Lock()
	self := c.self
	c.mu.Unlock()
	if self != "" {
		return self, nil
	}
	u, resp, err := c.api(ctx).GetMyUserInfo()
	if err != nil {
		return "", c.mapErr("get authenticated user", resp, err)
	}
	if u == nil || u.UserName == "" {
		return "", errors.New("get authenticated user: empty login")
	}
	c.mu.Lock()
	c.self = u.UserName
	c.mu.Unlock()
	return u.UserName, nil
}

// PullRequest reads a pull request's current state.
func (c *Client) PullRequest(ctx context.Context, repo forge.Repo, number int) (*forge.PullRequest, error) {
	pr, resp, err := c.api(ctx).GetPullRequest(repo.Owner, repo.Name, int64(number))
	if err != nil {
		return nil, c.mapErr(fmt.Sprintf("get pull request %s#%d", repo.FullName(), number), resp, err)
	}
	out := toPullRequest(repo, pr)
	return &out, nil
}

// pageSize is what the list calls ask for; Gitea caps it at MAX_RESPONSE_ITEMS (50).
const (
	pageSize = 50
	maxPages = 1000
)

// OpenPullRequests lists a repository's open pull requests, all pages.
func (c *Client) OpenPullRequests(ctx context.Context, repo forge.Repo) ([]forge.PullRequest, error) {
	api := c.api(ctx)
	var out []forge.PullRequest
	for page := 1; page <= maxPages; page++ {
		prs, resp, err := api.ListRepoPullRequests(repo.Owner, repo.Name, sdk.ListPullRequestsOptions{
			ListOptions: sdk.ListOptions{Page: page, PageSize: pageSize},
			State:       sdk.StateOpen,
		})
		if err != nil {
			return nil, c.mapErr(fmt.Sprintf("list open pull requests of %s (page %d)", repo.FullName(), page), resp, err)
		}
		for _, pr := range prs {
			out = append(out, toPullRequest(repo, pr))
		}
		if len(prs) == 0 || resp == nil || resp.NextPage == 0 {
			return out, nil
		}
	}
	return nil, fmt.Errorf("list open pull requests of %s: more than %d pages", repo.FullName(), maxPages)
}

func toPullRequest(repo forge.Repo, pr *sdk.PullRequest) forge.PullRequest {
	out := forge.PullRequest{
		Repo:   repo,
		Number: int(pr.Index),
		Title:  pr.Title,
		Open:   pr.State == sdk.StateOpen,
		Merged: pr.HasMerged,
	}
	if pr.Poster != nil {
		out.Author = pr.Poster.UserName
	}
	if b := pr.Base; b != nil {
		out.BaseRef, out.BaseSHA = b.Ref, strings.ToLower(b.Sha)
		if b.Repository != nil {
			// The forge's answer, never what a webhook payload said.
			out.Repo.CloneURL = b.Repository.CloneURL
		}
	}
	if h := pr.Head; h != nil {
		out.HeadSHA = strings.ToLower(h.Sha)
		if r := h.Repository; r != nil && r.Owner != nil {
			out.HeadRepo = forge.Repo{Owner: r.Owner.UserName, Name: r.Name, CloneURL: r.CloneURL}
		}
	}
	// A pull request whose head repository is gone (a deleted fork) counts
	// as a fork: nothing shows it came from the base repository.
	out.Fork = out.HeadRepo == (forge.Repo{}) ||
		!(strings.EqualFold(out.HeadRepo.Owner, repo.Owner) && strings.EqualFold(out.HeadRepo.Name, repo.Name))
	return out
}

// Permission is user's access to repo, from the collaborator permission
// endpoint: the owner and admins read as admin; on a public repository a
// stranger reads as read, on a private one as none. The token's user must
// be a site admin or an admin of the repository to ask about others.
func (c *Client) Permission(ctx context.Context, repo forge.Repo, user string) (forge.Permission, error) {
	res, resp, err := c.api(ctx).CollaboratorPermission(repo.Owner, repo.Name, user)
	if err != nil {
		return forge.PermNone, c.mapErr(fmt.Sprintf("permission of %s on %s", user, repo.FullName()), resp, err)
	}
	if res == nil {
		return forge.PermNone, fmt.Errorf("permission of %s on %s: empty answer", user, repo.FullName())
	}
	p, err := forge.ParsePermission(strings.ToLower(string(res.Permission)))
	if err != nil {
		return forge.PermNone, fmt.Errorf("permission of %s on %s: %w", user, repo.FullName(), err)
	}
	return p, nil
}

// truncated marks a body vouch shortened to fit the forge's limit.
const truncated = "\n\n…(truncated)"

// capRunes shortens s to at most max characters, ending in marker when cut.
func capRunes(s string, max int, marker string) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	keep := max - utf8.RuneCountInString(marker)
	if keep < 0 {
		keep, marker = max, ""
	}
	n := 0
	for i := range s {
		if n == keep {
			return s[:i] + marker
		}
		n++
	}
	return s + marker
}

// CreateComment posts body on pull request number, capped at
// forge.MaxCommentBody characters.
func (c *Client) CreateComment(ctx context.Context, repo forge.Repo, number int, body string) (forge.Comment, error) {
	body = capRunes(body, forge.MaxCommentBody, truncated)
	cm, resp, err := c.api(ctx).CreateIssueComment(repo.Owner, repo.Name, int64(number), sdk.CreateIssueCommentOption{Body: body})
	if err != nil {
		return forge.Comment{}, c.mapErr(fmt.Sprintf("comment on %s#%d", repo.FullName(), number), resp, err)
	}
	return toComment(cm), nil
}

// EditComment replaces comment id's body, capped like CreateComment.
func (c *Client) EditComment(ctx context.Context, repo forge.Repo, id int64, body string) error {
	body = capRunes(body, forge.MaxCommentBody, truncated)
	_, resp, err := c.api(ctx).EditIssueComment(repo.Owner, repo.Name, id, sdk.EditIssueCommentOption{Body: body})
	if err != nil {
		return c.mapErr(fmt.Sprintf("edit comment %d on %s", id, repo.FullName()), resp, err)
	}
	return nil
}

// BotComments lists the comments the token's user made on pull request
// number, oldest first.
func (c *Client) BotComments(ctx context.Context, repo forge.Repo, number int) ([]forge.Comment, error) {
	self, err := c.Self(ctx)
	if err != nil {
		return nil, err
	}
	api := c.api(ctx)
	var out []forge.Comment
	for page := 1; page <= maxPages; page++ {
		cms, resp, err := api.ListIssueComments(repo.Owner, repo.Name, int64(number), sdk.ListIssueCommentOptions{
			ListOptions: sdk.ListOptions{Page: page, PageSize: pageSize},
		})
		if err != nil {
			return nil, c.mapErr(fmt.Sprintf("list comments on %s#%d (page %d)", repo.FullName(), number, page), resp, err)
		}
		for _, cm := range cms {
			if cm.Poster != nil && strings.EqualFold(cm.Poster.UserName, self) {
				out = append(out, toComment(cm))
			}
		}
		if len(cms) == 0 || resp == nil || resp.NextPage == 0 {
			return out, nil
		}
	}
	return nil, fmt.Errorf("list comments on %s#%d: more than %d pages", repo.FullName(), number, maxPages)
}

func toComment(cm *sdk.Comment) forge.Comment {
	out := forge.Comment{ID: cm.ID, Body: cm.Body}
	if cm.Poster != nil {
		out.Author = cm.Poster.UserName
	}
	return out
}

// SetStatus sets a commit status on sha; the description is capped at
// forge.MaxStatusDescription characters.
func (c *Client) SetStatus(ctx context.Context, repo forge.Repo, sha string, st forge.Status) error {
	switch st.State {
	case forge.StatusPending, forge.StatusSuccess, forge.StatusFailure, forge.StatusError:
	default:
		return fmt.Errorf("set status on %s@%s: unknown state %q", repo.FullName(), sha, st.State)
	}
	_, resp, err := c.api(ctx).CreateStatus(repo.Owner, repo.Name, sha, sdk.CreateStatusOption{
		State:       sdk.StatusState(st.State),
		TargetURL:   st.TargetURL,
		Description: capRunes(st.Description, forge.MaxStatusDescription, "…"),
		Context:     st.Context,
	})
	if err != nil {
		return c.mapErr(fmt.Sprintf("set status on %s@%s", repo.FullName(), sha), resp, err)
	}
	return nil
}

// FetchSource says where pr's commits can be fetched: the base repository,
// which serves every pull request's head (forks included) as
// refs/pull/N/head, and its base branch. The token's user authenticates;
// pr.HeadRepo.CloneURL remains available to callers that want the fork.
func (c *Client) FetchSource(ctx context.Context, pr *forge.PullRequest) (forge.FetchSource, error) {
	if pr == nil || pr.Number <= 0 {
		return forge.FetchSource{}, errors.New("fetch source: no pull request")
	}
	self, err := c.Self(ctx)
	if err != nil {
		return forge.FetchSource{}, fmt.Errorf("fetch source for %s#%d: %w", pr.Repo.FullName(), pr.Number, err)
	}
	// The URL the token goes to is built from the configured server, never
	// taken from a payload or an API answer: a clone URL naming another host
	// would carry the bot's token there.
	if !validName(pr.Repo.Owner) || !validName(pr.Repo.Name) {
		return forge.FetchSource{}, fmt.Errorf("fetch source: bad repository name %q", pr.Repo.FullName())
	}
	u := c.baseURL + "/" + url.PathEscape(pr.Repo.Owner) + "/" + url.PathEscape(pr.Repo.Name) + ".git"
	refs := []string{fmt.Sprintf("refs/pull/%d/head", pr.Number)}
	if pr.BaseRef != "" {
		refs = append(refs, "refs/heads/"+pr.BaseRef)
	}
	return forge.FetchSource{URL: u, Refs: refs, Username: self, Token: c.token}, nil
}

// mapErr wraps an SDK failure with op and the sentinel its status means.
// The SDK's messages carry the request path and the server's message,
// never the token.
func (c *Client) mapErr(op string, resp *sdk.Response, err error) error {
	if resp == nil || resp.Response == nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	code := resp.StatusCode
	retry := resp.Header.Get("Retry-After")
	switch {
	case code == http.StatusTooManyRequests || (code == http.StatusForbidden && retry != ""):
		return &forge.RateLimitError{RetryAt: retryAt(retry, c.now()), Err: fmt.Errorf("%s: HTTP %d: %w", op, code, err)}
	case code == http.StatusNotFound:
		return fmt.Errorf("%s: %w: %v", op, forge.ErrNotFound, err)
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return fmt.Errorf("%s: %w: HTTP %d: %v", op, forge.ErrUnauthorized, code, err)
	default:
		return fmt.Errorf("%s: HTTP %d: %w", op, code, err)
	}
}

// retryAt reads a Retry-After value (seconds or an HTTP date); without one
// it waits a minute.
func retryAt(v string, now time.Time) time.Time {
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
		return now.Add(time.Duration(s) * time.Second)
	}
	if t, err := http.ParseTime(v); err == nil {
		return t
	}
	return now.Add(time.Minute)
}

// validName reports whether s can be a Gitea owner or repository name: no
// path separators, no dot-only names, nothing a URL could reinterpret.
func validName(s string) bool {
	if s == "" || s == "." || s == ".." || len(s) > 255 {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}
