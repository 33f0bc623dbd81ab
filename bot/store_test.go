package bot

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"vouch.dev/vouch/forge"
)

const (
	headA = "069e29b24db14ea8b6316936a890f01498c0c8bd"
	headB = "ca206e897baa32b54eb2eb652510868d64ec3c5f"
)

// openStore opens a SQLite store in a fresh directory and closes it at the
// end of the test.
func openStore(tb testing.TB, path string) *Store {
	tb.Helper()
	s, err := OpenSQLite(tb.Context(), path, nil)
	if err != nil {
		tb.Fatalf("OpenSQLite(%s): %v", path, err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

func verifyJob(delivery, head string, pr int) Job {
	return Job{Kind: JobVerify, Forge: forge.Gitea, Repo: forge.Repo{Owner: "maintainer", Name: "project"}, PR: pr, HeadSHA: head, Delivery: delivery}
}

func TestStoreDedupe(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "data", "vouch.db"))
	ctx := t.Context()
	steps := []struct {
		name string
		job  Job
		want bool
	}{
		{"first delivery", verifyJob("d1", headA, 1), true},
		{"replayed delivery", verifyJob("d1", headA, 1), false},
		{"replayed delivery id, other head", verifyJob("d1", headB, 1), false},
		{"same head, new delivery (reopened)", verifyJob("d2", headA, 1), false},
		{"new head", verifyJob("d3", headB, 1), true},
		{"same head, other pull request", verifyJob("d4", headB, 2), true},
		{"same delivery id on the other forge", func() Job { j := verifyJob("d1", headA, 3); j.Forge = forge.GitHub; return j }(), true},
		{"command", Job{Kind: JobCommand, Forge: forge.Gitea, Repo: forge.Repo{Owner: "maintainer", Name: "project"}, PR: 1, Delivery: "c1",
			CommentID: 9, Author: "maintainer", Commands: []Command{{Kind: CommandApprove}, {Kind: CommandUnknown, Arg: "x"}}}, true},
		{"command replayed", Job{Kind: JobCommand, Forge: forge.Gitea, Repo: forge.Repo{Owner: "maintainer", Name: "project"}, PR: 1, Delivery: "c1",
			CommentID: 9, Author: "maintainer", Commands: []Command{{Kind: CommandApprove}}}, false},
	}
	for _, st := range steps {
		got, err := s.Enqueue(ctx, st.job)
		if err != nil || got != st.want {
			t.Errorf("%s: Enqueue = %v, %v; want %v, nil", st.name, got, err, st.want)
		}
	}
	jobs, err := s.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 5 {
		t.Fatalf("Jobs() = %d jobs, want 5: %+v", len(jobs), jobs)
	}
	if diff := cmp.Diff(steps[7].job, jobs[4]); diff != "" {
		t.Errorf("command job round trip (-want +got):\n%s", diff)
	}
}

func TestStoreRejectsBadJobs(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "vouch.db"))
	for name, j := range map[string]Job{
		"short head":   verifyJob("d", "069e29b", 1),
		"no delivery":  verifyJob("", headA, 1),
		"no pr":        verifyJob("d", headA, 0),
		"bad kind":     func() Job { j := verifyJob("d", headA, 1); j.Kind = "run"; return j }(),
		"bad forge":    func() Job { j := verifyJob("d", headA, 1); j.Forge = "gitlab"; return j }(),
		"empty cmd":    {Kind: JobCommand, Forge: forge.Gitea, Repo: forge.Repo{Owner: "o", Name: "n"}, PR: 1, Delivery: "d", Author: "a"},
		"no repo name": func() Job { j := verifyJob("d", headA, 1); j.Repo.Name = ""; return j }(),
	} {
		if ok, err := s.Enqueue(t.Context(), j); err == nil || ok {
			t.Errorf("Enqueue(%s) = %v, %v; want an error", name, ok, err)
		}
	}
	if jobs, _ := s.Jobs(t.Context()); len(jobs) != 0 {
		t.Errorf("bad jobs were queued: %+v", jobs)
	}
	// A refused job does not consume its delivery id.
	if ok, err := s.Enqueue(t.Context(), verifyJob("d", headA, 1)); !ok || err != nil {
		t.Errorf("Enqueue(good job after refusals) = %v, %v", ok, err)
	}
}

// TestStoreDurable: a queued job is in the file after the store is closed
// and opened again (as after a restart), and so is its delivery.
func TestStoreDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vouch.db")
	s, err := OpenSQLite(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Enqueue(t.Context(), verifyJob("d1", headA, 1)); !ok || err != nil {
		t.Fatalf("Enqueue = %v, %v", ok, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, path) // migrations run again: must be a no-op
	jobs, err := s.Jobs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Job{verifyJob("d1", headA, 1)}, jobs); diff != "" {
		t.Errorf("Jobs() after reopening (-want +got):\n%s", diff)
	}
	if ok, err := s.Enqueue(t.Context(), verifyJob("d1", headA, 1)); ok || err != nil {
		t.Errorf("replay after reopening: Enqueue = %v, %v; want false", ok, err)
	}
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping() = %v", err)
	}
}

// TestStoreConcurrentReplays: the same delivery posted from many goroutines
// at once queues one job, and nothing fails with SQLITE_BUSY.
func TestStoreConcurrentReplays(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "vouch.db"))
	var wg sync.WaitGroup
	var mu sync.Mutex
	fresh := 0
	for i := range 32 {
		wg.Go(func() {
			head := headA
			if i%2 == 1 {
				head = headB
			}
			ok, err := s.Enqueue(t.Context(), verifyJob("same", head, 1))
			if err != nil {
				t.Errorf("Enqueue: %v", err)
			}
			if ok {
				mu.Lock()
				fresh++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if fresh != 1 {
		t.Errorf("%d goroutines queued the same delivery, want 1", fresh)
	}
	if jobs, _ := s.Jobs(t.Context()); len(jobs) != 1 {
		t.Errorf("Jobs() = %d, want 1", len(jobs))
	}
}
