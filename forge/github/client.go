// Package github is vouch's GitHub forge: a webhook parser (Webhook) that
// verifies X-Hub-Signature-256 before reading a byte of the payload, and a
// forge.Client (Client) over go-github with token or GitHub App
// authentication, rate-limit handling and forge's error sentinels.
package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	gh "github.com/google/go-github/v66/github"

	"vouch.dev/vouch/forge"
)

// DefaultBaseURL is github.com's REST API. GitHub Enterprise Server's is
// https://HOST/api/v3/.
const DefaultBaseURL = "https://api.github.com/"

// Client is a forge.Client for GitHub. It is safe for concurrent use.
type Client struct {
	gh      *gh.Client
	tokens  tokenSource
	clock   Clock
	maxWait time.Duration
	// gitOrigin is the only scheme://host FetchSource hands the token to.
	gitOrigin string

	loginMu  sync.Mutex
	login    string                                    // the bot's login, once known
	getLogin func(ctx context.Context) (string, error) // GET /user, or GET /app for Apps
}

var _ forge.Client = (*Client)(nil)

// Option configures a Client.
type Option func(*options)

type options struct {
	httpClient *http.Client
	clock      Clock
	botLogin   string
	maxWait    time.Duration
	userAgent  string
	gitOrigin  string
}

// WithGitOrigin sets the scheme://host the token may be sent to for git
// fetches (default: https://github.com for api.github.com, else the API's
// own scheme://host, as on GitHub Enterprise Server).
func WithGitOrigin(origin string) Option { return func(o *options) { o.gitOrigin = origin } }

// WithHTTPClient sets the HTTP client whose transport, timeout and
// redirect policy requests use (default: a 30 s timeout over
// http.DefaultTransport). Credentials are added by the Client.
func WithHTTPClient(hc *http.Client) Option {
	return func(o *options) {
		if hc != nil {
			o.httpClient = hc
		}
	}
}

// WithClock sets the time source for token expiry and rate-limit waits.
func WithClock(c Clock) Option {
	return func(o *options) {
		if c != nil {
			o.clock = c
		}
	}
}

// WithBotLogin sets the login whose comments BotComments returns. For a
// GitHub App it is "<app-slug>[bot]"; unset, it is asked of GitHub once
// (GET /user for a token, GET /app for an App).
func WithBotLogin(login string) Option { return func(o *options) { o.botLogin = login } }

// WithMaxRetryWait bounds how long a call waits out a rate limit before
// trying once more (default 60 s); longer limits are returned as
// *forge.RateLimitError for the caller to retry later.
func WithMaxRetryWait(d time.Duration) Option { return func(o *options) { o.maxWait = d } }

// WithUserAgent sets the User-Agent header (default "vouch").
func WithUserAgent(ua string) Option { return func(o *options) { o.userAgent = ua } }

// NewTokenClient returns a client authenticated by a token (a personal
// access token or any token GitHub takes as a bearer). baseURL "" is
// DefaultBaseURL.
func NewTokenClient(baseURL, token string, opts ...Option) (*Client, error) {
	if token == "" {
		return nil, errors.New("github: empty token")
	}
	o := collect(opts)
	u, err := parseBaseURL(baseURL)
	if err != nil {
		return nil, err
	}
	c := newClient(u, o, staticToken(token))
	c.getLogin = func(ctx context.Context) (string, error) {
		var u *gh.User
		err := c.call(ctx, "get authenticated user", func(ctx context.Context) (err error) {
			u, _, err = c.gh.Users.Get(ctx, "")
			return err
		})
		return u.GetLogin(), err
	}
	return c, nil
}

// NewAppClient returns a client authenticated as one installation of a
// GitHub App: a JWT signed with privateKeyPEM (PKCS#1 or PKCS#8 RSA) buys an
// installation token, cached and refreshed five minutes before it expires.
func NewAppClient(baseURL string, appID, installationID int64, privateKeyPEM []byte, opts ...Option) (*Client, error) {
	if appID <= 0 || installationID <= 0 {
		return nil, fmt.Errorf("github: app id %d, installation id %d: both must be positive", appID, installationID)
	}
	key, err := parseKey(privateKeyPEM)
	if err != nil {
		return nil, err
	}
	o := collect(opts)
	u, err := parseBaseURL(baseURL)
	if err != nil {
		return nil, err
	}
	// The App's own client: JWT auth, same rate-limit handling.
	appAPI := newGitHub(u, o, &jwtTransport{next: baseTransport(o.httpClient), api: u, appID: appID, key: key, clock: o.clock})
	c := newClient(u, o, newAppTokens(appAPI, installationID, o.clock))
	c.getLogin = func(ctx context.Context) (string, error) {
		var app *gh.App
		err := c.call(ctx, "get app", func(ctx context.Context) (err error) {
			app, _, err = appAPI.Apps.Get(ctx, "")
			return err
		})
		if err != nil {
			return "", err
		}
		if app.GetSlug() == "" {
			return "", errors.New("github: get app: no slug in response")
		}
		return app.GetSlug() + "[bot]", nil
	}
	return c, nil
}

func collect(opts []Option) options {
	o := options{
		httpClient: &http.Client{Timeout: 30 * time.Second},
		clock:      realClock{},
		maxWait:    60 * time.Second,
		userAgent:  "vouch",
	}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

func newClient(u *url.URL, o options, tokens tokenSource) *Client {
	auth := &authTransport{next: baseTransport(o.httpClient), api: u, tokens: tokens}
	origin := o.gitOrigin
	if origin == "" {
		origin = u.Scheme + "://" + u.Host
		if strings.EqualFold(u.Host, "api.github.com") {
			origin = "https://github.com"
		}
	}
	return &Client{gh: newGitHub(u, o, auth), tokens: tokens, clock: o.clock, maxWait: o.maxWait, login: o.botLogin, gitOrigin: strings.TrimRight(origin, "/")}
}

// newGitHub wires a go-github client to u through rt, with rate limits
// turned into *forge.RateLimitError.
func newGitHub(u *url.URL, o options, rt http.RoundTripper) *gh.Client {
	hc := &http.Client{
		Transport:     &rateLimitTransport{next: rt, clock: o.clock},
		Timeout:       o.httpClient.Timeout,
		CheckRedirect: o.httpClient.CheckRedirect,
	}
	c := gh.NewClient(hc)
	c.BaseURL = u
	c.UploadURL = u
	c.UserAgent = o.userAgent
	return c
}

func baseTransport(hc *http.Client) http.RoundTripper {
	if hc.Transport != nil {
		return hc.Transport
	}
	return http.DefaultTransport
}

func parseBaseURL(s string) (*url.URL, error) {
	if s == "" {
		s = DefaultBaseURL
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("github: base url: %w", err)
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" {
		return nil, fmt.Errorf("github: base url %q: want http(s)://host/path/ without credentials or query", u.Redacted())
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return u, nil
}

// botLogin is the login the client posts as, asked of GitHub once.
func (c *Client) botLogin(ctx context.Context) (string, error) {
	c.loginMu.Lock()
	defer c.loginMu.Unlock()
	if c.login != "" {
		return c.login, nil
	}
	l, err := c.getLogin(ctx)
	if err != nil {
		return "", err
	}
	if l == "" {
		return "", errors.New("github: authenticated login is empty")
	}
	c.login = l
	return l, nil
}

// perPage is the page size of list calls; maxPages bounds a listing.
const (
	perPage  = 100
	maxPages = 100
)
