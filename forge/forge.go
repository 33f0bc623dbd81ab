// Package forge is what vouch needs from a code forge, in forge-neutral
// terms: verified webhook events, pull requests, permissions, comments,
// commit statuses and the credentials to fetch exact commits. Implementations
// live beside it: forge/gitea (Gitea and Forgejo) and forge/github.
package forge

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Kind names a forge implementation.
type Kind string

// The supported forges.
const (
	Gitea  Kind = "gitea" // Gitea and Forgejo
	GitHub Kind = "github"
)

// Repo identifies a repository on a forge.
type Repo struct {
	Owner string `json:"owner"`
	Name  string `json:"name"`
	// CloneURL is the HTTPS clone URL, without credentials.
	CloneURL string `json:"clone_url,omitempty"`
}

// FullName is "owner/name".
func (r Repo) FullName() string { return r.Owner + "/" + r.Name }

// EventType is the kind of a neutral webhook event.
type EventType string

// The events vouch acts on.
const (
	EventPullRequest EventType = "pull_request"
	EventComment     EventType = "comment" // a new comment on a pull request
)

// Action is what happened to a pull request.
type Action string

// Pull request actions, normalised across forges (GitHub's "synchronize" and
// Gitea's "synchronized" are both ActionSynchronized).
const (
	ActionOpened       Action = "opened"
	ActionReopened     Action = "reopened"
	ActionSynchronized Action = "synchronized"
	ActionClosed       Action = "closed" // merges arrive as closed with Merged set
)

// Event is one verified, actionable webhook delivery.
type Event struct {
	Forge    Kind
	Delivery string // the forge's delivery id, for deduplication
	Type     EventType
	Action   Action // for EventPullRequest
	Repo     Repo   // the base repository
	Number   int    // the pull request number
	// BaseSHA and HeadSHA are the commits the event names (pull request
	// events); comment events on GitHub carry none and leave them empty.
	BaseSHA, HeadSHA string
	BaseRef          string
	HeadRepo         Repo   // the head repository (a fork or Repo itself)
	Author           string // the pull request's author
	Sender           string // who caused the event
	Merged           bool
	Comment          *Comment // for EventComment
}

// Comment is a comment on a pull request.
type Comment struct {
	ID     int64
	Author string
	Body   string
	// CreatedAt is when the forge says the comment was written (zero when
	// it did not say).
	CreatedAt time.Time
}

// PullRequest is the forge's current view of a pull request.
type PullRequest struct {
	Repo     Repo
	Number   int
	Title    string
	Author   string
	Open     bool
	Merged   bool
	BaseRef  string
	BaseSHA  string
	HeadSHA  string
	HeadRepo Repo
	// Fork is true when HeadRepo differs from Repo.
	Fork bool
}

// Permission is a user's access to a repository, ordered.
type Permission int

// Permission levels, lowest first.
const (
	PermNone Permission = iota
	PermRead
	PermTriage
	PermWrite
	PermMaintain
	PermAdmin
)

var permNames = [...]string{"none", "read", "triage", "write", "maintain", "admin"}

func (p Permission) String() string {
	if p < 0 || int(p) >= len(permNames) {
		return fmt.Sprintf("Permission(%d)", int(p))
	}
	return permNames[p]
}

// ParsePermission reads a permission name as forges and configs spell it.
func ParsePermission(s string) (Permission, error) {
	for i, n := range permNames {
		if n == s {
			return Permission(i), nil
		}
	}
	if s == "owner" {
		return PermAdmin, nil
	}
	return PermNone, fmt.Errorf("unknown permission %q", s)
}

// StatusState is a commit status state.
type StatusState string

// Commit status states as the contract uses them.
const (
	StatusPending StatusState = "pending"
	StatusSuccess StatusState = "success"
	StatusFailure StatusState = "failure"
	StatusError   StatusState = "error"
)

// Status is one commit status.
type Status struct {
	State       StatusState
	Context     string // "vouch/verify"
	Description string // at most MaxStatusDescription characters
	TargetURL   string
}

// Limits the forges impose on what vouch posts.
const (
	MaxCommentBody       = 65536
	MaxStatusDescription = 140
	MaxWebhookBody       = 25 << 20
)

// FetchSource says where to fetch a pull request's commits from, with the
// credentials to use. Credentials go only into the fetch's auth, never into
// URLs, logs or receipts.
type FetchSource struct {
	// URL is the clone URL of the repository holding the commits.
	URL string
	// Refs are refspec sources worth fetching (e.g. "refs/pull/7/head").
	Refs []string
	// Username and Token authenticate over HTTPS; both empty for anonymous.
	Username, Token string
}

// Client is what vouch calls on a forge. Implementations map failures to
// ErrNotFound, ErrUnauthorized and *RateLimitError where they apply.
type Client interface {
	// PullRequest reads a pull request's current state.
	PullRequest(ctx context.Context, repo Repo, number int) (*PullRequest, error)
	// OpenPullRequests lists a repository's open pull requests.
	OpenPullRequests(ctx context.Context, repo Repo) ([]PullRequest, error)
	// Permission is user's access to repo now.
	Permission(ctx context.Context, repo Repo, user string) (Permission, error)
	// CreateComment posts a comment on a pull request; the body is capped
	// at MaxCommentBody.
	CreateComment(ctx context.Context, repo Repo, number int, body string) (Comment, error)
	// EditComment replaces a comment's body.
	EditComment(ctx context.Context, repo Repo, id int64, body string) error
	// BotComments lists the comments the authenticated user made on a pull
	// request, oldest first.
	BotComments(ctx context.Context, repo Repo, number int) ([]Comment, error)
	// SetStatus sets a commit status on sha.
	SetStatus(ctx context.Context, repo Repo, sha string, st Status) error
	// FetchSource says where the pull request's commits can be fetched.
	FetchSource(ctx context.Context, pr *PullRequest) (FetchSource, error)
}

// Errors callers branch on.
var (
	// ErrNotFound: the repository, pull request, user or comment does not exist.
	ErrNotFound = errors.New("forge: not found")
	// ErrUnauthorized: the credentials were refused.
	ErrUnauthorized = errors.New("forge: unauthorized")
)

// RateLimitError says the forge asked vouch to wait until RetryAt.
type RateLimitError struct {
	RetryAt time.Time
	Err     error
}

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("forge: rate limited until %s: %v", e.RetryAt.Format(time.RFC3339), e.Err)
}

func (e *RateLimitError) Unwrap() error { return e.Err }
