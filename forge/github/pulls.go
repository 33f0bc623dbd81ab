package github

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	gh "github.com/google/go-github/v66/github"

	"vouch.dev/vouch/forge"
)

// PullRequest reads a pull request (GET /repos/{o}/{r}/pulls/{n}).
func (c *Client) PullRequest(ctx context.Context, repo forge.Repo, number int) (*forge.PullRequest, error) {
	var p *gh.PullRequest
	err := c.call(ctx, fmt.Sprintf("get pull request %s#%d", repo.FullName(), number), func(ctx context.Context) (err error) {
		p, _, err = c.gh.PullRequests.Get(ctx, repo.Owner, repo.Name, number)
		return err
	})
	if err != nil {
		return nil, err
	}
	pr, err := pullOf(p, repo)
	if err != nil {
		return nil, fmt.Errorf("github: get pull request %s#%d: %w", repo.FullName(), number, err)
	}
	return &pr, nil
}

// OpenPullRequests lists the open pull requests, every page.
func (c *Client) OpenPullRequests(ctx context.Context, repo forge.Repo) ([]forge.PullRequest, error) {
	opts := &gh.PullRequestListOptions{State: "open", ListOptions: gh.ListOptions{PerPage: perPage}}
	var out []forge.PullRequest
	for page := 0; page < maxPages; page++ {
		var ps []*gh.PullRequest
		var resp *gh.Response
		err := c.call(ctx, fmt.Sprintf("list open pull requests of %s", repo.FullName()), func(ctx context.Context) (err error) {
			ps, resp, err = c.gh.PullRequests.List(ctx, repo.Owner, repo.Name, opts)
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			pr, err := pullOf(p, repo)
			if err != nil {
				return nil, fmt.Errorf("github: list open pull requests of %s: %w", repo.FullName(), err)
			}
			out = append(out, pr)
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
	return nil, fmt.Errorf("github: list open pull requests of %s: more than %d pages", repo.FullName(), maxPages)
}

// pullOf converts a go-github pull request; want is the repository asked
// about, used when the response names none.
func pullOf(p *gh.PullRequest, want forge.Repo) (forge.PullRequest, error) {
	if p == nil || p.Base == nil || p.Head == nil {
		return forge.PullRequest{}, errors.New("response has no base/head")
	}
	repo := repoOf(p.Base.Repo)
	if repo.Owner == "" || repo.Name == "" {
		repo = want
	}
	head := repoOf(p.Head.Repo) // zero when the fork was deleted
	return forge.PullRequest{
		Repo:     repo,
		Number:   p.GetNumber(),
		Title:    p.GetTitle(),
		Author:   p.GetUser().GetLogin(),
		Open:     p.GetState() == "open",
		Merged:   p.GetMerged() || p.MergedAt != nil, // list responses carry only merged_at
		BaseRef:  p.Base.GetRef(),
		BaseSHA:  p.Base.GetSHA(),
		HeadSHA:  p.Head.GetSHA(),
		HeadRepo: head,
		Fork:     !strings.EqualFold(head.FullName(), repo.FullName()),
	}, nil
}

// FetchSource names the base repository's clone URL, refs/pull/N/head
// (which GitHub serves for fork and same-repository pull requests alike)
// and the base branch, so the head, the base and their merge-base are all
// reachable from what it names. The token goes in Token, for the fetch's
// auth, never in the URL.
func (c *Client) FetchSource(ctx context.Context, pr *forge.PullRequest) (forge.FetchSource, error) {
	if pr == nil || pr.Number <= 0 {
		return forge.FetchSource{}, errors.New("github: fetch source: no pull request")
	}
	clone, baseRef := pr.Repo.CloneURL, pr.BaseRef
	if clone == "" {
		cur, err := c.PullRequest(ctx, pr.Repo, pr.Number)
		if err != nil {
			return forge.FetchSource{}, err // "github: get pull request ...: ..."
		}
		clone = cur.Repo.CloneURL
		if baseRef == "" {
			baseRef = cur.BaseRef
		}
	}
	u, err := url.Parse(clone)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return forge.FetchSource{}, fmt.Errorf("github: fetch source %s#%d: clone url is not http(s)", pr.Repo.FullName(), pr.Number)
	}
	u.User = nil // never carry credentials in a URL
	// The token goes only to the configured git origin: a clone URL from a
	// payload or an answer naming another host would carry it there.
	if !strings.EqualFold(u.Scheme+"://"+u.Host, c.gitOrigin) {
		return forge.FetchSource{}, fmt.Errorf("github: fetch source %s#%d: clone url host %q is not the configured git origin %q", pr.Repo.FullName(), pr.Number, u.Host, c.gitOrigin)
	}
	tok, err := c.tokens.Token(ctx)
	if err != nil {
		return forge.FetchSource{}, fmt.Errorf("github: fetch source %s#%d: %w", pr.Repo.FullName(), pr.Number, mapError(err, c.clock.Now()))
	}
	refs := []string{fmt.Sprintf("refs/pull/%d/head", pr.Number)}
	if plainBranch(baseRef) {
		refs = append(refs, "refs/heads/"+baseRef)
	}
	return forge.FetchSource{URL: u.String(), Refs: refs, Username: "x-access-token", Token: tok}, nil
}

// plainBranch reports whether name can be fetched as refs/heads/<name>
// without being read as more than a ref (no refspec syntax).
func plainBranch(name string) bool {
	return name != "" && !strings.HasPrefix(name, "refs/") && !strings.HasPrefix(name, "-") &&
		!strings.ContainsAny(name, ":*^~?[ \\\x00") && !strings.Contains(name, "..")
}
