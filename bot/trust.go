package bot

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"vouch.dev/vouch/forge"
)

// Trust decides whose pull requests and commands run without a maintainer's
// approval: a user is trusted when their permission on the repository, read
// from the forge when the event is handled, is at least MinPermission, or
// when their login is on Allow.
type Trust struct {
	// MinPermission is the least trusted permission. Anything below
	// forge.PermTriage, the zero value included, means forge.PermWrite: a
	// zero Trust never trusts readers of a public repository.
	MinPermission forge.Permission
	// Allow are logins trusted whatever their permission, compared without
	// regard to case as forges compare logins.
	Allow []string
}

// PermissionReader is the part of forge.Client trust needs.
type PermissionReader interface {
	Permission(ctx context.Context, repo forge.Repo, user string) (forge.Permission, error)
}

var _ PermissionReader = forge.Client(nil)

// Decide reads user's permission on repo from the forge now and says whether
// user is trusted. A forge error is returned as an error with trusted false:
// trust is never assumed because the forge could not be asked.
func (t Trust) Decide(ctx context.Context, client PermissionReader, repo forge.Repo, user string) (trusted bool, perm forge.Permission, err error) {
	if strings.TrimSpace(user) == "" {
		return false, forge.PermNone, errors.New("trust: empty user")
	}
	perm, err = client.Permission(ctx, repo, user)
	if err != nil {
		return false, forge.PermNone, fmt.Errorf("trust: permission of %s on %s: %w", user, repo.FullName(), err)
	}
	return perm >= t.min() || t.allowed(user), perm, nil
}

func (t Trust) min() forge.Permission {
	if t.MinPermission < forge.PermTriage {
		return forge.PermWrite
	}
	return t.MinPermission
}

func (t Trust) allowed(user string) bool {
	for _, a := range t.Allow {
		if a != "" && strings.EqualFold(a, user) {
			return true
		}
	}
	return false
}

// Approval records that a trusted user let one head of a pull request run.
// It is bound to that exact commit: a push makes it lapse.
type Approval struct {
	Forge   forge.Kind
	Repo    forge.Repo
	PR      int
	HeadSHA string
	By      string
	At      time.Time
}

// ApprovalCovers reports whether a lets head run: both are the same full
// 40-hex lowercase commit id. Abbreviations, branch names, empty values and
// anything else never match.
func ApprovalCovers(a Approval, head string) bool {
	return isSHA1Hex(a.HeadSHA) && a.HeadSHA == head && a.By != ""
}

// isSHA1Hex reports whether s is a full, lowercase, 40-hex commit id.
func isSHA1Hex(s string) bool {
	if len(s) != 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
