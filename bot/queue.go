package bot

import (
	"context"
	"fmt"
	"strings"
	"time"

	"vouch.dev/vouch/forge"
)

// JobKind says what a queued job does.
type JobKind string

// The job kinds.
const (
	// JobVerify verifies one head of a pull request. At most one exists per
	// (forge, repository, pull request, head SHA), whatever its state.
	JobVerify JobKind = "verify"
	// JobCommand carries the commands of one pull request comment, to be
	// judged (trust, approval) by a worker; one per delivery.
	JobCommand JobKind = "command"
)

// Job is one unit of work the intake queues. The worker re-reads the pull
// request from the forge; a job only says what to look at.
type Job struct {
	Kind  JobKind
	Forge forge.Kind
	Repo  forge.Repo // Owner and Name only
	PR    int
	// HeadSHA is the head the event named (always set for JobVerify; a
	// GitHub comment carries none).
	HeadSHA string
	// BaseSHA is the base the event named, when it named one: a new base
	// (a retargeted or reopened pull request) is a new verification.
	BaseSHA string
	// Delivery is the forge delivery that caused the job.
	Delivery string
	// For JobCommand: the comment, its author and the commands in it.
	CommentID int64
	CommentAt time.Time
	Author    string
	Commands  []Command
}

// Queue is the durable queue the intake writes to.
type Queue interface {
	// Enqueue records job.Delivery as seen and queues job, atomically. It
	// returns false, and queues nothing, when the delivery was seen before or
	// an equal job (for JobVerify: the same forge, repository, pull request
	// and head) already exists. When it returns without error the job
	// survives a crash.
	Enqueue(ctx context.Context, job Job) (bool, error)
}

// validate checks a job before it is written.
func (j Job) validate() error {
	switch {
	case j.Forge != forge.Gitea && j.Forge != forge.GitHub:
		return fmt.Errorf("job: forge %q", j.Forge)
	case j.Repo.Owner == "" || j.Repo.Name == "" || strings.Contains(j.Repo.Owner, "/"):
		return fmt.Errorf("job: repository %q", j.Repo.FullName())
	case j.PR <= 0:
		return fmt.Errorf("job: pull request %d", j.PR)
	case j.Delivery == "":
		return fmt.Errorf("job: no delivery id")
	}
	switch j.Kind {
	case JobVerify:
		if !isSHA1Hex(j.HeadSHA) && !isObjectID(j.HeadSHA) {
			return fmt.Errorf("job: head %q is not a full commit id", j.HeadSHA)
		}
	case JobCommand:
		if len(j.Commands) == 0 || j.Author == "" {
			return fmt.Errorf("job: command job without commands or author")
		}
	default:
		return fmt.Errorf("job: kind %q", j.Kind)
	}
	return nil
}

// isObjectID reports whether s is a full lowercase SHA-256 object id.
func isObjectID(s string) bool {
	if len(s) != 64 {
		return false
	}
	return isSHA1Hex(s[:40]) && isSHA1Hex(s[24:])
}
