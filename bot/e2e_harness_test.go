package bot

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	sdk "code.gitea.io/sdk/gitea"

	"vouch.dev/vouch/evidence"
	"vouch.dev/vouch/forge"
	"vouch.dev/vouch/forge/forgetest"
	"vouch.dev/vouch/sandbox"
)

// e2eRecipe runs every *.check script one directory down in the head, as a
// test runner runs a pull request's tests: the scripts are the pull
// request's code, and the recipe names no path of them (a named path
// would be protected).
const e2eRecipe = `version: 1
steps:
  - name: checks
    run: ["sh", "-c", "for f in */*.check; do sh \"$f\" || exit 1; done; echo all checks passed"]
    timeout: 60s
`

const e2eSecret = "e2e-webhook-secret"

// e2e is one vouch service serving one fresh repository of the shared
// Gitea, with a real webhook from Gitea to the service.
type e2e struct {
	t        *testing.T
	g        *forgetest.Gitea
	repo     forge.Repo
	svc      *Service
	url      string // the service's root
	workRoot string // where the sandbox leaves each step's workspace
	cfg      Config
}

// startE2E creates maintainer/<name> with the e2e recipe on main, the bot
// as an admin collaborator, and starts a service for it; a Gitea webhook
// sends pull request and comment events to the service.
func startE2E(t *testing.T, name string) *e2e {
	t.Helper()
	e := newE2E(t, name)
	e.cfg = e.config(t)
	e.start(t)
	e.hook(t)
	return e
}

// newE2E creates the repository of startE2E, without a service.
func newE2E(t *testing.T, name string) *e2e {
	t.Helper()
	requireBwrap(t)
	g := srv.Get(t)
	ctx := t.Context()
	m := g.API(g.Maintainer)
	m.SetContext(ctx)
	created, _, err := m.CreateRepo(sdk.CreateRepoOption{Name: name, DefaultBranch: "main"})
	if err != nil {
		t.Fatalf("create repo %s: %v", name, err)
	}
	repo := forge.Repo{Owner: g.Maintainer.Login, Name: created.Name}
	admin := sdk.AccessModeAdmin
	if _, err := m.AddCollaborator(repo.Owner, repo.Name, g.Bot.Login, sdk.AddCollaboratorOption{Permission: &admin}); err != nil {
		t.Fatalf("add bot: %v", err)
	}
	if _, err := g.Commit(ctx, g.Maintainer, repo, "main", "", "initial", map[string]string{
		".vouch.yml":     e2eRecipe,
		"main.go":        "package main\n\nfunc main() {}\n",
		"tests/ok.check": "echo ok: main.go is there; test -f main.go\n",
	}); err != nil {
		t.Fatal(err)
	}
	return &e2e{t: t, g: g, repo: repo}
}

// hook makes Gitea deliver the repository's pull request and comment
// events to the service.
func (e *e2e) hook(t *testing.T) {
	t.Helper()
	m := e.g.API(e.g.Maintainer)
	m.SetContext(t.Context())
	repo, g := e.repo, e.g
	hook, _, err := m.CreateRepoHook(repo.Owner, repo.Name, sdk.CreateHookOption{
		Type:   "gitea",
		Config: map[string]string{"url": e.url + "/webhook/gitea", "content_type": "json", "secret": e2eSecret},
		Events: []string{"pull_request", "issue_comment"},
		Active: true,
	})
	if err != nil {
		t.Fatalf("CreateRepoHook: %v", err)
	}
	t.Cleanup(func() { g.API(g.Maintainer).DeleteRepoHook(repo.Owner, repo.Name, hook.ID) })
}

// config is the service configuration of the test: everything under the
// test's own directories.
func (e *e2e) config(t *testing.T) Config {
	t.Helper()
	dir := t.TempDir()
	e.workRoot = filepath.Join(dir, "work")
	if err := os.MkdirAll(e.workRoot, 0o711); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Dir(dir), dir, e.workRoot} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	cfg := DefaultConfig()
	cfg.Forges.Gitea = &GiteaConfig{BaseURL: e.g.URL, Token: Secret(e.g.Bot.Token), WebhookSecret: e2eSecret, BotLogin: e.g.Bot.Login}
	cfg.Repositories = []RepoRef{{Forge: forge.Gitea, Owner: e.repo.Owner, Name: e.repo.Name}}
	cfg.Store.Path = filepath.Join(dir, "data", "vouch.db")
	cfg.SigningKey = filepath.Join(dir, "data", "signing.key")
	cfg.FetchCache = filepath.Join(dir, "data", "git")
	cfg.WorkRoot = e.workRoot
	return cfg
}

