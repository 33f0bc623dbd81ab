package bot

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"vouch.dev/vouch/forge"
)

// fakePermissions answers Permission from a table and counts the calls; a
// login mapped to an error returns it. Everything else on forge.Client is
// unused by trust.
type fakePermissions struct {
	forge.Client
	perms map[string]forge.Permission
	errs  map[string]error
	calls int
}

func (f *fakePermissions) Permission(_ context.Context, _ forge.Repo, user string) (forge.Permission, error) {
	f.calls++
	if err := f.errs[user]; err != nil {
		return forge.PermNone, err
	}
	return f.perms[user], nil
}

func TestTrustDecide(t *testing.T) {
	repo := forge.Repo{Owner: "alice", Name: "demo"}
	unreachable := errors.New("dial tcp: connection refused")
	client := func() *fakePermissions {
		return &fakePermissions{
			perms: map[string]forge.Permission{
				"admin": forge.PermAdmin, "maint": forge.PermMaintain, "writer": forge.PermWrite,
				"triager": forge.PermTriage, "reader": forge.PermRead, "friend": forge.PermRead,
			},
			errs: map[string]error{"ghost": forge.ErrNotFound, "flaky": unreachable, "Friend2": unreachable},
		}
	}
	tests := []struct {
		name      string
		trust     Trust
		user      string
		trusted   bool
		perm      forge.Permission
		errIs     error
		wantCalls int
	}{
		{name: "admin", trust: Trust{MinPermission: forge.PermWrite}, user: "admin", trusted: true, perm: forge.PermAdmin, wantCalls: 1},
		{name: "writer at write", trust: Trust{MinPermission: forge.PermWrite}, user: "writer", trusted: true, perm: forge.PermWrite, wantCalls: 1},
		{name: "triager below write", trust: Trust{MinPermission: forge.PermWrite}, user: "triager", perm: forge.PermTriage, wantCalls: 1},
		{name: "reader", trust: Trust{MinPermission: forge.PermWrite}, user: "reader", perm: forge.PermRead, wantCalls: 1},
		{name: "writer below maintain", trust: Trust{MinPermission: forge.PermMaintain}, user: "writer", perm: forge.PermWrite, wantCalls: 1},
		{name: "triage minimum", trust: Trust{MinPermission: forge.PermTriage}, user: "triager", trusted: true, perm: forge.PermTriage, wantCalls: 1},
		{name: "zero trust means write", trust: Trust{}, user: "reader", perm: forge.PermRead, wantCalls: 1},
		{name: "zero trust trusts writers", trust: Trust{}, user: "writer", trusted: true, perm: forge.PermWrite, wantCalls: 1},
		{name: "read minimum means write", trust: Trust{MinPermission: forge.PermRead}, user: "reader", perm: forge.PermRead, wantCalls: 1},
		{name: "stranger", trust: Trust{}, user: "nobody", perm: forge.PermNone, wantCalls: 1},
		{name: "allowlisted reader", trust: Trust{Allow: []string{"friend"}}, user: "friend", trusted: true, perm: forge.PermRead, wantCalls: 1},
		{name: "allowlist ignores case", trust: Trust{Allow: []string{"FRIEND"}}, user: "Friend", trusted: true, perm: forge.PermNone, wantCalls: 1},
		{name: "allowlist exact login only", trust: Trust{Allow: []string{"friend"}}, user: "friendly", wantCalls: 1},
		{name: "empty allow entry", trust: Trust{Allow: []string{""}}, user: "nobody", wantCalls: 1},
		{name: "forge unreachable", trust: Trust{}, user: "flaky", errIs: unreachable, wantCalls: 1},
		{name: "forge unreachable for allowlisted", trust: Trust{Allow: []string{"friend2"}}, user: "Friend2", errIs: unreachable, wantCalls: 1},
		{name: "unknown user is an error", trust: Trust{}, user: "ghost", errIs: forge.ErrNotFound, wantCalls: 1},
		{name: "empty user", trust: Trust{Allow: []string{""}}, user: " ", errIs: errors.New("any"), wantCalls: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := client()
			trusted, perm, err := tt.trust.Decide(t.Context(), c, repo, tt.user)
			if tt.errIs != nil {
				if err == nil || trusted {
					t.Fatalf("Decide(%q) = %v, %v, %v; want an error and untrusted", tt.user, trusted, perm, err)
				}
				if tt.errIs.Error() != "any" && !errors.Is(err, tt.errIs) {
					t.Fatalf("Decide(%q) error = %v, want %v", tt.user, err, tt.errIs)
				}
			} else if err != nil || trusted != tt.trusted || perm != tt.perm {
				t.Errorf("Decide(%q) = %v, %v, %v; want %v, %v, nil", tt.user, trusted, perm, err, tt.trusted, tt.perm)
			}
			if c.calls != tt.wantCalls {
				t.Errorf("Decide(%q) asked the forge %d times, want %d", tt.user, c.calls, tt.wantCalls)
			}
		})
	}
}

// TestTrustReadsPermissionEachTime: a permission revoked between two events
// is seen at the second one (nothing is cached).
func TestTrustReadsPermissionEachTime(t *testing.T) {
	repo := forge.Repo{Owner: "alice", Name: "demo"}
	c := &fakePermissions{perms: map[string]forge.Permission{"bob": forge.PermWrite}}
	if ok, _, err := (Trust{}).Decide(t.Context(), c, repo, "bob"); !ok || err != nil {
		t.Fatalf("Decide(bob) = %v, %v before revocation", ok, err)
	}
	c.perms["bob"] = forge.PermRead
	if ok, _, err := (Trust{}).Decide(t.Context(), c, repo, "bob"); ok || err != nil {
		t.Fatalf("Decide(bob) = %v, %v after revocation, want untrusted", ok, err)
	}
}

func TestApprovalCovers(t *testing.T) {
	head := "0123456789abcdef0123456789abcdef01234567"
	other := "1123456789abcdef0123456789abcdef01234567"
	a := Approval{Forge: forge.Gitea, Repo: forge.Repo{Owner: "alice", Name: "demo"}, PR: 7, HeadSHA: head, By: "alice", At: time.Unix(1700000000, 0)}
	tests := []struct {
		name string
		a    Approval
		head string
		want bool
	}{
		{"same head", a, head, true},
		{"next push", a, other, false},
		{"abbreviated head", a, head[:12], false},
		{"abbreviated approval", with(a, func(a *Approval) { a.HeadSHA = head[:12] }), head[:12], false},
		{"prefix", a, head + "00", false},
		{"uppercase head", a, strings.ToUpper(head), false},
		{"branch name", with(a, func(a *Approval) { a.HeadSHA = "main" }), "main", false},
		{"empty both", with(a, func(a *Approval) { a.HeadSHA = "" }), "", false},
		{"empty head", a, "", false},
		{"sha-256 id", with(a, func(a *Approval) { a.HeadSHA = head + head[:24] }), head + head[:24], false},
		{"no approver", with(a, func(a *Approval) { a.By = "" }), head, false},
		{"zero approval", Approval{}, head, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ApprovalCovers(tt.a, tt.head); got != tt.want {
				t.Errorf("ApprovalCovers(%q, %q) = %v, want %v", tt.a.HeadSHA, tt.head, got, tt.want)
			}
		})
	}
}

func with(a Approval, f func(*Approval)) Approval {
	f(&a)
	return a
}
