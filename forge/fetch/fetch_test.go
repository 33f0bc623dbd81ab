package fetch_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	sdk "code.gitea.io/sdk/gitea"
	"github.com/go-git/go-git/v5/plumbing"

	"vouch.dev/vouch/forge"
	"vouch.dev/vouch/forge/fetch"
	"vouch.dev/vouch/forge/forgetest"
)

var srv forgetest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	srv.Close()
	os.Exit(code)
}

// packBytes is the total size of the cache's pack files: what fetches
// have brought in, since go-git stores each fetched pack as it arrived.
func packBytes(t *testing.T, dir string) (total int64, packs int) {
	t.Helper()
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if strings.HasSuffix(p, ".pack") {
			total += fi.Size()
			packs++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return total, packs
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// TestForkHeadByExactSHA: a fork's commit, named only by its id, fetched
// from the fork and from the base repository's refs/pull/N/head.
func TestForkHeadByExactSHA(t *testing.T) {
	g := srv.Get(t)
	ctx := t.Context()
	head, err := g.Commit(ctx, g.Outsider, g.Fork, "fork-exact", "main", "fork change", map[string]string{"fork.txt": "hello\n"})
	if err != nil {
		t.Fatal(err)
	}
	pr, _, err := g.API(g.Outsider).CreatePullRequest(g.Repo.Owner, g.Repo.Name, sdk.CreatePullRequestOption{
		Head: g.Outsider.Login + ":fork-exact", Base: "main", Title: "exact",
	})
	if err != nil {
		t.Fatal(err)
	}

	// From the fork, by id alone: no ref names the commit in the request.
	c := &fetch.Cache{Dir: t.TempDir()}
	repo, err := c.Fetch(ctx, forge.FetchSource{URL: g.Fork.CloneURL}, head)
	if err != nil {
		t.Fatalf("Fetch(fork, %s) = %v", head, err)
	}
	commit, err := repo.CommitObject(plumbing.NewHash(head))
	if err != nil {
		t.Fatal(err)
	}
	if f, err := commit.File("fork.txt"); err != nil {
		t.Errorf("fork head lacks fork.txt: %v", err)
	} else if s, _ := f.Contents(); s != "hello\n" {
		t.Errorf("fork.txt = %q", s)
	}

	// From the base repository, with the bot's token, as FetchSource says.
	src := forge.FetchSource{
		URL:      g.Repo.CloneURL,
		Refs:     []string{"refs/pull/" + strconv.FormatInt(pr.Index, 10) + "/head", "refs/heads/main"},
		Username: g.Bot.Login, Token: g.Bot.Token,
	}
	if _, err := c.Fetch(ctx, src, head); err != nil {
		t.Fatalf("Fetch(base refs/pull/N/head, %s) = %v", head, err)
	}
	entries, err := os.ReadDir(c.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var repos []string
	for _, e := range entries {
		if e.IsDir() {
			repos = append(repos, e.Name())
		}
	}
	if len(repos) != 2 {
		t.Errorf("cache holds %v, want one bare repository per URL", repos)
	}
	for _, r := range repos {
		cfg, err := os.ReadFile(filepath.Join(c.Dir, r, "config"))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(cfg), g.Bot.Token) || strings.Contains(r, g.Bot.Token) {
			t.Errorf("cache repository %s records the token", r)
		}
		if !strings.Contains(string(cfg), "bare = true") {
			t.Errorf("cache repository %s is not bare:\n%s", r, cfg)
		}
	}
}

// TestCacheReuse: after one more commit, the second fetch brings in a pack
// far smaller than the first; a third with nothing new fetches nothing.
func TestCacheReuse(t *testing.T) {
	g := srv.Get(t)
	ctx := t.Context()
	// Half a megabyte that does not compress, so the first pack is large.
	big := randomHex(256 << 10)
	sha1, err := g.Commit(ctx, g.Maintainer, g.Repo, "cache-reuse", "main", "big", map[string]string{"big.txt": big})
	if err != nil {
		t.Fatal(err)
	}
	src := forge.FetchSource{URL: g.Repo.CloneURL, Refs: []string{"refs/heads/cache-reuse"}, Username: g.Bot.Login, Token: g.Bot.Token}
	c := &fetch.Cache{Dir: t.TempDir()}
	if _, err := c.Fetch(ctx, src, sha1); err != nil {
		t.Fatal(err)
	}
	first, packs1 := packBytes(t, c.Dir)

	sha2, err := g.Commit(ctx, g.Maintainer, g.Repo, "cache-reuse", "", "small", map[string]string{"small.txt": "one line\n"})
	if err != nil {
		t.Fatal(err)
	}
	repo, err := c.Fetch(ctx, src, sha2)
	if err != nil {
		t.Fatal(err)
	}
	total, packs2 := packBytes(t, c.Dir)
	second := total - first
	t.Logf("first fetch: %d bytes in %d pack(s); second: %d bytes in %d new pack(s)", first, packs1, second, packs2-packs1)
	if first < 256<<10 {
		t.Errorf("first fetch brought %d bytes, want at least the big blob", first)
	}
	if second <= 0 || second*50 > first {
		t.Errorf("second fetch brought %d bytes after %d: want a small pack of only the new objects", second, first)
	}
	if _, err := repo.CommitObject(plumbing.NewHash(sha1)); err != nil {
		t.Errorf("first commit gone from the cache: %v", err)
	}

	// Everything wanted is present: no fetch at all, even with a bad token.
	bad := src
	bad.Token = "not-a-token"
	if _, err := c.Fetch(ctx, bad, sha1, sha2); err != nil {
		t.Errorf("Fetch of cached commits = %v, want no network", err)
	}
	if total3, _ := packBytes(t, c.Dir); total3 != total {
		t.Errorf("cache grew from %d to %d bytes with nothing new", total, total3)
	}
}

// TestBadTokenNotLeaked: a refused token is reported as ErrUnauthorized
// without the token in the message.
func TestBadTokenNotLeaked(t *testing.T) {
	g := srv.Get(t)
	ctx := t.Context()
	m := g.API(g.Maintainer)
	repo, _, err := m.CreateRepo(sdk.CreateRepoOption{Name: "private-" + randomHex(4), Private: true, DefaultBranch: "main"})
	if err != nil {
		t.Fatal(err)
	}
	private := forge.Repo{Owner: g.Maintainer.Login, Name: repo.Name, CloneURL: repo.CloneURL}
	sha, err := g.Commit(ctx, g.Maintainer, private, "main", "", "secret", map[string]string{"a.txt": "a\n"})
	if err != nil {
		t.Fatal(err)
	}
	const token = "bad0token0value0that0must0not0leak0000001"
	src := forge.FetchSource{URL: private.CloneURL, Refs: []string{"refs/heads/main"}, Username: g.Maintainer.Login, Token: token}
	c := &fetch.Cache{Dir: t.TempDir()}
	_, err = c.Fetch(ctx, src, sha)
	if err == nil {
		t.Fatal("Fetch with a bad token succeeded")
	}
	t.Logf("bad token: %v", err)
	if strings.Contains(err.Error(), token) {
		t.Errorf("error %q contains the token", err)
	}
	if !errors.Is(err, forge.ErrUnauthorized) {
		t.Errorf("Fetch error = %v, want ErrUnauthorized", err)
	}
	src.Token = g.Maintainer.Token
	if _, err := c.Fetch(ctx, src, sha); err != nil {
		t.Errorf("Fetch with the right token = %v", err)
	}
}

// TestMissingCommit: a commit the server does not have fails clearly.
func TestMissingCommit(t *testing.T) {
	g := srv.Get(t)
	missing := strings.Repeat("ab", 20)
	c := &fetch.Cache{Dir: t.TempDir()}
	_, err := c.Fetch(t.Context(), forge.FetchSource{URL: g.Repo.CloneURL, Refs: []string{"refs/heads/main"}}, missing)
	t.Logf("missing commit: %v", err)
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("Fetch(%s) = %v, want an error naming it", missing, err)
	}
}

func TestRefusals(t *testing.T) {
	c := &fetch.Cache{Dir: t.TempDir()}
	tests := []struct {
		name string
		src  forge.FetchSource
		shas []string
		not  string // must not appear in the error
	}{
		{"credentials in URL", forge.FetchSource{URL: "https://user:hunter2token@example.invalid/o/r.git"}, nil, "hunter2token"},
		{"short SHA", forge.FetchSource{URL: "https://example.invalid/o/r.git"}, []string{"abc123"}, ""},
		{"ssh URL", forge.FetchSource{URL: "ssh://example.invalid/o/r.git"}, nil, ""},
		{"refspec injection", forge.FetchSource{URL: "https://example.invalid/o/r.git", Refs: []string{"refs/heads/a:refs/heads/b"}}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Fetch(t.Context(), tt.src, tt.shas...)
			if err == nil {
				t.Fatal("Fetch succeeded")
			}
			t.Logf("refused: %v", err)
			if tt.not != "" && strings.Contains(err.Error(), tt.not) {
				t.Errorf("error %q contains %q", err, tt.not)
			}
		})
	}
}