// start runs the service on a fresh loopback port until the test ends.
func (e *e2e) start(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.url = "http://" + ln.Addr().String()
	e.cfg.Listen = ln.Addr().String()
	e.cfg.PublicURL = e.url
	logger := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	svc, err := NewService(t.Context(), e.cfg, logger)
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	// Keep each step's workspace, so a test can look for what code left.
	sc := e.cfg.SandboxConfig()
	sc.KeepWorkspace = true
	if svc.deps.Runner, err = sandbox.New(sc, logger); err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan error, 1)
	go func() { done <- svc.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		svc.Close()
	})
}

// testWriter sends the service's log to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// branch pushes files onto branch (created from main when new) as u, in
// repo (the base repository or a fork), and returns the new head.
func (e *e2e) push(u forgetest.User, repo forge.Repo, branch string, files map[string]string) string {
	e.t.Helper()
	head, err := e.g.Commit(e.t.Context(), u, repo, branch, "main", "change on "+branch, files)
	if err != nil {
		e.t.Fatal(err)
	}
	return head
}

// openPR opens a pull request from head ("branch" or "owner:branch") as u.
func (e *e2e) openPR(u forgetest.User, head, title string) int {
	e.t.Helper()
	api := e.g.API(u)
	api.SetContext(e.t.Context())
	pr, _, err := api.CreatePullRequest(e.repo.Owner, e.repo.Name, sdk.CreatePullRequestOption{Head: head, Base: "main", Title: title})
	if err != nil {
		e.t.Fatalf("CreatePullRequest(%s): %v", head, err)
	}
	return int(pr.Index)
}

// comment posts body on the pull request as u.
func (e *e2e) comment(u forgetest.User, pr int, body string) {
	e.t.Helper()
	api := e.g.API(u)
	api.SetContext(e.t.Context())
	if _, _, err := api.CreateIssueComment(e.repo.Owner, e.repo.Name, int64(pr), sdk.CreateIssueCommentOption{Body: body}); err != nil {
		e.t.Fatalf("comment: %v", err)
	}
}

// statuses returns vouch's statuses on sha, oldest first.
func (e *e2e) statuses(sha string) []*sdk.Status {
	e.t.Helper()
	api := e.g.API(e.g.Maintainer)
	api.SetContext(e.t.Context())
	var all []*sdk.Status
	for page := 1; ; page++ {
		sts, _, err := api.ListStatuses(e.repo.Owner, e.repo.Name, sha, sdk.ListStatusesOption{ListOptions: sdk.ListOptions{Page: page, PageSize: 50}})
		if err != nil {
			e.t.Fatalf("ListStatuses(%s): %v", sha, err)
		}
		for _, s := range sts {
			if s.Context == evidence.StatusContext {
				all = append(all, s)
			}
		}
		if len(sts) < 50 {
			break
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ID < all[j].ID })
	return all
}

// waitFinal waits for a final (not pending) vouch status on sha and
// returns it.
func (e *e2e) waitFinal(sha string) *sdk.Status {
	e.t.Helper()
	var last *sdk.Status
	e.waitFor("a final status on "+sha[:7], func() bool {
		sts := e.statuses(sha)
		if len(sts) == 0 {
			return false
		}
		last = sts[len(sts)-1]
		return last.State != sdk.StatusPending
	})
	return last
}

