package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	gh "github.com/google/go-github/v66/github"

	"vouch.dev/vouch/forge"
)

var repoOR = forge.Repo{Owner: "o", Name: "r"}

func wantAuth(tb testing.TB, r *http.Request, want string) {
	tb.Helper()
	if got := r.Header.Get("Authorization"); got != want {
		tb.Errorf("%s %s: Authorization = %q, want %q", r.Method, r.URL.Path, got, want)
	}
}

func TestNewClientRefuses(t *testing.T) {
	tests := []struct {
		name string
		new  func() (*Client, error)
	}{
		{"empty token", func() (*Client, error) { return NewTokenClient("", "") }},
		{"credentials in base url", func() (*Client, error) { return NewTokenClient("https://u:p@api.github.com/", "t") }},
		{"not http", func() (*Client, error) { return NewTokenClient("ftp://api.github.com/", "t") }},
		{"app without key", func() (*Client, error) { return NewAppClient("", 1, 2, nil) }},
		{"app with junk key", func() (*Client, error) { return NewAppClient("", 1, 2, []byte("-----BEGIN NONSENSE-----")) }},
		{"app id zero", func() (*Client, error) { return NewAppClient("", 0, 2, testKeyPEM(t)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if c, err := tt.new(); err == nil || c != nil {
				t.Errorf("constructor = %v, %v; want an error", c, err)
			}
		})
	}
}

func TestPullRequest(t *testing.T) {
	tests := []struct {
		name string
		json string
		want forge.PullRequest
	}{
		{"same repository", pullJSON(7, "open", "o/r", "o/r", shaA, shaB), forge.PullRequest{
			Repo: forge.Repo{Owner: "o", Name: "r", CloneURL: "https://github.com/o/r.git"}, Number: 7,
			Title: "Fix the thing", Author: "alice", Open: true, BaseRef: "main", BaseSHA: shaA, HeadSHA: shaB,
			HeadRepo: forge.Repo{Owner: "o", Name: "r", CloneURL: "https://github.com/o/r.git"},
		}},
		{"fork", pullJSON(7, "open", "o/r", "mallory/r", shaA, shaB), forge.PullRequest{
			Repo: forge.Repo{Owner: "o", Name: "r", CloneURL: "https://github.com/o/r.git"}, Number: 7,
			Title: "Fix the thing", Author: "alice", Open: true, BaseRef: "main", BaseSHA: shaA, HeadSHA: shaB,
			HeadRepo: forge.Repo{Owner: "mallory", Name: "r", CloneURL: "https://github.com/mallory/r.git"}, Fork: true,
		}},
		{"deleted fork, merged", strings.Replace(pullJSON(7, "closed", "o/r", "", shaA, shaB), `"merged":false`, `"merged":true`, 1), forge.PullRequest{
			Repo: forge.Repo{Owner: "o", Name: "r", CloneURL: "https://github.com/o/r.git"}, Number: 7,
			Title: "Fix the thing", Author: "alice", Merged: true, BaseRef: "main", BaseSHA: shaA, HeadSHA: shaB, Fork: true,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, api, _ := setup(t)
			api.handle("GET /repos/o/r/pulls/7", func(w http.ResponseWriter, r *http.Request) {
				wantAuth(t, r, "Bearer ghp_testtoken")
				writeJSON(t, w, 200, tt.json)
			})
			got, err := c.PullRequest(t.Context(), repoOR, 7)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(&tt.want, got); diff != "" {
				t.Errorf("PullRequest (-want +got):\n%s", diff)
			}
		})
	}
}

func TestErrorMapping(t *testing.T) {
	tests := []struct {
		status  int
		body    string
		wantErr error
	}{
		{404, `{"message":"Not Found","documentation_url":"https://docs.github.com/rest"}`, forge.ErrNotFound},
		{401, `{"message":"Bad credentials","documentation_url":"https://docs.github.com/rest"}`, forge.ErrUnauthorized},
		{403, `{"message":"Resource not accessible by integration"}`, forge.ErrUnauthorized},
		{500, `{"message":"Server Error"}`, nil},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.status), func(t *testing.T) {
			c, api, _ := setup(t)
			api.handle("GET /repos/o/r/pulls/7", func(w http.ResponseWriter, r *http.Request) { writeJSON(t, w, tt.status, tt.body) })
			_, err := c.PullRequest(t.Context(), repoOR, 7)
			if err == nil {
				t.Fatal("PullRequest succeeded")
			}
			for _, sentinel := range []error{forge.ErrNotFound, forge.ErrUnauthorized} {
				if errors.Is(err, sentinel) != (sentinel == tt.wantErr) {
					t.Errorf("PullRequest error %v: errors.Is(%v) = %v", err, sentinel, !(sentinel == tt.wantErr))
				}
			}
			var rl *forge.RateLimitError
			if errors.As(err, &rl) {
				t.Errorf("PullRequest error %v is a rate limit", err)
			}
			if strings.Contains(err.Error(), "ghp_testtoken") {
				t.Errorf("error text carries the token: %v", err)
			}
		})
	}
}

