// Package forgetest runs a real Gitea server for tests: built once from
// the Go module proxy (build.sh), started on a free loopback port with
// SQLite, and seeded with users, tokens, a repository and a fork.
//
//	var srv forgetest.Shared // one server for the whole test package
//
//	func TestMain(m *testing.M) { code := m.Run(); srv.Close(); os.Exit(code) }
//
//	func TestSomething(t *testing.T) {
//		g := srv.Get(t) // skips when Gitea cannot be built, fails under CI=true
//		...
//	}
//
// StartGitea(t) gives a test its own server, stopped when the test ends.
// This package imports testing nowhere outside its tests: helpers take the
// small TB interface, which *testing.T and *testing.B satisfy.
package forgetest

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	sdk "code.gitea.io/sdk/gitea"

	"vouch.dev/vouch/forge"
)

// Version is the Gitea release the harness builds and runs.
const Version = "1.26.0"

//go:embed build.sh
var buildScript string

// TB is the part of testing.TB the harness uses.
type TB interface {
	Helper()
	Cleanup(func())
	Context() context.Context
	Logf(format string, args ...any)
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
}

// ErrUnavailable says the Gitea binary is missing and could not be built.
var ErrUnavailable = errors.New("forgetest: gitea unavailable")

// User is a seeded account.
type User struct {
	Login, Password, Email string
	// Token is an access token with all scopes.
	Token string
}

// Gitea is a running server.
type Gitea struct {
	// URL is the server's root, "http://127.0.0.1:PORT", without a slash.
	URL string
	// Dir holds the server's config, database, repositories and log.
	Dir string
	// Maintainer is a site admin and owns Repo. Outsider has no rights on
	// Repo and owns Fork. Bot is an admin collaborator of Repo, as vouch's
	// own account would be.
	Maintainer, Outsider, Bot User
	// Repo is maintainer/project, public, with a main branch; Fork is
	// outsider/project, forked from it.
	Repo, Fork forge.Repo

	cmd      *exec.Cmd
	exited   chan struct{}
	waitErr  error
	closeOne sync.Once
}