// waitFor polls cond until it holds, failing the test after two minutes.
func (e *e2e) waitFor(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		select {
		case <-e.t.Context().Done():
			e.t.Fatalf("waiting for %s: %v", what, e.t.Context().Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// botComments returns the bot's comments on the pull request.
func (e *e2e) botComments(pr int) []*sdk.Comment {
	e.t.Helper()
	api := e.g.API(e.g.Maintainer)
	api.SetContext(e.t.Context())
	cms, _, err := api.ListIssueComments(e.repo.Owner, e.repo.Name, int64(pr), sdk.ListIssueCommentOptions{ListOptions: sdk.ListOptions{PageSize: 50}})
	if err != nil {
		e.t.Fatalf("ListIssueComments: %v", err)
	}
	var mine []*sdk.Comment
	for _, c := range cms {
		if c.Poster != nil && c.Poster.UserName == e.g.Bot.Login {
			mine = append(mine, c)
		}
	}
	return mine
}

// evidenceComments maps each head to the bot's evidence comments for it.
func (e *e2e) evidenceComments(pr int) map[string][]string {
	e.t.Helper()
	out := map[string][]string{}
	for _, c := range e.botComments(pr) {
		if _, n, head, ok := evidence.ParseMarker(c.Body); ok && n == pr {
			out[head] = append(out[head], c.Body)
		}
	}
	return out
}

// replies returns the bot's replies to commands.
func (e *e2e) replies(pr int) []string {
	e.t.Helper()
	var out []string
	for _, c := range e.botComments(pr) {
		if strings.HasPrefix(c.Body, "<!-- vouch:reply ") {
			out = append(out, c.Body)
		}
	}
	return out
}

// ran reports whether any kept workspace holds a file named name: proof
// that code from a head ran.
func (e *e2e) ran(name string) bool {
	e.t.Helper()
	found := false
	filepath.WalkDir(e.workRoot, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == name {
			found = true
		}
		return nil
	})
	return found
}

// runsOf returns the store's finished runs of head.
func (e *e2e) runsOf(pr int, head string) []Run {
	e.t.Helper()
	runs, err := e.svc.store.Runs(e.t.Context(), RunFilter{Forge: forge.Gitea, Repo: repoKey(e.repo), PR: pr, Head: head, Finished: true}, 100)
	if err != nil {
		e.t.Fatal(err)
	}
	return runs
}

// metric returns the value of one sample line of /metrics, or "".
func (e *e2e) metric(line string) string {
	e.t.Helper()
	resp, err := http.Get(e.url + "/metrics")
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(line) + ` (\S+)$`).FindStringSubmatch(string(b))
	if m == nil {
		return ""
	}
	return m[1]
}

var _ = fmt.Sprintf

// get fetches url from the service and returns the body; non-200 fails.
func (e *e2e) get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, b)
	}
	return string(b)
}

// markers counts the files named name in the kept workspaces.
func (e *e2e) markers(name string) int {
	e.t.Helper()
	n := 0
	filepath.WalkDir(e.workRoot, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == name {
			n++
		}
		return nil
	})
	return n
}

// clone is a work tree of main as the maintainer, for tests that make many
// commits and push them in one go.
type clone struct {
	e    *e2e
	Dir  string
	URL  string // the repository's URL on Gitea
	Base string // main's head when cloned
}

// cloneMain fetches main into a fresh work tree on branch.
func (e *e2e) cloneMain(branch string) *clone {
	e.t.Helper()
	c := &clone{e: e, Dir: e.t.TempDir(), URL: e.g.URL + "/" + e.repo.FullName() + ".git"}
	c.Git("init", "-q", "-b", branch)
	c.Git("fetch", "-q", c.URL, "refs/heads/main")
	c.Git("reset", "-q", "--hard", "FETCH_HEAD")
	c.Base = c.Git("rev-parse", "HEAD")
	return c
}

// Git runs git in the clone as the maintainer and returns its output.
func (c *clone) Git(args ...string) string {
	c.e.t.Helper()
	out, err := c.e.g.Git(c.e.t.Context(), c.e.g.Maintainer, c.Dir, args...)
	if err != nil {
		c.e.t.Fatal(err)
	}
	return out
}

// fetched reports whether the service's fetch cache holds commit sha: proof
// of what vouch downloaded.
func (e *e2e) fetched(sha string) bool {
	e.t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(e.cfg.FetchCache, "*.git"))
	for _, d := range dirs {
		cmd := exec.Command("git", "--git-dir", d, "cat-file", "-e", sha+"^{commit}")
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		if cmd.Run() == nil {
			return true
		}
	}
	return false
}