func TestOpenPullRequestsPaginates(t *testing.T) {
	c, api, _ := setup(t)
	api.handle("GET /repos/o/r/pulls", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("state") != "open" || q.Get("per_page") != "100" {
			t.Errorf("list query = %v, want state=open per_page=100", q)
		}
		switch q.Get("page") {
		case "":
			w.Header().Set("Link", fmt.Sprintf(`<%srepos/o/r/pulls?page=2&per_page=100&state=open>; rel="next", <%srepos/o/r/pulls?page=2&per_page=100&state=open>; rel="last"`, api.BaseURL(), api.BaseURL()))
			writeJSON(t, w, 200, "["+pullJSON(1, "open", "o/r", "o/r", shaA, shaB)+","+pullJSON(2, "open", "o/r", "x/r", shaA, shaB)+"]")
		case "2":
			writeJSON(t, w, 200, "["+pullJSON(3, "open", "o/r", "o/r", shaA, shaB)+"]")
		default:
			t.Errorf("unexpected page %q", q.Get("page"))
		}
	})
	got, err := c.OpenPullRequests(t.Context(), repoOR)
	if err != nil {
		t.Fatal(err)
	}
	var nums []int
	var forks []bool
	for _, p := range got {
		nums = append(nums, p.Number)
		forks = append(forks, p.Fork)
	}
	if diff := cmp.Diff([]int{1, 2, 3}, nums); diff != "" {
		t.Errorf("OpenPullRequests numbers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]bool{false, true, false}, forks); diff != "" {
		t.Errorf("OpenPullRequests forks (-want +got):\n%s", diff)
	}
	if n := api.calls("GET /repos/o/r/pulls"); n != 2 {
		t.Errorf("%d list requests, want 2", n)
	}
}

func TestPermission(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   forge.Permission
	}{
		{"admin", 200, `{"permission":"admin","role_name":"admin","user":{"login":"bob"}}`, forge.PermAdmin},
		{"maintain via role_name", 200, `{"permission":"write","role_name":"maintain"}`, forge.PermMaintain},
		{"write", 200, `{"permission":"write","role_name":"write"}`, forge.PermWrite},
		{"triage via role_name", 200, `{"permission":"read","role_name":"triage"}`, forge.PermTriage},
		{"read", 200, `{"permission":"read","role_name":"read"}`, forge.PermRead},
		{"legacy, no role_name", 200, `{"permission":"write"}`, forge.PermWrite},
		{"custom role falls back", 200, `{"permission":"read","role_name":"security-auditor"}`, forge.PermRead},
		{"none", 200, `{"permission":"none","role_name":""}`, forge.PermNone},
		{"404 is none", 404, `{"message":"Not Found"}`, forge.PermNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, api, _ := setup(t)
			api.handle("GET /repos/o/r/collaborators/bob/permission", func(w http.ResponseWriter, r *http.Request) {
				writeJSON(t, w, tt.status, tt.body)
			})
			got, err := c.Permission(t.Context(), repoOR, "bob")
			if err != nil || got != tt.want {
				t.Errorf("Permission(bob) = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	t.Run("unknown permission", func(t *testing.T) {
		c, api, _ := setup(t)
		api.handle("GET /repos/o/r/collaborators/bob/permission", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(t, w, 200, `{"permission":"overlord"}`)
		})
		if got, err := c.Permission(t.Context(), repoOR, "bob"); err == nil || got != forge.PermNone {
			t.Errorf("Permission = %v, %v; want PermNone and an error", got, err)
		}
	})
	t.Run("401 is an error", func(t *testing.T) {
		c, api, _ := setup(t)
		api.handle("GET /repos/o/r/collaborators/bob/permission", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(t, w, 401, `{"message":"Bad credentials"}`)
		})
		if _, err := c.Permission(t.Context(), repoOR, "bob"); !errors.Is(err, forge.ErrUnauthorized) {
			t.Errorf("Permission error = %v, want ErrUnauthorized", err)
		}
	})
}

