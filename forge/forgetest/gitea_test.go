package forgetest

import (
	"net/http"
	"strings"
	"testing"

	sdk "code.gitea.io/sdk/gitea"
)

// TestStartGitea: the harness's own server answers, its users' tokens
// work, and the repository, its fork and the bot's access are in place.
func TestStartGitea(t *testing.T) {
	g := StartGitea(t)
	resp, err := http.Get(g.URL + "/api/v1/version")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/v1/version = %s", resp.Status)
	}
	if v, _, err := g.API(g.Maintainer).ServerVersion(); err != nil || v != Version {
		t.Errorf("ServerVersion = %q, %v; want %s", v, err, Version)
	}
	for _, u := range []User{g.Maintainer, g.Outsider, g.Bot} {
		me, _, err := g.API(u).GetMyUserInfo()
		if err != nil || me.UserName != u.Login {
			t.Errorf("GetMyUserInfo with %s's token = %v, %v", u.Login, me, err)
		}
	}
	if me, _, _ := g.API(g.Maintainer).GetMyUserInfo(); me == nil || !me.IsAdmin {
		t.Errorf("maintainer is not a site admin: %+v", me)
	}

	f, _, err := g.API(g.Outsider).GetFile(g.Repo.Owner, g.Repo.Name, "main", ".vouch.yml")
	if err != nil || !strings.HasPrefix(string(f), "version: 1") {
		t.Errorf("%s main:.vouch.yml = %q, %v", g.Repo.FullName(), f, err)
	}
	fork, _, err := g.API(g.Outsider).GetRepo(g.Fork.Owner, g.Fork.Name)
	if err != nil || !fork.Fork || fork.Parent == nil || fork.Parent.FullName != g.Repo.FullName() {
		t.Errorf("fork %s = %+v, %v; want a fork of %s", g.Fork.FullName(), fork, err, g.Repo.FullName())
	}
	perm, _, err := g.API(g.Maintainer).CollaboratorPermission(g.Repo.Owner, g.Repo.Name, g.Bot.Login)
	if err != nil || perm.Permission != sdk.AccessModeAdmin {
		t.Errorf("bot's permission = %+v, %v; want admin", perm, err)
	}
	if strings.Contains(g.Repo.CloneURL, "@") || !strings.HasPrefix(g.Repo.CloneURL, g.URL+"/") {
		t.Errorf("clone URL %q: want the server's, without credentials", g.Repo.CloneURL)
	}
	t.Run("git keeps the token out of errors", func(t *testing.T) { testGitKeepsTokenOut(t, g) })
}

// testGitKeepsTokenOut: a failed git command's error does not echo the
// token it authenticated with.
func testGitKeepsTokenOut(t *testing.T, g *Gitea) {
	u := g.Outsider
	u.Token = "f00dfeedf00dfeedf00dfeedf00dfeedf00dfeed"
	dir := t.TempDir()
	if _, err := g.Git(t.Context(), u, dir, "init", "-q"); err != nil {
		t.Fatal(err)
	}
	_, err := g.Git(t.Context(), u, dir, "fetch", g.URL+"/"+g.Maintainer.Login+"/does-not-exist.git")
	if err == nil {
		t.Fatal("fetch of a missing repository with a bad token succeeded")
	}
	if strings.Contains(err.Error(), u.Token) {
		t.Errorf("error %q contains the token", err)
	}
}