// CacheDir is where build.sh puts the binary and its source:
// $VOUCH_CACHE, or ~/.cache/vouch.
func CacheDir() string {
	if d := os.Getenv("VOUCH_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "vouch")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "vouch")
}

// Binary returns the path of the cached Gitea binary and its source tree
// (the STATIC_ROOT_PATH), building them with build.sh when missing.
// VOUCH_GITEA_BIN and VOUCH_GITEA_SRC name prebuilt ones instead.
func Binary(ctx context.Context) (bin, src string, err error) {
	dir := filepath.Join(CacheDir(), "gitea-"+Version)
	bin, src = os.Getenv("VOUCH_GITEA_BIN"), os.Getenv("VOUCH_GITEA_SRC")
	if bin == "" {
		bin = filepath.Join(dir, "gitea")
	}
	if src == "" {
		src = filepath.Join(dir, "src")
	}
	if ready(bin, src) {
		return bin, src, nil
	}
	if os.Getenv("VOUCH_GITEA_BIN") != "" {
		return "", "", fmt.Errorf("%w: VOUCH_GITEA_BIN=%s is not an executable beside a source tree", ErrUnavailable, bin)
	}
	if _, err := exec.LookPath("go"); err != nil {
		return "", "", fmt.Errorf("%w: no binary at %s and no go toolchain to build it", ErrUnavailable, bin)
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", buildScript, "build.sh")
	cmd.Env = append(os.Environ(), "GITEA_VERSION="+Version, "VOUCH_CACHE="+CacheDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if _, err := cmd.Output(); err != nil {
		return "", "", fmt.Errorf("%w: build.sh: %v\n%s", ErrUnavailable, err, tail(stderr.String(), 4000))
	}
	if !ready(bin, src) {
		return "", "", fmt.Errorf("%w: build.sh left no binary at %s", ErrUnavailable, bin)
	}
	return bin, src, nil
}

func ready(bin, src string) bool {
	fi, err := os.Stat(bin)
	if err != nil || fi.Mode()&0o111 == 0 {
		return false
	}
	_, err = os.Stat(filepath.Join(src, "options"))
	return err == nil
}

// StartGitea starts a server for one test and stops it when the test ends.
// A Gitea that cannot be built skips the test, or fails it under CI=true;
// a Gitea that cannot start fails it.
func StartGitea(tb TB) *Gitea {
	tb.Helper()
	g, err := Start(tb.Context())
	if err != nil {
		fail(tb, err)
		return nil
	}
	tb.Cleanup(func() { g.Close() })
	return g
}

func fail(tb TB, err error) {
	tb.Helper()
	if errors.Is(err, ErrUnavailable) && os.Getenv("CI") != "true" {
		tb.Skipf("%v (run `make gitea`; under CI=true this fails)", err)
		return
	}
	tb.Fatalf("start gitea: %v", err)
}

// Shared starts one server lazily for a whole test package; close it from
// TestMain after m.Run.
type Shared struct {
	once sync.Once
	g    *Gitea
	err  error
}

// Get returns the package's server, starting it on first use. It skips or
// fails tb as StartGitea does.
func (s *Shared) Get(tb TB) *Gitea {
	tb.Helper()
	s.once.Do(func() {
		// The server outlives the test that happens to start it.
		s.g, s.err = Start(context.Background())
	})
	if s.err != nil {
		fail(tb, s.err)
		return nil
	}
	return s.g
}

// Close stops the server if one was started.
func (s *Shared) Close() {
	if s.g != nil {
		s.g.Close()
	}
}

// Start builds (if needed), configures, seeds and starts a server. ctx
// bounds the setup, not the server's life; Close stops it.
func Start(ctx context.Context) (*Gitea, error) {
	bin, src, err := Binary(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "vouch-gitea-")
	if err != nil {
		return nil, err
	}
	g := &Gitea{Dir: dir}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		lastErr = g.start(ctx, bin, src)
		if lastErr == nil || !errors.Is(lastErr, errPortTaken) {
			break
		}
	}
	if lastErr != nil {
		g.Close()
		return nil, lastErr
	}
	if err := g.seed(ctx); err != nil {
		logs := g.Logs()
		g.Close()
		return nil, fmt.Errorf("seed gitea: %w\n%s", err, logs)
	}
	return g, nil
}

var errPortTaken = errors.New("port taken")

func (g *Gitea) ini() string { return filepath.Join(g.Dir, "custom", "conf", "app.ini") }

func (g *Gitea) start(ctx context.Context, bin, src string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	g.URL = fmt.Sprintf("http://127.0.0.1:%d", port)
	if err := g.writeConfig(src, port); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(g.Dir, "data", "gitea.db")); err != nil {
		if err := g.seedUsers(ctx, bin); err != nil {
			return err
		}
	}

	logf, err := os.OpenFile(filepath.Join(g.Dir, "gitea.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "web", "--config", g.ini(), "--work-path", g.Dir)
	cmd.Dir = g.Dir
	cmd.Env = g.env()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", bin, err)
	}
	g.cmd = cmd
	g.exited = make(chan struct{})
	go func() { g.waitErr = cmd.Wait(); close(g.exited) }()

	deadline := time.NewTimer(90 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	hc := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case <-g.exited:
			logs := g.Logs()
			g.cmd = nil
			if strings.Contains(logs, "address already in use") {
				return errPortTaken
			}
			return fmt.Errorf("gitea exited while starting: %v\n%s", g.waitErr, logs)
		case <-deadline.C:
			return fmt.Errorf("gitea did not answer %s/api/v1/version within 90s\n%s", g.URL, g.Logs())
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			resp, err := hc.Get(g.URL + "/api/v1/version")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return nil
				}
			}
		}
	}
}

