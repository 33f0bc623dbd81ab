package github

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"
	gh "github.com/google/go-github/v66/github"

	"vouch.dev/vouch/forge"
)

// tokenSource yields the token API calls and git fetches authenticate with.
type tokenSource interface {
	Token(ctx context.Context) (string, error)
	// invalidate drops tok if it is the cached one (the API refused it).
	invalidate(tok string)
}

// staticToken is a personal access token or any fixed token.
type staticToken string

func (s staticToken) Token(context.Context) (string, error) { return string(s), nil }
func (staticToken) invalidate(string)                       {}

// GitHub App installation tokens live an hour; this one is replaced this
// long before it expires, so a token handed to a git fetch has time to run.
const tokenRefreshEarly = 5 * time.Minute

// appTokens mints GitHub App installation tokens: an RS256 JWT signed with
// the App's key (iss = App id, iat = now-60s, exp = now+9m) is exchanged at
// POST /app/installations/{id}/access_tokens; the token is cached and
// refreshed tokenRefreshEarly before its expires_at.
type appTokens struct {
	api            *gh.Client // authenticates as the App, with a JWT
	installationID int64
	clock          Clock

	lock    chan struct{} // held while reading or refreshing; ctx-aware
	token   string
	expires time.Time
}

func newAppTokens(api *gh.Client, installationID int64, clock Clock) *appTokens {
	return &appTokens{api: api, installationID: installationID, clock: clock, lock: make(chan struct{}, 1)}
}

func (s *appTokens) Token(ctx context.Context) (string, error) {
	select {
	case s.lock <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-s.lock }()

	now := s.clock.Now()
	if s.token != "" && now.Before(s.expires.Add(-tokenRefreshEarly)) {
		return s.token, nil
	}
	it, _, err := s.api.Apps.CreateInstallationToken(ctx, s.installationID, nil)
	if err != nil {
		err = mapError(err, now)
		if errors.Is(err, forge.ErrNotFound) {
			// The App or installation is gone: the credentials, not the
			// object a call asked about, are what is missing.
			// (%v: not ErrNotFound to callers, which would read it as theirs.)
			err = fmt.Errorf("%w: %v", forge.ErrUnauthorized, err)
		}
		return "", fmt.Errorf("github: installation %d token: %w", s.installationID, err)
	}
	if it.GetToken() == "" {
		return "", fmt.Errorf("github: installation %d token: empty token in response", s.installationID)
	}
	s.token = it.GetToken()
	s.expires = it.GetExpiresAt().Time
	if s.expires.IsZero() {
		s.expires = now.Add(time.Hour) // GitHub's fixed lifetime
	}
	return s.token, nil
}

func (s *appTokens) invalidate(tok string) {
	select {
	case s.lock <- struct{}{}:
	default:
		return // a refresh is under way
	}
	if s.token == tok {
		s.token = ""
	}
	<-s.lock
}

// appJWT is the JWT that authenticates as the App itself.
func appJWT(appID int64, key *rsa.PrivateKey, now time.Time) (string, error) {
	claims := jwt.RegisteredClaims{
		Issuer:    strconv.FormatInt(appID, 10),
		IssuedAt:  jwt.NewNumericDate(now.Add(-60 * time.Second)), // allow for clock drift
		ExpiresAt: jwt.NewNumericDate(now.Add(9 * time.Minute)),   // GitHub allows at most 10
	}
	return jwt.NewWithClaims(jwt.SigningMethodRS256, claims).SignedString(key)
}

// jwtTransport authenticates requests to the API host as the App.
type jwtTransport struct {
	next  http.RoundTripper
	api   *url.URL
	appID int64
	key   *rsa.PrivateKey
	clock Clock
}

func (t *jwtTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !sameHost(req.URL, t.api) {
		return t.next.RoundTrip(req)
	}
	tok, err := appJWT(t.appID, t.key, t.clock.Now())
	if err != nil {
		closeBody(req)
		return nil, fmt.Errorf("github: sign app jwt: %w", err)
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	return t.next.RoundTrip(r)
}

// authTransport adds the token to requests for the API host only, so a
// redirect elsewhere never carries it.
type authTransport struct {
	next   http.RoundTripper
	api    *url.URL
	tokens tokenSource
}

func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !sameHost(req.URL, t.api) {
		return t.next.RoundTrip(req)
	}
	tok, err := t.tokens.Token(req.Context())
	if err != nil {
		closeBody(req)
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	resp, err := t.next.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		t.tokens.invalidate(tok) // revoked early: mint a new one next time
	}
	return resp, err
}

func sameHost(u, api *url.URL) bool {
	return u.Scheme == api.Scheme && u.Host == api.Host
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

var errNoKey = errors.New("github: app private key: no RSA key in PEM")

// parseKey reads the App's PEM private key (PKCS#1 or PKCS#8).
func parseKey(pemBytes []byte) (*rsa.PrivateKey, error) {
	if len(pemBytes) == 0 {
		return nil, errNoKey
	}
	key, err := jwt.ParseRSAPrivateKeyFromPEM(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("github: app private key: %w", err)
	}
	return key, nil
}
