package github

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"

	"vouch.dev/vouch/forge"
)

const (
	testAppID          = 12345
	testInstallationID = 678
)

// testKey is generated once: immutable test data, not a fake's state.
var testKey = sync.OnceValues(func() (*rsa.PrivateKey, error) { return rsa.GenerateKey(rand.Reader, 2048) })

func key(tb testing.TB) *rsa.PrivateKey {
	tb.Helper()
	k, err := testKey()
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// testKeyPEM is the key as GitHub hands it out: PKCS#1 PEM.
func testKeyPEM(tb testing.TB) []byte {
	tb.Helper()
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key(tb))})
}

// fakeApp serves the installation-token endpoint of a GitHub App: it checks
// each JWT against the test key and the fake clock, and hands out
// ghs_1, ghs_2, ... each valid for an hour.
type fakeApp struct {
	api    *fakeAPI
	clock  *fakeClock
	mu     sync.Mutex
	minted int
	status int // answer status when not 201
}

func (a *fakeApp) current() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return fmt.Sprintf("ghs_%d", a.minted)
}

// checkJWT verifies the App JWT a request carries.
func checkJWT(tb testing.TB, r *http.Request, clock *fakeClock) {
	tb.Helper()
	raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		tb.Errorf("%s %s: no bearer JWT: %q", r.Method, r.URL.Path, r.Header.Get("Authorization"))
		return
	}
	var claims jwt.RegisteredClaims
	_, err := jwt.ParseWithClaims(raw, &claims, func(*jwt.Token) (any, error) { return &key(tb).PublicKey, nil },
		jwt.WithValidMethods([]string{"RS256"}), jwt.WithTimeFunc(clock.Now),
		jwt.WithIssuer(fmt.Sprint(testAppID)), jwt.WithExpirationRequired(), jwt.WithIssuedAt())
	if err != nil {
		tb.Errorf("JWT does not verify with the App's public key: %v", err)
		return
	}
	now := clock.Now()
	if exp := claims.ExpiresAt.Time; !exp.After(now) || exp.Sub(now) > 10*time.Minute {
		tb.Errorf("JWT exp = now%+v; want within 10 minutes", exp.Sub(now))
	}
	if iat := claims.IssuedAt.Time; iat.After(now.Add(-59 * time.Second)) {
		tb.Errorf("JWT iat = now%+v; want about 60 s back for clock drift", iat.Sub(now))
	}
	if d := claims.ExpiresAt.Sub(claims.IssuedAt.Time); d > 10*time.Minute {
		tb.Errorf("JWT lifetime %v; GitHub allows 10 minutes", d)
	}
}

