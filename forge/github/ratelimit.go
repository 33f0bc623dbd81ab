package github

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	gh "github.com/google/go-github/v66/github"

	"vouch.dev/vouch/forge"
)

// Clock is the time source of the client: token expiry, rate-limit waits.
// Tests inject a fake one; nothing in this package sleeps on the real clock
// unless given it.
type Clock interface {
	Now() time.Time
	// After is time.After: the channel receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// defaultRateLimitWait is how long to hold off when GitHub says "rate
// limited" without saying until when (its docs: at least a minute).
const defaultRateLimitWait = time.Minute

// rateLimitTransport turns GitHub's rate-limit answers into
// *forge.RateLimitError before go-github sees them: a 429, or a 403 that
// carries Retry-After, X-RateLimit-Remaining: 0, or a secondary-rate-limit
// message. RetryAt comes from Retry-After (seconds or an HTTP date), else
// X-RateLimit-Reset, else a minute from now, read on the injected clock.
// (go-github would otherwise remember the limit on the real clock and
// refuse requests itself, which a retry after waiting on Clock cannot pass.)
type rateLimitTransport struct {
	next  http.RoundTripper
	clock Clock
}

func (t *rateLimitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || (resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusTooManyRequests) {
		return resp, err
	}
	// Error bodies are small; cap what is read anyway.
	data, rerr := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if rerr != nil {
		return nil, rerr
	}
	if !isRateLimited(resp, data) {
		resp.Body = io.NopCloser(bytes.NewReader(data))
		return resp, nil
	}
	return nil, &forge.RateLimitError{
		RetryAt: retryAt(resp.Header, t.clock.Now()),
		Err:     fmt.Errorf("%s %s: %s: %s", req.Method, req.URL.Path, resp.Status, errorMessage(data)),
	}
}

func isRateLimited(resp *http.Response, body []byte) bool {
	if resp.StatusCode == http.StatusTooManyRequests {
		return true
	}
	if resp.Header.Get("Retry-After") != "" || resp.Header.Get("X-RateLimit-Remaining") == "0" {
		return true
	}
	lower := bytes.ToLower(body)
	return bytes.Contains(lower, []byte("rate limit")) || bytes.Contains(lower, []byte("rate-limit"))
}

// retryAt reads when GitHub allows the next request.
func retryAt(h http.Header, now time.Time) time.Time {
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
			return now.Add(time.Duration(s) * time.Second)
		}
		if t, err := http.ParseTime(v); err == nil {
			return t
		}
	}
	if v := h.Get("X-RateLimit-Reset"); v != "" {
		if s, err := strconv.ParseInt(v, 10, 64); err == nil && s > 0 {
			return time.Unix(s, 0)
		}
	}
	return now.Add(defaultRateLimitWait)
}

// errorMessage is the "message" of a GitHub error body, bounded.
func errorMessage(body []byte) string {
	var e gh.ErrorResponse
	if json.Unmarshal(body, &e) == nil && e.Message != "" {
		body = []byte(e.Message)
	}
	const max = 200
	if len(body) > max {
		body = body[:max]
	}
	return strings.ToValidUTF8(string(body), "?")
}

// mapError turns go-github's errors into forge's sentinels, keeping the
// original in the chain.
func mapError(err error, now time.Time) error {
	if err == nil {
		return nil
	}
	var rl *forge.RateLimitError
	if errors.As(err, &rl) {
		return rl
	}
	if errors.Is(err, forge.ErrNotFound) || errors.Is(err, forge.ErrUnauthorized) {
		return err // mapped already (an App token refusal inside a call)
	}
	var prl *gh.RateLimitError
	if errors.As(err, &prl) {
		at := prl.Rate.Reset.Time
		if at.IsZero() {
			at = now.Add(defaultRateLimitWait)
		}
		return &forge.RateLimitError{RetryAt: at, Err: err}
	}
	var arl *gh.AbuseRateLimitError
	if errors.As(err, &arl) {
		wait := defaultRateLimitWait
		if arl.RetryAfter != nil {
			wait = *arl.RetryAfter
		}
		return &forge.RateLimitError{RetryAt: now.Add(wait), Err: err}
	}
	var tfa *gh.TwoFactorAuthError
	if errors.As(err, &tfa) {
		return fmt.Errorf("%w: %w", forge.ErrUnauthorized, err)
	}
	var er *gh.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		switch er.Response.StatusCode {
		case http.StatusNotFound:
			return fmt.Errorf("%w: %w", forge.ErrNotFound, err)
		case http.StatusUnauthorized, http.StatusForbidden:
			// 403 here is not a rate limit (those were mapped above): the
			// credentials lack a permission, which no retry fixes.
			return fmt.Errorf("%w: %w", forge.ErrUnauthorized, err)
		}
	}
	return err
}

// call runs one API operation: f's error is mapped to forge's errors, and
// a rate limit that lifts within c.maxWait is waited out (on c.clock,
// ctx-aware) and the operation tried once more. A longer limit is returned
// for the caller's queue to retry at RetryAt.
func (c *Client) call(ctx context.Context, op string, f func(ctx context.Context) error) error {
	err := mapError(f(ctx), c.clock.Now())
	var rl *forge.RateLimitError
	if errors.As(err, &rl) {
		wait := rl.RetryAt.Sub(c.clock.Now())
		if wait <= c.maxWait {
			if wait > 0 {
				select {
				case <-ctx.Done():
					return fmt.Errorf("%s: waiting out rate limit: %w", op, ctx.Err())
				case <-c.clock.After(wait):
				}
			}
			err = mapError(f(ctx), c.clock.Now())
		}
	}
	if err != nil {
		return fmt.Errorf("github: %s: %w", op, err)
	}
	return nil
}