func TestCreateAndEditComment(t *testing.T) {
	c, api, _ := setup(t)
	api.handle("POST /repos/o/r/issues/7/comments", func(w http.ResponseWriter, r *http.Request) {
		if got := decodeBody(t, r); !cmp.Equal(got, map[string]any{"body": "**PASS** ✓"}) {
			t.Errorf("create body = %v", got)
		}
		writeJSON(t, w, 201, `{"id":55,"body":"**PASS** ✓","user":{"login":"vouch-bot"}}`)
	})
	api.handle("PATCH /repos/o/r/issues/comments/55", func(w http.ResponseWriter, r *http.Request) {
		if got := decodeBody(t, r); !cmp.Equal(got, map[string]any{"body": "**FAIL**"}) {
			t.Errorf("edit body = %v", got)
		}
		writeJSON(t, w, 200, `{"id":55,"body":"**FAIL**","user":{"login":"vouch-bot"}}`)
	})
	got, err := c.CreateComment(t.Context(), repoOR, 7, "**PASS** ✓")
	if err != nil {
		t.Fatal(err)
	}
	if want := (forge.Comment{ID: 55, Author: "vouch-bot", Body: "**PASS** ✓"}); got != want {
		t.Errorf("CreateComment = %+v, want %+v", got, want)
	}
	if err := c.EditComment(t.Context(), repoOR, 55, "**FAIL**"); err != nil {
		t.Fatal(err)
	}
}

func TestCommentTruncation(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		cut     bool
		fenceOK bool
	}{
		{"at the limit, multibyte", strings.Repeat("é", forge.MaxCommentBody), false, true},
		{"one over, multibyte", strings.Repeat("é", forge.MaxCommentBody+1), true, true},
		{"far over", strings.Repeat("log line ✓\n", 20000), true, true},
		{"cut inside a code block", "## Output\n```\n" + strings.Repeat("x", forge.MaxCommentBody), true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, api, _ := setup(t)
			var sent string
			api.handle("POST /repos/o/r/issues/7/comments", func(w http.ResponseWriter, r *http.Request) {
				sent, _ = decodeBody(t, r)["body"].(string)
				writeJSON(t, w, 201, `{"id":1}`)
			})
			if _, err := c.CreateComment(t.Context(), repoOR, 7, tt.body); err != nil {
				t.Fatal(err)
			}
			if n := utf8.RuneCountInString(sent); n > forge.MaxCommentBody {
				t.Errorf("sent %d characters, limit %d", n, forge.MaxCommentBody)
			}
			if !tt.cut {
				if sent != tt.body {
					t.Errorf("body within the limit was changed")
				}
				return
			}
			note := strings.LastIndex(sent, "\n\n… (truncated by vouch: ")
			if note < 0 {
				t.Fatalf("truncated body has no note; ends %q", sent[max(0, len(sent)-80):])
			}
			head := strings.TrimSuffix(sent[:note], "\n```")
			if !strings.HasPrefix(tt.body, head) || utf8.RuneCountInString(head) < forge.MaxCommentBody-100 {
				t.Errorf("head not kept intact: %d characters kept", utf8.RuneCountInString(head))
			}
			if openFence(sent[:note]) {
				t.Errorf("truncated body leaves a code block open")
			}
			omitted := utf8.RuneCountInString(tt.body) - utf8.RuneCountInString(head)
			if !strings.Contains(sent[note:], fmt.Sprintf(": %d more characters", omitted)) {
				t.Errorf("note %q does not say %d characters were cut", sent[note:], omitted)
			}
		})
	}
}

