package github

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	gh "github.com/google/go-github/v66/github"

	"vouch.dev/vouch/forge"
)

// Permission is user's access to repo (GET
// /repos/{o}/{r}/collaborators/{u}/permission): role_name when it is one of
// GitHub's base roles (admin, maintain, write, triage, read), else the
// legacy permission field (admin, write, read, none). A 404 (no such user,
// or not a collaborator) is forge.PermNone without error.
func (c *Client) Permission(ctx context.Context, repo forge.Repo, user string) (forge.Permission, error) {
	if user == "" {
		return forge.PermNone, errors.New("github: permission: empty user")
	}
	var lvl *gh.RepositoryPermissionLevel
	err := c.call(ctx, fmt.Sprintf("permission of %s on %s", user, repo.FullName()), func(ctx context.Context) (err error) {
		lvl, _, err = c.gh.Repositories.GetPermissionLevel(ctx, repo.Owner, repo.Name, user)
		return err
	})
	if errors.Is(err, forge.ErrNotFound) {
		return forge.PermNone, nil
	}
	if err != nil {
		return forge.PermNone, err
	}
	if p, err := forge.ParsePermission(lvl.GetRoleName()); err == nil {
		return p, nil
	}
	p, err := forge.ParsePermission(lvl.GetPermission())
	if err != nil {
		return forge.PermNone, fmt.Errorf("github: permission of %s on %s: %w", user, repo.FullName(), err)
	}
	return p, nil
}

// StatusContext is the commit status context used when Status names none.
const StatusContext = "vouch/verify"

// SetStatus sets a commit status (POST /repos/{o}/{r}/statuses/{sha}), the
// description capped at forge.MaxStatusDescription characters.
func (c *Client) SetStatus(ctx context.Context, repo forge.Repo, sha string, st forge.Status) error {
	switch st.State {
	case forge.StatusPending, forge.StatusSuccess, forge.StatusFailure, forge.StatusError:
	default:
		return fmt.Errorf("github: set status on %s: unknown state %q", sha, st.State)
	}
	if !isSHA(sha) {
		return fmt.Errorf("github: set status: %q is not a 40-hex commit id", sha)
	}
	rs := &gh.RepoStatus{
		State:       gh.String(string(st.State)),
		Context:     gh.String(st.Context),
		Description: gh.String(capDescription(st.Description)),
	}
	if st.Context == "" {
		rs.Context = gh.String(StatusContext)
	}
	if st.TargetURL != "" {
		rs.TargetURL = gh.String(st.TargetURL)
	}
	return c.call(ctx, fmt.Sprintf("set status on %s@%s", repo.FullName(), sha), func(ctx context.Context) error {
		_, _, err := c.gh.Repositories.CreateStatus(ctx, repo.Owner, repo.Name, sha, rs)
		return err
	})
}

// capDescription keeps a status description within
// forge.MaxStatusDescription characters, ending a cut one with "…".
func capDescription(s string) string {
	if utf8.RuneCountInString(s) <= forge.MaxStatusDescription {
		return s
	}
	i := 0
	for off := range s {
		if i == forge.MaxStatusDescription-1 {
			return s[:off] + "…"
		}
		i++
	}
	return s
}