func setupApp(tb testing.TB, opts ...Option) (*Client, *fakeAPI, *fakeApp) {
	tb.Helper()
	api := newFakeAPI(tb)
	app := &fakeApp{api: api, clock: newFakeClock()}
	api.handle(fmt.Sprintf("POST /app/installations/%d/access_tokens", testInstallationID), func(w http.ResponseWriter, r *http.Request) {
		checkJWT(tb, r, app.clock)
		if app.status != 0 {
			writeJSON(tb, w, app.status, `{"message":"Integration not found"}`)
			return
		}
		app.mu.Lock()
		app.minted++
		n := app.minted
		app.mu.Unlock()
		writeJSON(tb, w, 201, fmt.Sprintf(`{"token":"ghs_%d","expires_at":%q,"permissions":{"pull_requests":"write"}}`,
			n, app.clock.Now().Add(time.Hour).Format(time.RFC3339)))
	})
	opts = append([]Option{WithClock(app.clock), WithGitOrigin("https://github.com")}, opts...)
	c, err := NewAppClient(api.BaseURL(), testAppID, testInstallationID, testKeyPEM(tb), opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return c, api, app
}

func TestAppTokenReusedThenRefreshed(t *testing.T) {
	c, api, app := setupApp(t)
	api.handle("GET /repos/o/r/pulls/7", func(w http.ResponseWriter, r *http.Request) {
		wantAuth(t, r, "Bearer "+app.current())
		writeJSON(t, w, 200, pullJSON(7, "open", "o/r", "o/r", shaA, shaB))
	})
	steps := []struct {
		advance    time.Duration
		fetch      bool // FetchSource rather than an API call
		wantMinted int
	}{
		{0, false, 1},                              // first use mints
		{30 * time.Minute, false, 1},               // reused
		{24*time.Minute + 59*time.Second, true, 1}, // 5m01s left: still reused
		{time.Second, false, 2},                    // 5 minutes left: refreshed
		{54 * time.Minute, true, 2},                // 6 minutes left on the new one
		{2 * time.Minute, true, 3},                 // 4 minutes left: refreshed for the fetch
	}
	for i, s := range steps {
		app.clock.Advance(s.advance)
		if s.fetch {
			src, err := c.FetchSource(t.Context(), &forge.PullRequest{Repo: forge.Repo{Owner: "o", Name: "r", CloneURL: "https://github.com/o/r.git"}, Number: 7})
			if err != nil {
				t.Fatalf("step %d: FetchSource: %v", i, err)
			}
			want := forge.FetchSource{URL: "https://github.com/o/r.git", Refs: []string{"refs/pull/7/head"}, Username: "x-access-token", Token: app.current()}
			if diff := cmp.Diff(want, src); diff != "" {
				t.Errorf("step %d: FetchSource (-want +got):\n%s", i, diff)
			}
			if strings.Contains(src.URL, "ghs_") {
				t.Errorf("step %d: token in the fetch URL %q", i, src.URL)
			}
		} else if _, err := c.PullRequest(t.Context(), repoOR, 7); err != nil {
			t.Fatalf("step %d: PullRequest: %v", i, err)
		}
		app.mu.Lock()
		minted := app.minted
		app.mu.Unlock()
		if minted != s.wantMinted {
			t.Errorf("step %d (+%v): %d tokens minted, want %d", i, s.advance, minted, s.wantMinted)
		}
	}
}

func TestAppTokenMintedOnceUnderConcurrency(t *testing.T) {
	c, api, app := setupApp(t)
	api.handle("GET /repos/o/r/pulls/7", func(w http.ResponseWriter, r *http.Request) {
		wantAuth(t, r, "Bearer ghs_1")
		writeJSON(t, w, 200, pullJSON(7, "open", "o/r", "o/r", shaA, shaB))
	})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := c.PullRequest(t.Context(), repoOR, 7); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if app.current() != "ghs_1" {
		t.Errorf("minted up to %s, want one token", app.current())
	}
}

// A token the API refuses (revoked early) is replaced on the next call.
func TestAppTokenDroppedAfter401(t *testing.T) {
	c, api, app := setupApp(t)
	api.handle("GET /repos/o/r/pulls/7", func(w http.ResponseWriter, r *http.Request) {
		if app.current() == "ghs_1" {
			writeJSON(t, w, 401, `{"message":"Bad credentials"}`)
			return
		}
		wantAuth(t, r, "Bearer ghs_2")
		writeJSON(t, w, 200, pullJSON(7, "open", "o/r", "o/r", shaA, shaB))
	})
	if _, err := c.PullRequest(t.Context(), repoOR, 7); !errors.Is(err, forge.ErrUnauthorized) {
		t.Fatalf("first PullRequest error = %v, want ErrUnauthorized", err)
	}
	if _, err := c.PullRequest(t.Context(), repoOR, 7); err != nil {
		t.Fatalf("second PullRequest: %v", err)
	}
}

// An App whose installation is gone is unauthorized, not "pull request not
// found", and not "no permission".
func TestAppInstallationGone(t *testing.T) {
	c, _, app := setupApp(t)
	app.status = http.StatusNotFound
	_, err := c.Permission(t.Context(), repoOR, "bob")
	if !errors.Is(err, forge.ErrUnauthorized) || errors.Is(err, forge.ErrNotFound) {
		t.Errorf("Permission error = %v, want ErrUnauthorized only", err)
	}
	if _, err := c.FetchSource(t.Context(), &forge.PullRequest{Repo: forge.Repo{CloneURL: "https://github.com/o/r.git"}, Number: 7}); !errors.Is(err, forge.ErrUnauthorized) {
		t.Errorf("FetchSource error = %v, want ErrUnauthorized", err)
	}
}

func TestAppBotLogin(t *testing.T) {
	api := newFakeAPI(t)
	clock := newFakeClock()
	api.handle("GET /app", func(w http.ResponseWriter, r *http.Request) {
		checkJWT(t, r, clock)
		writeJSON(t, w, 200, `{"id":12345,"slug":"vouch-test","name":"Vouch Test"}`)
	})
	api.handle(fmt.Sprintf("POST /app/installations/%d/access_tokens", testInstallationID), func(w http.ResponseWriter, r *http.Request) {
		checkJWT(t, r, clock)
		writeJSON(t, w, 201, fmt.Sprintf(`{"token":"ghs_1","expires_at":%q}`, clock.Now().Add(time.Hour).Format(time.RFC3339)))
	})
	api.handle("GET /repos/o/r/issues/7/comments", func(w http.ResponseWriter, r *http.Request) {
		wantAuth(t, r, "Bearer ghs_1")
		writeJSON(t, w, 200, `[{"id":1,"body":"ours","user":{"login":"vouch-test[bot]"}},{"id":2,"body":"theirs","user":{"login":"vouch-test"}}]`)
	})
	// PKCS#8, the other form a key may be stored in.
	der, err := x509.MarshalPKCS8PrivateKey(key(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewAppClient(api.BaseURL(), testAppID, testInstallationID, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.BotComments(t.Context(), repoOR, 7)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]forge.Comment{{ID: 1, Author: "vouch-test[bot]", Body: "ours"}}, got); diff != "" {
		t.Errorf("BotComments (-want +got):\n%s", diff)
	}
}