func (g *Gitea) writeConfig(src string, port int) error {
	secret := func() string {
		b := make([]byte, 32)
		rand.Read(b)
		return hex.EncodeToString(b)
	}
	runUser := os.Getenv("USER")
	if u, err := exec.Command("id", "-un").Output(); err == nil {
		runUser = strings.TrimSpace(string(u))
	}
	d := g.Dir
	ini := fmt.Sprintf(`APP_NAME = vouch-test
RUN_MODE = prod
RUN_USER = %[1]s
WORK_PATH = %[2]s

[database]
DB_TYPE = sqlite3
PATH = %[2]s/data/gitea.db
SQLITE_JOURNAL_MODE = WAL

[repository]
ROOT = %[2]s/repos
DEFAULT_BRANCH = main
DEFAULT_PRIVATE = public
ENABLE_PUSH_CREATE_USER = true

[server]
PROTOCOL = http
HTTP_ADDR = 127.0.0.1
HTTP_PORT = %[3]d
DOMAIN = 127.0.0.1
ROOT_URL = http://127.0.0.1:%[3]d/
OFFLINE_MODE = true
DISABLE_SSH = true
START_SSH_SERVER = false
LFS_START_SERVER = false
APP_DATA_PATH = %[2]s/data
STATIC_ROOT_PATH = %[4]s

[security]
INSTALL_LOCK = true
SECRET_KEY = %[5]s
INTERNAL_TOKEN = %[6]s
PASSWORD_HASH_ALGO = pbkdf2_hi
MIN_PASSWORD_LENGTH = 8
PASSWORD_COMPLEXITY = off

[oauth2]
ENABLED = false

[service]
DISABLE_REGISTRATION = true
REQUIRE_SIGNIN_VIEW = false
ENABLE_NOTIFY_MAIL = false
DEFAULT_KEEP_EMAIL_PRIVATE = true
NO_REPLY_ADDRESS = noreply.example.invalid

[mailer]
ENABLED = false

[webhook]
ALLOWED_HOST_LIST = loopback
DELIVER_TIMEOUT = 10
SKIP_TLS_VERIFY = false

[queue]
TYPE = channel

[indexer]
ISSUE_INDEXER_TYPE = db
REPO_INDEXER_ENABLED = false

[session]
PROVIDER = memory

[cache]
ADAPTER = memory

[picture]
DISABLE_GRAVATAR = true
ENABLE_FEDERATED_AVATAR = false

[actions]
ENABLED = false

[packages]
ENABLED = false

[cron]
ENABLED = false

[cron.update_checker]
ENABLED = false

[log]
MODE = file
LEVEL = Info
ROOT_PATH = %[2]s/log
`, runUser, d, port, src, secret(), secret())
	if err := os.MkdirAll(filepath.Dir(g.ini()), 0o700); err != nil {
		return err
	}
	return os.WriteFile(g.ini(), []byte(ini), 0o600)
}

func (g *Gitea) env() []string {
	env := []string{
		"GITEA_WORK_DIR=" + g.Dir,
		"HOME=" + filepath.Join(g.Dir, "home"),
		"PATH=" + os.Getenv("PATH"),
		"USER=" + os.Getenv("USER"),
		"TMPDIR=" + os.TempDir(),
	}
	if os.Geteuid() == 0 {
		// CI containers run as root; Gitea refuses that unless told (it
		// reads the GITEA_-prefixed name, older releases the bare one).
		env = append(env, "GITEA_I_AM_BEING_UNSAFE_RUNNING_AS_ROOT=true", "I_AM_BEING_UNSAFE_RUNNING_AS_ROOT=true")
	}
	return env
}

// cli runs the Gitea CLI against the server's config.
func (g *Gitea) cli(ctx context.Context, bin string, args ...string) (string, error) {
	args = append(args, "--config", g.ini(), "--work-path", g.Dir)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = g.Dir
	cmd.Env = g.env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		// Name the subcommand only: the arguments hold passwords.
		return "", fmt.Errorf("gitea %s: %v\n%s%s", strings.Join(args[:min(3, len(args))], " "), err, tail(string(out), 2000), tail(stderr.String(), 2000))
	}
	return strings.TrimSpace(string(out)), nil
}