func TestBotCommentsToken(t *testing.T) {
	c, api, _ := setup(t)
	api.handle("GET /user", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(t, w, 200, `{"login":"Vouch-Bot","type":"User"}`)
	})
	api.handle("GET /repos/o/r/issues/7/comments", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("per_page") != "100" {
			t.Errorf("per_page = %q", r.URL.Query().Get("per_page"))
		}
		if r.URL.Query().Get("page") == "2" {
			writeJSON(t, w, 200, `[{"id":30,"body":"third","user":{"login":"vouch-bot"}}]`)
			return
		}
		w.Header().Set("Link", fmt.Sprintf(`<%srepos/o/r/issues/7/comments?page=2&per_page=100>; rel="next"`, api.BaseURL()))
		writeJSON(t, w, 200, `[{"id":10,"body":"first","user":{"login":"vouch-bot"}},
			{"id":15,"body":"/verify","user":{"login":"alice"}},
			{"id":20,"body":"second","user":{"login":"vouch-bot"}}]`)
	})
	want := []forge.Comment{{ID: 10, Author: "vouch-bot", Body: "first"}, {ID: 20, Author: "vouch-bot", Body: "second"}, {ID: 30, Author: "vouch-bot", Body: "third"}}
	for range 2 {
		got, err := c.BotComments(t.Context(), repoOR, 7)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("BotComments (-want +got):\n%s", diff)
		}
	}
	if n := api.calls("GET /user"); n != 1 {
		t.Errorf("GET /user %d times, want once", n)
	}
}

func TestBotCommentsConfiguredLogin(t *testing.T) {
	c, api, _ := setup(t, WithBotLogin("vouch[bot]")) // no GET /user stub: asking fails the test
	api.handle("GET /repos/o/r/issues/7/comments", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(t, w, 200, `[{"id":1,"body":"x","user":{"login":"vouch[bot]"}},{"id":2,"body":"y","user":{"login":"vouch"}}]`)
	})
	got, err := c.BotComments(t.Context(), repoOR, 7)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]forge.Comment{{ID: 1, Author: "vouch[bot]", Body: "x"}}, got); diff != "" {
		t.Errorf("BotComments (-want +got):\n%s", diff)
	}
}

