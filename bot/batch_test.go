package bot

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"vouch.dev/vouch/fixtures/pgtest"
	"vouch.dev/vouch/forge"
)

// testHead is a distinct full commit id for each i.
func testHead(i int) string {
	sum := sha1.Sum(fmt.Appendf(nil, "head %d", i))
	return hex.EncodeToString(sum[:])
}

// commandJob is a command job for comment id.
func commandJob(delivery string, comment int64) Job {
	return Job{Kind: JobCommand, Forge: forge.Gitea, Repo: forge.Repo{Owner: "maintainer", Name: "project"}, PR: 1, Delivery: delivery,
		CommentID: comment, Author: "maintainer", Commands: []Command{{Kind: CommandApprove}}}
}

// TestBatchConcurrentEnqueue: many deliveries at once on SQLite, each sent
// twice, and each job carried by a second delivery too: every job is
// queued once, by one of the three calls.
func TestBatchConcurrentEnqueue(t *testing.T) {
	s, log := openLoggedStore(t)
	testConcurrentEnqueue(t, s, log)
}

// TestBatchConcurrentEnqueuePostgres is TestBatchConcurrentEnqueue on
// PostgreSQL.
func TestBatchConcurrentEnqueuePostgres(t *testing.T) {
	dsn := pgtest.Start(t) // fails under CI=true when PostgreSQL is missing
	log := &syncBuffer{}
	s, err := OpenPostgres(t.Context(), dsn, slog.New(slog.NewTextHandler(log, nil)))
	if err != nil {
		t.Fatalf("OpenPostgres: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	testConcurrentEnqueue(t, s, log)
}

func testConcurrentEnqueue(t *testing.T, s *Store, log *syncBuffer) {
	const n = 400
	var fresh [n][3]bool
	var wg sync.WaitGroup
	for i := range n {
		// d<i> twice (a replay), e<i> with the same job (a duplicate).
		for k, delivery := range []string{fmt.Sprintf("d%d", i), fmt.Sprintf("d%d", i), fmt.Sprintf("e%d", i)} {
			wg.Go(func() {
				ok, err := s.Enqueue(t.Context(), verifyJob(delivery, testHead(i), 1+i%7))
				if err != nil {
					t.Errorf("Enqueue(%s) = %v", delivery, err)
				}
				fresh[i][k] = ok
			})
		}
	}
	wg.Wait()
	var want, got []string
	for i, f := range fresh {
		switch {
		case f == [3]bool{true, false, false}, f == [3]bool{false, true, false}:
			want = append(want, fmt.Sprintf("d%d %s", i, testHead(i)))
		case f == [3]bool{false, false, true}:
			want = append(want, fmt.Sprintf("e%d %s", i, testHead(i)))
		default:
			t.Errorf("job %d: fresh %v, want one true", i, f)
		}
	}
	jobs, err := s.Jobs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		got = append(got, j.Delivery+" "+j.HeadSHA)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("Jobs() = %d jobs, want %d, by the deliveries told fresh (first difference: %v)", len(got), len(want), firstDiff(got, want))
	}
	if fellBack(log) {
		t.Errorf("a batch failed:\n%s", log)
	}
}

func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("got[%d] %q, want %q", i, got[i], want[i])
		}
	}
	return fmt.Sprintf("got %d, want %d", len(got), len(want))
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// openLoggedStore is openStore with a log to read.
func openLoggedStore(t *testing.T) (*Store, *syncBuffer) {
	t.Helper()
	log := &syncBuffer{}
	s, err := OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "vouch.db"), slog.New(slog.NewTextHandler(log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, log
}

// fellBack reports whether a batch failed and was written one by one.
func fellBack(log *syncBuffer) bool { return strings.Contains(log.String(), "one by one") }

// pendingCalls is how many Enqueue calls wait for the writer to take them.
func pendingCalls(s *Store) int {
	s.batch.mu.Lock()
	defer s.batch.mu.Unlock()
	return len(s.batch.pending)
}

// waitFor polls cond until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// enqueueResult is what one Enqueue call returned.
type enqueueResult struct {
	fresh bool
	err   error
}

// holdWriter takes the SQLite store's one connection and sends plug, which
// the writer takes and then waits with for the connection. It returns the
// function giving the connection back and the plug's answer.
func holdWriter(t *testing.T, s *Store, plug Job) (release func(), plugged <-chan enqueueResult) {
	t.Helper()
	conn, err := s.db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	waits := s.db.Stats().WaitCount
	ch := make(chan enqueueResult, 1)
	go func() {
		ok, err := s.Enqueue(context.Background(), plug)
		ch <- enqueueResult{ok, err}
	}()
	waitFor(t, "the writer to wait for the connection", func() bool { return s.db.Stats().WaitCount > waits })
	if n := pendingCalls(s); n != 0 {
		t.Fatalf("%d calls wait besides the plug", n)
	}
	return func() { conn.Close() }, ch
}

// enqueueInOneBatch sends jobs, in order, while the writer is held, so that
// it writes them in one batch, and returns what each Enqueue returned.
func enqueueInOneBatch(t *testing.T, s *Store, jobs ...Job) []enqueueResult {
	t.Helper()
	if len(jobs) > maxBatch {
		t.Fatalf("%d jobs do not fit one batch", len(jobs))
	}
	release, plugged := holdWriter(t, s, verifyJob("plug-"+t.Name(), testHead(-1), 99))
	res := make([]chan enqueueResult, len(jobs))
	for i, j := range jobs {
		res[i] = make(chan enqueueResult, 1)
		go func() {
			ok, err := s.Enqueue(t.Context(), j)
			res[i] <- enqueueResult{ok, err}
		}()
		waitFor(t, "the call to queue", func() bool { return pendingCalls(s) == i+1 })
	}
	release()
	if p := <-plugged; !p.fresh || p.err != nil {
		t.Fatalf("plug: Enqueue = %v, %v", p.fresh, p.err)
	}
	out := make([]enqueueResult, len(jobs))
	for i := range res {
		out[i] = <-res[i]
	}
	return out
}

func checkResults(t *testing.T, got []enqueueResult, want []bool) {
	t.Helper()
	for i, r := range got {
		if r.err != nil || r.fresh != want[i] {
			t.Errorf("call %d: Enqueue = %v, %v; want %v, nil", i, r.fresh, r.err, want[i])
		}
	}
}

// TestBatchReplays: a delivery id repeated in one batch (with the same job
// or another) is a replay of the first, as is one recorded by an earlier
// batch.
func TestBatchReplays(t *testing.T) {
	s, log := openLoggedStore(t)
	if ok, err := s.Enqueue(t.Context(), verifyJob("old", testHead(0), 1)); !ok || err != nil {
		t.Fatalf("Enqueue(old) = %v, %v", ok, err)
	}
	got := enqueueInOneBatch(t, s,
		verifyJob("d1", testHead(1), 1),
		verifyJob("d1", testHead(1), 1),
		verifyJob("d1", testHead(2), 1), // same id, other head: still a replay
		verifyJob("old", testHead(3), 1),
		func() Job { j := verifyJob("d1", testHead(4), 1); j.Forge = forge.GitHub; return j }(), // other forge
		commandJob("d1", 5), // same id, other kind
	)
	checkResults(t, got, []bool{true, false, false, false, true, false})
	if fellBack(log) {
		t.Errorf("the batch failed:\n%s", log)
	}
	jobs, err := s.Jobs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 4 { // old, plug, d1, GitHub d1
		t.Errorf("Jobs() = %d jobs, want 4: %+v", len(jobs), jobs)
	}
}

// TestBatchDuplicateJobs: deliveries carrying equal jobs in one batch queue
// the job once; the others are duplicates, their deliveries recorded.
func TestBatchDuplicateJobs(t *testing.T) {
	s, log := openLoggedStore(t)
	if ok, err := s.Enqueue(t.Context(), verifyJob("old", testHead(0), 1)); !ok || err != nil {
		t.Fatalf("Enqueue(old) = %v, %v", ok, err)
	}
	got := enqueueInOneBatch(t, s,
		verifyJob("v1", testHead(1), 1),
		verifyJob("v2", testHead(1), 1), // the same head again
		verifyJob("v3", testHead(1), 2), // the same head on another pull request
		verifyJob("v4", testHead(0), 1), // the head an earlier batch queued
		commandJob("c1", 7),
		func() Job {
			j := commandJob("c2", 7)
			j.Commands = []Command{{Kind: CommandUnknown, Arg: "x"}}
			return j
		}(), // same comment
		commandJob("c3", 8),
		func() Job { j := verifyJob("v5", testHead(1), 1); j.Repo.Owner = "Maintainer"; return j }(), // the repository, other case
	)
	checkResults(t, got, []bool{true, false, true, false, true, false, true, false})
	if fellBack(log) {
		t.Errorf("the batch failed:\n%s", log)
	}
	jobs, err := s.Jobs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var deliveries []string
	for _, j := range jobs {
		deliveries = append(deliveries, j.Delivery)
	}
	slices.Sort(deliveries)
	if want := []string{"c1", "c3", "old", "plug-" + t.Name(), "v1", "v3"}; !slices.Equal(deliveries, want) {
		t.Errorf("jobs of deliveries %v, want %v", deliveries, want)
	}
	// The duplicates' deliveries were recorded: sent again, they are
	// replays even with a job that would be new.
	for _, j := range []Job{verifyJob("v2", testHead(9), 1), commandJob("c2", 9)} {
		if ok, err := s.Enqueue(t.Context(), j); ok || err != nil {
			t.Errorf("Enqueue(%s again) = %v, %v; want false, nil", j.Delivery, ok, err)
		}
	}
}

// TestBatchBadDelivery: a delivery whose write fails fails alone; the rest
// of its batch is queued.
func TestBatchBadDelivery(t *testing.T) {
	s, log := openLoggedStore(t)
	// A disk that refuses one delivery's row, and another's job.
	for _, stmt := range []string{
		`CREATE TRIGGER bad_delivery BEFORE INSERT ON vouch_delivery WHEN NEW.delivery = 'bad-row'
		 BEGIN SELECT RAISE(ABORT, 'refused delivery'); END`,
		`CREATE TRIGGER bad_job BEFORE INSERT ON river_job WHEN json_extract(NEW.args, '$.delivery') = 'bad-job'
		 BEGIN SELECT RAISE(ABORT, 'refused job'); END`,
	} {
		if _, err := s.db.ExecContext(t.Context(), stmt); err != nil {
			t.Fatal(err)
		}
	}
	got := enqueueInOneBatch(t, s,
		verifyJob("g1", testHead(1), 1),
		verifyJob("bad-row", testHead(2), 1),
		verifyJob("g2", testHead(3), 1),
		verifyJob("bad-job", testHead(4), 1),
		verifyJob("g3", testHead(5), 1),
		verifyJob("g1", testHead(6), 1), // still a replay of the first
	)
	for i, want := range []bool{true, false, true, false, true, false} {
		bad := i == 1 || i == 3
		if r := got[i]; r.fresh != want || (r.err != nil) != bad {
			t.Errorf("call %d: Enqueue = %v, %v; want %v and an error: %v", i, r.fresh, r.err, want, bad)
		}
	}
	if !fellBack(log) {
		t.Errorf("the batch did not fail:\n%s", log)
	}
	jobs, err := s.Jobs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 4 { // plug, g1, g2, g3
		t.Errorf("Jobs() = %d jobs, want 4: %+v", len(jobs), jobs)
	}
	// The failed deliveries were not recorded: once the disk takes them,
	// they queue.
	if _, err := s.db.ExecContext(t.Context(), `DROP TRIGGER bad_delivery`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(t.Context(), `DROP TRIGGER bad_job`); err != nil {
		t.Fatal(err)
	}
	for _, j := range []Job{verifyJob("bad-row", testHead(2), 1), verifyJob("bad-job", testHead(4), 1)} {
		if ok, err := s.Enqueue(t.Context(), j); !ok || err != nil {
			t.Errorf("Enqueue(%s) retried = %v, %v; want true, nil", j.Delivery, ok, err)
		}
	}
}

// TestBatchClose: Close answers the callers already waiting, stops the
// writer and refuses later calls; a caller that gives up while waiting gets
// its context's error at once.
func TestBatchClose(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vouch.db")
	s, err := OpenSQLite(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	release, plugged := holdWriter(t, s, verifyJob("plug", testHead(-1), 99))

	const waiting = 20
	res := make(chan enqueueResult, waiting)
	for i := range waiting {
		go func() {
			ok, err := s.Enqueue(t.Context(), verifyJob(fmt.Sprintf("w%d", i), testHead(i), 1))
			res <- enqueueResult{ok, err}
		}()
	}
	ctx, cancel := context.WithCancel(t.Context())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := s.Enqueue(ctx, verifyJob("gave-up", testHead(1000), 1))
		gaveUp <- err
	}()
	waitFor(t, "the callers to queue", func() bool { return pendingCalls(s) == waiting+1 })
	cancel()
	select {
	case err := <-gaveUp:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled Enqueue = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled Enqueue still waits")
	}

	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	waitFor(t, "Close to begin", func() bool {
		s.batch.mu.Lock()
		defer s.batch.mu.Unlock()
		return s.batch.closed
	})
	if ok, err := s.Enqueue(t.Context(), verifyJob("late", testHead(2000), 1)); ok || !errors.Is(err, errStoreClosed) {
		t.Errorf("Enqueue after Close = %v, %v; want false, %v", ok, err, errStoreClosed)
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while the writer could not write", err)
	default:
	}
	release()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close does not return")
	}
	select {
	case <-s.batch.stopped:
	default:
		t.Error("Close returned with the writer running")
	}
	if p := <-plugged; !p.fresh || p.err != nil {
		t.Errorf("plug: Enqueue = %v, %v", p.fresh, p.err)
	}
	for range waiting {
		if r := <-res; !r.fresh || r.err != nil {
			t.Errorf("a caller waiting at Close: Enqueue = %v, %v; want true, nil", r.fresh, r.err)
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if ok, err := s.Enqueue(t.Context(), verifyJob("later", testHead(3000), 1)); ok || err == nil {
		t.Errorf("Enqueue after Close returned = %v, %v; want an error", ok, err)
	}

	// What the waiting callers were told is on disk; the caller that gave
	// up before the writer took it was not written.
	s = openStore(t, path)
	jobs, err := s.Jobs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != waiting+1 {
		t.Errorf("after reopening: %d jobs, want %d", len(jobs), waiting+1)
	}
	for _, j := range jobs {
		if j.Delivery == "gave-up" {
			t.Error("the cancelled call's job was written")
		}
	}
}

// TestUniqueKey: the batch's notion of equal jobs is River's: the kind and
// the fields tagged unique.
func TestUniqueKey(t *testing.T) {
	key := func(j Job) string {
		k, err := uniqueKey(argsOf(j))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	a := verifyJob("d1", headA, 1)
	for name, tc := range map[string]struct {
		j     Job
		equal bool
	}{
		"other delivery":   {verifyJob("d2", headA, 1), true},
		"other head":       {verifyJob("d1", headB, 1), false},
		"other pr":         {verifyJob("d1", headA, 2), false},
		"other base":       {func() Job { j := a; j.BaseSHA = headB; return j }(), false},
		"other forge":      {func() Job { j := a; j.Forge = forge.GitHub; return j }(), false},
		"repo, other case": {func() Job { j := a; j.Repo.Name = "Project"; return j }(), true},
		"command":          {commandJob("d1", 1), false},
	} {
		if got := key(tc.j) == key(a); got != tc.equal {
			t.Errorf("%s: equal keys %v, want %v", name, got, tc.equal)
		}
	}
	c := commandJob("c1", 1)
	for name, tc := range map[string]struct {
		j     Job
		equal bool
	}{
		"other delivery": {commandJob("c2", 1), true},
		"other commands": {func() Job { j := c; j.Commands = []Command{{Kind: CommandUnknown}}; return j }(), true},
		"other head":     {func() Job { j := c; j.HeadSHA = headA; return j }(), true},
		"other comment":  {commandJob("c1", 2), false},
	} {
		if got := key(tc.j) == key(c); got != tc.equal {
			t.Errorf("command, %s: equal keys %v, want %v", name, got, tc.equal)
		}
	}
}

// blockingQueue holds every Enqueue until release is closed.
type blockingQueue struct {
	waiting chan Job
	release chan struct{}
}

func (q blockingQueue) Enqueue(ctx context.Context, job Job) (bool, error) {
	q.waiting <- job
	select {
	case <-q.release:
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// TestIntakeSlotFreedBeforeEnqueue: the intake's slots bound the bodies it
// holds, not the deliveries waiting for the queue: with the queue slow, more
// than MaxInflightBodies deliveries wait for it and none is answered busy.
func TestIntakeSlotFreedBeforeEnqueue(t *testing.T) {
	const n = 3 * MaxInflightBodies
	q := blockingQueue{waiting: make(chan Job, n), release: make(chan struct{})}
	in := loadIntake(t, q)
	ds := newLoadDeliveries(t, giteaPayload(t, "pull_request_opened.json"), n)
	codes := make(chan int, n)
	for _, d := range ds {
		go func() {
			w := httptest.NewRecorder()
			r := giteaRequest("pull_request", "pull_request", d.id, d.body, testSecret)
			in.ServeHTTP(w, r)
			codes <- w.Code
		}()
	}
	for i := range n {
		select {
		case <-q.waiting:
		case code := <-codes:
			t.Fatalf("a delivery was answered %d before the queue took %d (%d did)", code, n, i)
		case <-time.After(10 * time.Second):
			t.Fatalf("%d deliveries wait for the queue, want %d", i, n)
		}
	}
	close(q.release)
	for range n {
		if code := <-codes; code != http.StatusAccepted {
			t.Errorf("delivery answered %d, want 202", code)
		}
	}
}
