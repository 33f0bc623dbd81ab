package bot

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"vouch.dev/vouch/evidence"
)

// takeBackOrphans makes the jobs a dead process left "running" available
// again. Only the SQLite store does it at start: its lock file proves no
// other process is working them. On PostgreSQL, replicas share the queue
// and River's rescuer takes over a job once it has been running longer
// than the job timeout allows.
func (s *Store) takeBackOrphans(ctx context.Context) error {
	if s.dialect.name != sqliteDialect.name {
		return nil
	}
	res, err := s.db.ExecContext(ctx, `UPDATE river_job SET state = 'available' WHERE state = 'running'`)
	if err != nil {
		return fmt.Errorf("take back interrupted jobs: %w", err)
	}
	if n, _ := res.RowsAffected(); n > 0 {
		s.logger.Warn("taking back jobs interrupted by a previous process", "jobs", n)
	}
	return nil
}

// QueueDepth counts the jobs not yet finished.
func (s *Store) QueueDepth(ctx context.Context) (int, error) {
	var n int
	err := s.read.QueryRowContext(ctx,
		`SELECT count(*) FROM river_job WHERE state IN ('available', 'scheduled', 'retryable', 'running', 'pending')`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("queue depth: %w", err)
	}
	return n, nil
}

// rescanEvery is how often the served repositories' open pull requests are
// checked for heads that no webhook brought.
const rescanEvery = 10 * time.Minute

// recover queues, for every served repository, each open pull request head
// that has no verdict and no job (a webhook missed while vouch was down or
// the forge failed to deliver), at start and then every rescanEvery. Jobs
// are unique per head, so a head already queued, running or done is not
// queued again.
func (s *Service) recover(ctx context.Context) {
	for {
		s.scanOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(rescanEvery):
		}
	}
}

func (s *Service) scanOnce(ctx context.Context) {
	for _, ref := range s.cfg.Repositories {
		client := s.deps.Forges[ref.Forge]
		if client == nil {
			continue
		}
		repo := ref.Repo()
		log := s.logger.With("forge", ref.Forge, "repo", repo.FullName())
		prs, err := client.OpenPullRequests(ctx, repo)
		if err != nil {
			log.Warn("recovery scan: cannot list open pull requests", "err", err)
			continue
		}
		for _, pr := range prs {
			runs, err := s.store.Runs(ctx, RunFilter{Forge: ref.Forge, Repo: repoKey(repo), PR: pr.Number, Head: pr.HeadSHA, Finished: true}, 20)
			if err != nil {
				log.Warn("recovery scan", "err", err)
				return
			}
			// A verdict stands; a SUPERSEDED run of the head that is current
			// again (closed and reopened, pushed back) is no verdict, so the
			// head is queued again, once per such run.
			trigger, verdict := "", false
			for _, r := range runs {
				if r.Receipt != nil && r.Receipt.Reason != evidence.ReasonSuperseded {
					verdict = true
				}
			}
			if verdict {
				continue
			}
			if len(runs) > 0 {
				trigger = "rescan:" + strconv.FormatInt(runs[0].ID, 10)
			}
			fresh, err := s.store.EnqueueVerify(ctx, verifyArgs{Forge: string(ref.Forge), Repo: repoKey(repo), PR: pr.Number,
				HeadSHA: pr.HeadSHA, BaseSHA: pr.BaseSHA, Trigger: trigger, Delivery: "recovery-scan"})
			if err != nil {
				log.Warn("recovery scan: enqueue", "pr", pr.Number, "err", err)
				continue
			}
			if fresh {
				log.Info("recovery scan queued a head no webhook brought", "pr", pr.Number, "head", pr.HeadSHA)
			}
		}
	}
}