func TestSetStatus(t *testing.T) {
	long := strings.Repeat("ü", 200)
	tests := []struct {
		name string
		st   forge.Status
		want map[string]any
	}{
		{"full", forge.Status{State: forge.StatusSuccess, Context: "vouch/verify", Description: "PASS: 3 steps", TargetURL: "https://vouch.example/runs/9"},
			map[string]any{"state": "success", "context": "vouch/verify", "description": "PASS: 3 steps", "target_url": "https://vouch.example/runs/9"}},
		{"default context, no url", forge.Status{State: forge.StatusPending, Description: "queued"},
			map[string]any{"state": "pending", "context": "vouch/verify", "description": "queued"}},
		{"description at the cap", forge.Status{State: forge.StatusFailure, Description: long[:2*140]},
			map[string]any{"state": "failure", "context": "vouch/verify", "description": long[:2*140]}},
		{"description over the cap", forge.Status{State: forge.StatusError, Description: long},
			map[string]any{"state": "error", "context": "vouch/verify", "description": long[:2*139] + "…"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, api, _ := setup(t)
			api.handle("POST /repos/o/r/statuses/"+shaB, func(w http.ResponseWriter, r *http.Request) {
				got := decodeBody(t, r)
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("status body (-want +got):\n%s", diff)
				}
				if d, _ := got["description"].(string); utf8.RuneCountInString(d) > forge.MaxStatusDescription {
					t.Errorf("description has %d characters", utf8.RuneCountInString(d))
				}
				writeJSON(t, w, 201, `{"id":1,"state":"success"}`)
			})
			if err := c.SetStatus(t.Context(), repoOR, shaB, tt.st); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("refused before any request", func(t *testing.T) {
		c, _, _ := setup(t)
		if err := c.SetStatus(t.Context(), repoOR, shaB, forge.Status{State: "great"}); err == nil {
			t.Error("SetStatus accepted state \"great\"")
		}
		if err := c.SetStatus(t.Context(), repoOR, "main", forge.Status{State: forge.StatusSuccess}); err == nil {
			t.Error("SetStatus accepted a branch name for a sha")
		}
	})
}

func TestFetchSourceToken(t *testing.T) {
	pull7 := "refs/pull/7/head"
	tests := []struct {
		name     string
		pr       forge.PullRequest
		stub     bool // the clone URL must be read from the API
		wantURL  string
		wantRefs []string
	}{
		{"fork pull request", forge.PullRequest{Repo: forge.Repo{Owner: "o", Name: "r", CloneURL: "https://github.com/o/r.git"}, Number: 7, BaseRef: "main", Fork: true,
			HeadRepo: forge.Repo{Owner: "mallory", Name: "r", CloneURL: "https://github.com/mallory/r.git"}},
			false, "https://github.com/o/r.git", []string{pull7, "refs/heads/main"}},
		{"credentials stripped", forge.PullRequest{Repo: forge.Repo{Owner: "o", Name: "r", CloneURL: "https://someone:hunter2@github.com/o/r.git"}, Number: 7},
			false, "https://github.com/o/r.git", []string{pull7}},
		{"refspec-like base ref left out", forge.PullRequest{Repo: forge.Repo{Owner: "o", Name: "r", CloneURL: "https://github.com/o/r.git"}, Number: 7, BaseRef: "main:refs/heads/x"},
			false, "https://github.com/o/r.git", []string{pull7}},
		{"looked up", forge.PullRequest{Repo: repoOR, Number: 7}, true, "https://github.com/o/r.git", []string{pull7, "refs/heads/main"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, api, _ := setup(t)
			if tt.stub {
				api.handle("GET /repos/o/r/pulls/7", func(w http.ResponseWriter, r *http.Request) {
					writeJSON(t, w, 200, pullJSON(7, "open", "o/r", "x/r", shaA, shaB))
				})
			}
			got, err := c.FetchSource(t.Context(), &tt.pr)
			if err != nil {
				t.Fatal(err)
			}
			want := forge.FetchSource{URL: tt.wantURL, Refs: tt.wantRefs, Username: "x-access-token", Token: "ghp_testtoken"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("FetchSource (-want +got):\n%s", diff)
			}
			if strings.Contains(got.URL, "ghp_") || strings.Contains(got.URL, "@") {
				t.Errorf("FetchSource URL %q carries credentials", got.URL)
			}
		})
	}
}

// The token goes to the API host only: a redirect elsewhere loses it.
func TestTokenNotSentToOtherHosts(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("Authorization"); a != "" {
			t.Errorf("other host got Authorization %q", a)
		}
		writeJSON(t, w, 200, pullJSON(7, "open", "o/r", "o/r", shaA, shaB))
	}))
	t.Cleanup(other.Close)
	c, api, _ := setup(t)
	api.handle("GET /repos/o/r/pulls/7", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/elsewhere", http.StatusFound)
	})
	if _, err := c.PullRequest(t.Context(), repoOR, 7); err != nil {
		t.Fatal(err)
	}
}