// seedUsers migrates the database and creates the three users and their
// tokens through the CLI, before the server opens the database.
func (g *Gitea) seedUsers(ctx context.Context, bin string) error {
	if _, err := g.cli(ctx, bin, "migrate"); err != nil {
		return err
	}
	for _, u := range []struct {
		u     *User
		login string
		admin bool
	}{{&g.Maintainer, "maintainer", true}, {&g.Outsider, "outsider", false}, {&g.Bot, "vouch-bot", false}} {
		pw := make([]byte, 12)
		rand.Read(pw)
		*u.u = User{Login: u.login, Password: "pw-" + hex.EncodeToString(pw), Email: u.login + "@example.invalid"}
		args := []string{"admin", "user", "create", "--username", u.login, "--password", u.u.Password,
			"--email", u.u.Email, "--must-change-password=false"}
		if u.admin {
			args = append(args, "--admin")
		}
		if _, err := g.cli(ctx, bin, args...); err != nil {
			return err
		}
		out, err := g.cli(ctx, bin, "admin", "user", "generate-access-token", "--username", u.login,
			"--token-name", "vouch-test", "--scopes", "all", "--raw")
		if err != nil {
			return err
		}
		// The token is a line of its own; running as root, a warning comes
		// before it, and a log line may come after.
		tok := ""
		for _, line := range strings.Split(out, "\n") {
			if line = strings.TrimSpace(line); len(line) == 40 && strings.Trim(line, "0123456789abcdef") == "" {
				tok = line
			}
		}
		if tok == "" {
			return fmt.Errorf("gitea generate-access-token for %s: no token in its output %q", u.login, tail(out, 400))
		}
		u.u.Token = tok
	}
	return nil
}

// seed creates maintainer/project with one commit on main, makes the bot
// its admin collaborator, and forks it as the outsider.
func (g *Gitea) seed(ctx context.Context) error {
	m := g.API(g.Maintainer)
	m.SetContext(ctx)
	repo, _, err := m.CreateRepo(sdk.CreateRepoOption{Name: "project", DefaultBranch: "main"})
	if err != nil {
		return fmt.Errorf("create repo: %w", err)
	}
	g.Repo = forge.Repo{Owner: g.Maintainer.Login, Name: repo.Name, CloneURL: repo.CloneURL}
	admin := sdk.AccessModeAdmin
	if _, err := m.AddCollaborator(g.Repo.Owner, g.Repo.Name, g.Bot.Login, sdk.AddCollaboratorOption{Permission: &admin}); err != nil {
		return fmt.Errorf("add bot as collaborator: %w", err)
	}
	if _, err := g.Commit(ctx, g.Maintainer, g.Repo, "main", "", "initial", map[string]string{
		".vouch.yml": "version: 1\nsteps:\n  - name: unit\n    run: [\"go\", \"test\", \"./...\"]\n",
		"go.mod":     "module example.com/project\n\ngo 1.22\n",
		"main.go":    "package main\n\nfunc main() {}\n",
	}); err != nil {
		return err
	}
	o := g.API(g.Outsider)
	o.SetContext(ctx)
	fork, _, err := o.CreateFork(g.Repo.Owner, g.Repo.Name, sdk.CreateForkOption{})
	if err != nil {
		return fmt.Errorf("fork: %w", err)
	}
	g.Fork = forge.Repo{Owner: g.Outsider.Login, Name: fork.Name, CloneURL: fork.CloneURL}
	return nil
}

// API returns an SDK client authenticated as u.
func (g *Gitea) API(u User) *sdk.Client {
	c, err := sdk.NewClient(g.URL, sdk.SetToken(u.Token), sdk.SetGiteaVersion(""))
	if err != nil {
		panic(err) // only options can fail, and these do not
	}
	return c
}

