package bot

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"vouch.dev/vouch/evidence"
	"vouch.dev/vouch/fixtures/pgtest"
	"vouch.dev/vouch/forge"
)

// storesUnderTest opens the same store on SQLite and on PostgreSQL.
func storesUnderTest(t *testing.T) map[string]*Store {
	t.Helper()
	pg, err := OpenPostgres(t.Context(), pgtest.Start(t), nil)
	if err != nil {
		t.Fatalf("OpenPostgres: %v", err)
	}
	t.Cleanup(func() { pg.Close() })
	return map[string]*Store{
		"sqlite":   openStore(t, filepath.Join(t.TempDir(), "vouch.db")),
		"postgres": pg,
	}
}

// TestRunsLifecycle: a run is begun once per job, its receipt persisted
// once (a second FinishRun never replaces it), then marked posted; filters
// and approvals behave the same on both databases.
func TestRunsLifecycle(t *testing.T) {
	for name, s := range storesUnderTest(t) {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			repo := forge.Repo{Owner: "Maintainer", Name: "Project"}
			r := Run{ID: 7, Forge: forge.Gitea, Repo: repoKey(repo), PR: 3, Head: headA, Base: headB}
			got, created, err := s.BeginRun(ctx, r)
			if err != nil || !created || got.State != RunRunning || got.Receipt != nil {
				t.Fatalf("BeginRun = %+v, %v, %v", got, created, err)
			}
			if _, created, err := s.BeginRun(ctx, r); err != nil || created {
				t.Fatalf("second BeginRun: created %v, %v", created, err)
			}
			ask := evidence.Receipt{Outcome: evidence.StopAndAsk, Reason: evidence.ReasonUntrustedAuthor, Base: headB, Head: headA}
			r.Receipt, r.Title, r.Log, r.Envelope = &ask, "a <b>title</b>", []byte("log"), []byte("{}")
			if err := s.FinishRun(ctx, r); err != nil {
				t.Fatal(err)
			}
			pass := evidence.Receipt{Outcome: evidence.Pass, Reason: evidence.ReasonAllStepsPassed}
			r.Receipt = &pass
			if err := s.FinishRun(ctx, r); err != nil {
				t.Fatal(err)
			}
			got, err = s.Run(ctx, 7)
			if err != nil || got.State != RunFinal || got.Receipt.Outcome != evidence.StopAndAsk || string(got.Log) != "log" || got.Title != "a <b>title</b>" {
				t.Fatalf("after two FinishRun: %+v, %v (the first receipt must stay)", got, err)
			}
			if err := s.MarkPosted(ctx, 7); err != nil {
				t.Fatal(err)
			}
			if got, _ := s.Run(ctx, 7); got.State != RunPosted || got.PostedAt.IsZero() {
				t.Errorf("after MarkPosted: %+v", got)
			}
			if _, err := s.Run(ctx, 8); !errors.Is(err, ErrNoRun) {
				t.Errorf("Run(8) = %v, want ErrNoRun", err)
			}
			for _, tt := range []struct {
				f    RunFilter
				want int
			}{
				{RunFilter{}, 1},
				{RunFilter{Repo: "MAINTAINER/project", PR: 3, Head: headA, Finished: true}, 1},
				{RunFilter{Outcome: evidence.Pass}, 0},
				{RunFilter{Reason: evidence.ReasonUntrustedAuthor}, 1},
				{RunFilter{Repo: "x' OR '1'='1"}, 0},
				{RunFilter{Forge: forge.GitHub}, 0},
			} {
				runs, err := s.Runs(ctx, tt.f, 10)
				if err != nil || len(runs) != tt.want {
					t.Errorf("Runs(%+v) = %d runs, %v; want %d", tt.f, len(runs), err, tt.want)
				}
				if len(runs) == 1 && runs[0].Log != nil {
					t.Errorf("Runs returned the log")
				}
			}

			asked, err := s.askedAt(ctx, forge.Gitea, repo, 3, headA)
			if err != nil || asked.IsZero() || time.Since(asked) > time.Minute {
				t.Errorf("askedAt(head A) = %v, %v", asked, err)
			}
			if asked, err := s.askedAt(ctx, forge.Gitea, repo, 3, headB); err != nil || !asked.IsZero() {
				t.Errorf("askedAt(head B) = %v, %v; vouch never asked about it", asked, err)
			}
			a := Approval{Forge: forge.Gitea, Repo: repo, PR: 3, HeadSHA: headA, By: "maintainer", At: time.Now()}
			if err := s.SaveApproval(ctx, a, 99); err != nil {
				t.Fatal(err)
			}
			if err := s.SaveApproval(ctx, Approval{Forge: forge.Gitea, Repo: repo, PR: 3, HeadSHA: headA[:7], By: "m"}, 1); err == nil {
				t.Error("an approval of an abbreviated head was saved")
			}
			for _, tt := range []struct {
				k    forge.Kind
				pr   int
				head string
				ok   bool
			}{
				{forge.Gitea, 3, headA, true},
				{forge.Gitea, 3, headB, false},
				{forge.Gitea, 4, headA, false},
				{forge.GitHub, 3, headA, false},
			} {
				got, ok, err := s.ApprovalFor(ctx, tt.k, forge.Repo{Owner: "maintainer", Name: "project"}, tt.pr, tt.head)
				if err != nil || ok != tt.ok || (ok && got.By != "maintainer") {
					t.Errorf("ApprovalFor(%s, %d, %s) = %+v, %v, %v; want ok %v", tt.k, tt.pr, tt.head[:7], got, ok, err, tt.ok)
				}
			}
			// vouch sees the pull request at head B: A's approval lapses and
			// does not come back when A is pushed again.
			if err := s.lapseApprovals(ctx, forge.Gitea, repo, 3, headB); err != nil {
				t.Fatal(err)
			}
			if _, ok, err := s.ApprovalFor(ctx, forge.Gitea, repo, 3, headA); ok || err != nil {
				t.Errorf("approval of A after the pull request moved to B: %v, %v", ok, err)
			}
		})
	}
}