func TestRateLimitRetry(t *testing.T) {
	type answer struct {
		status int
		header map[string]string
		body   string
	}
	limited := func(status int, h map[string]string, body string) answer { return answer{status, h, body} }
	ok := answer{200, nil, pullJSON(7, "open", "o/r", "o/r", shaA, shaB)}
	start := newFakeClock().Now()
	reset := func(d time.Duration) string { return strconv.FormatInt(start.Add(d).Unix(), 10) }
	tests := []struct {
		name      string
		answers   []answer
		wantWaits []time.Duration
		wantErrAt time.Time // zero: success
	}{
		{"403 Retry-After", []answer{limited(403, map[string]string{"Retry-After": "30"}, `{"message":"You have exceeded a secondary rate limit."}`), ok},
			[]time.Duration{30 * time.Second}, time.Time{}},
		{"429 Retry-After", []answer{limited(429, map[string]string{"Retry-After": "5"}, `{"message":"Too many requests"}`), ok},
			[]time.Duration{5 * time.Second}, time.Time{}},
		{"429 Retry-After as a date", []answer{limited(429, map[string]string{"Retry-After": start.Add(12 * time.Second).Format(http.TimeFormat)}, ``), ok},
			[]time.Duration{12 * time.Second}, time.Time{}},
		{"403 primary limit, reset", []answer{limited(403, map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset(20 * time.Second), "X-RateLimit-Limit": "5000"}, `{"message":"API rate limit exceeded"}`), ok},
			[]time.Duration{20 * time.Second}, time.Time{}},
		{"403 secondary, no headers", []answer{limited(403, nil, `{"message":"You have exceeded a secondary rate limit","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`), ok},
			[]time.Duration{time.Minute}, time.Time{}},
		{"429 beyond the bound: returned, not waited", []answer{limited(429, map[string]string{"Retry-After": "3600"}, ``)},
			nil, start.Add(time.Hour)},
		{"primary reset beyond the bound", []answer{limited(403, map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset(40 * time.Minute)}, `{"message":"API rate limit exceeded"}`)},
			nil, start.Add(40 * time.Minute)},
		{"limited twice: one retry only", []answer{limited(429, map[string]string{"Retry-After": "10"}, ``), limited(429, map[string]string{"Retry-After": "10"}, ``)},
			[]time.Duration{10 * time.Second}, start.Add(20 * time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, api, clock := setup(t)
			n := 0
			api.handle("GET /repos/o/r/pulls/7", func(w http.ResponseWriter, r *http.Request) {
				if n >= len(tt.answers) {
					t.Errorf("request %d; only %d expected", n+1, len(tt.answers))
					return
				}
				a := tt.answers[n]
				n++
				for k, v := range a.header {
					w.Header().Set(k, v)
				}
				writeJSON(t, w, a.status, a.body)
			})
			pr, err := c.PullRequest(t.Context(), repoOR, 7)
			if n != len(tt.answers) {
				t.Errorf("%d requests, want %d", n, len(tt.answers))
			}
			if diff := cmp.Diff(tt.wantWaits, clock.Waits()); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
			if tt.wantErrAt.IsZero() {
				if err != nil || pr.HeadSHA != shaB {
					t.Fatalf("PullRequest = %+v, %v; want success after the wait", pr, err)
				}
				return
			}
			var rl *forge.RateLimitError
			if !errors.As(err, &rl) {
				t.Fatalf("PullRequest error = %v, want *forge.RateLimitError", err)
			}
			if !rl.RetryAt.Equal(tt.wantErrAt) {
				t.Errorf("RetryAt = %v, want %v", rl.RetryAt, tt.wantErrAt)
			}
		})
	}
}

// cancelClock cancels the call's context instead of letting time pass.
type cancelClock struct {
	*fakeClock
	cancel context.CancelFunc
}

func (c cancelClock) After(time.Duration) <-chan time.Time { c.cancel(); return nil }

func TestRateLimitWaitHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	c, api, _ := setup(t)
	c.clock = cancelClock{newFakeClock(), cancel}
	api.handle("GET /repos/o/r/pulls/7", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		writeJSON(t, w, 429, ``)
	})
	if _, err := c.PullRequest(ctx, repoOR, 7); !errors.Is(err, context.Canceled) {
		t.Errorf("PullRequest error = %v, want context.Canceled", err)
	}
	if n := api.calls("GET /repos/o/r/pulls/7"); n != 1 {
		t.Errorf("%d requests after cancellation, want 1", n)
	}
}

// go-github's own rate-limit errors (from its client-side memory of an
// exhausted limit) map too.
func TestMapGoGitHubRateLimitErrors(t *testing.T) {
	now := newFakeClock().Now()
	req, _ := http.NewRequest("GET", "https://api.github.com/repos/o/r", nil)
	resp := &http.Response{StatusCode: 403, Request: req, Header: http.Header{}}
	after := 42 * time.Second
	tests := []struct {
		name string
		err  error
		want time.Time
	}{
		{"primary", &gh.RateLimitError{Rate: gh.Rate{Reset: gh.Timestamp{Time: now.Add(time.Hour)}}, Response: resp}, now.Add(time.Hour)},
		{"secondary with Retry-After", &gh.AbuseRateLimitError{RetryAfter: &after, Response: resp}, now.Add(after)},
		{"secondary without", &gh.AbuseRateLimitError{Response: resp}, now.Add(time.Minute)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rl *forge.RateLimitError
			if err := mapError(fmt.Errorf("wrapped: %w", tt.err), now); !errors.As(err, &rl) || !rl.RetryAt.Equal(tt.want) {
				t.Errorf("mapError = %v, want RetryAt %v", err, tt.want)
			}
		})
	}
}