// Commit writes files (path → content; "" content deletes) on top of
// branch of repo (or of from when branch does not exist yet, or of nothing
// when from is ""), pushes the commit to branch as u over HTTP, and returns
// its id. The token travels in an http.extraHeader set through the
// environment, never in a URL or on a command line.
func (g *Gitea) Commit(ctx context.Context, u User, repo forge.Repo, branch, from, msg string, files map[string]string) (string, error) {
	work, err := os.MkdirTemp(g.Dir, "work-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	url := g.URL + "/" + repo.Owner + "/" + repo.Name + ".git"
	git := func(args ...string) (string, error) { return g.Git(ctx, u, work, args...) }
	if _, err := git("init", "-q", "-b", "work"); err != nil {
		return "", err
	}
	base := ""
	for _, b := range []string{branch, from} {
		if b == "" {
			continue
		}
		if _, err := git("fetch", "-q", url, "refs/heads/"+b); err == nil {
			base = b
			break
		}
	}
	if base != "" {
		if _, err := git("reset", "-q", "--hard", "FETCH_HEAD"); err != nil {
			return "", err
		}
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		full := filepath.Join(work, filepath.FromSlash(p))
		if files[p] == "" {
			if err := os.Remove(full); err != nil && !os.IsNotExist(err) {
				return "", err
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(full, []byte(files[p]), 0o644); err != nil {
			return "", err
		}
	}
	if _, err := git("add", "-A"); err != nil {
		return "", err
	}
	if _, err := git("commit", "-q", "--allow-empty", "-m", msg); err != nil {
		return "", err
	}
	if _, err := git("push", "-q", url, "HEAD:refs/heads/"+branch); err != nil {
		return "", err
	}
	sha, err := git("rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	return sha, g.waitBranch(ctx, u, repo, branch, sha)
}

// waitBranch polls until Gitea has processed a push (it does so from a
// queue, after the push returns) and shows branch at sha.
func (g *Gitea) waitBranch(ctx context.Context, u User, repo forge.Repo, branch, sha string) error {
	api := g.API(u)
	api.SetContext(ctx)
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, _, err := api.GetRepoBranch(repo.Owner, repo.Name, branch)
		if err == nil && b.Commit != nil && b.Commit.ID == sha {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("push of %s to %s %s not processed within 60s (last error: %v)", sha, repo.FullName(), branch, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Git runs git in dir as u: the user's token is sent as HTTP basic auth
// through an http.extraHeader passed in the environment, and no global or
// system git config is read.
func (g *Gitea) Git(ctx context.Context, u User, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	auth := base64.StdEncoding.EncodeToString([]byte(u.Login + ":" + u.Token))
	cmd.Env = append(os.Environ(),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME="+u.Login, "GIT_AUTHOR_EMAIL="+u.Email,
		"GIT_COMMITTER_NAME="+u.Login, "GIT_COMMITTER_EMAIL="+u.Email,
		"GIT_CONFIG_COUNT=1",
		"GIT_CONFIG_KEY_0=http.extraHeader",
		"GIT_CONFIG_VALUE_0=Authorization: Basic "+auth,
	)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.ReplaceAll(stderr.String(), u.Token, "***")
		return "", fmt.Errorf("git %s: %v: %s", args[0], err, strings.TrimSpace(msg))
	}
	return strings.TrimSpace(string(out)), nil
}

// Logs returns the tail of the server's output and log file, for failures.
func (g *Gitea) Logs() string {
	var b strings.Builder
	for _, f := range []string{filepath.Join(g.Dir, "gitea.out"), filepath.Join(g.Dir, "log", "gitea.log")} {
		if data, err := os.ReadFile(f); err == nil {
			fmt.Fprintf(&b, "--- %s\n%s\n", filepath.Base(f), tail(string(data), 4000))
		}
	}
	return b.String()
}

// Close stops the server and removes its directory.
func (g *Gitea) Close() error {
	var err error
	g.closeOne.Do(func() {
		if g.cmd != nil && g.cmd.Process != nil {
			g.cmd.Process.Signal(os.Interrupt)
			select {
			case <-g.exited:
			case <-time.After(15 * time.Second):
				g.cmd.Process.Kill()
				<-g.exited
			}
		}
		err = os.RemoveAll(g.Dir)
	})
	return err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
