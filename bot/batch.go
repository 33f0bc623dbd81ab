package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/riverqueue/river"
)

// Group commit. Store.Enqueue hands its job to the store's one writer
// goroutine and waits. The writer takes whatever is waiting (at most
// maxBatch, with no pause to let more arrive) and writes it in one
// transaction: one durable commit, and one River insert statement, for the
// lot. Under load the batches grow by themselves; alone, a delivery is a
// batch of one, as before.
//
// A batch is written so that each delivery gets the answer it would get
// alone, in arrival order: a delivery id seen before, or earlier in the
// batch, is a replay (false, no job); a job equal (by River's unique key)
// to one that exists, or to one earlier in the batch, is a duplicate
// (false, the delivery recorded). When the batch transaction fails, each of
// its deliveries is written again in a transaction of its own, so one bad
// delivery fails only its own caller.

// maxBatch bounds the deliveries one transaction writes.
const maxBatch = 128

// batchTimeout bounds one transaction of the writer, which no caller's
// context does.
const batchTimeout = 30 * time.Second

// errStoreClosed answers an Enqueue after Close.
var errStoreClosed = errors.New("store closed")

// enqueueReq is one Enqueue call waiting for the writer.
type enqueueReq struct {
	ctx  context.Context // the caller's: once it is done, nobody waits
	job  Job
	args river.JobArgs
	key  string    // uniqueKey(args)
	at   time.Time // when the delivery was received
	done chan enqueueRes
}

// enqueueRes is an Enqueue call's answer.
type enqueueRes struct {
	fresh bool
	err   error
}

// batcher is the queue of Enqueue calls in front of the writer.
type batcher struct {
	mu      sync.Mutex
	pending []*enqueueReq
	closed  bool
	wake    chan struct{} // capacity 1: there is work, or the store closes
	stopped chan struct{} // closed when the writer has returned
}

func newBatcher() *batcher {
	return &batcher{wake: make(chan struct{}, 1), stopped: make(chan struct{})}
}

// add queues r for the writer, or fails after close.
func (b *batcher) add(r *enqueueReq) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return errStoreClosed
	}
	b.pending = append(b.pending, r)
	b.mu.Unlock()
	b.signal()
	return nil
}

func (b *batcher) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// take moves up to maxBatch waiting calls, oldest first, into buf. It
// returns false when there are none and the store is closing.
func (b *batcher) take(buf []*enqueueReq) ([]*enqueueReq, bool) {
	for {
		b.mu.Lock()
		n := min(len(b.pending), maxBatch)
		if n > 0 {
			buf = append(buf[:0], b.pending[:n]...)
			rest := copy(b.pending, b.pending[n:])
			clear(b.pending[rest:])
			b.pending = b.pending[:rest]
			b.mu.Unlock()
			return buf, true
		}
		closed := b.closed
		b.mu.Unlock()
		if closed {
			return buf[:0], false
		}
		<-b.wake
	}
}

// close refuses new calls and waits until the writer has answered every
// call queued before and returned.
func (b *batcher) close() {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.signal()
	<-b.stopped
}

// writeLoop is the store's writer goroutine.
func (s *Store) writeLoop() {
	defer close(s.batch.stopped)
	var buf []*enqueueReq
	for {
		var ok bool
		if buf, ok = s.batch.take(buf); !ok {
			return
		}
		s.writeBatch(buf)
		clear(buf)
	}
}

// enqueue queues job and waits for the writer's answer.
func (s *Store) enqueue(ctx context.Context, job Job, args river.JobArgs) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	key, err := uniqueKey(args)
	if err != nil {
		return false, fmt.Errorf("enqueue %s: %w", job.Delivery, err)
	}
	r := &enqueueReq{ctx: ctx, job: job, args: args, key: key, at: time.Now(), done: make(chan enqueueRes, 1)}
	if err := s.batch.add(r); err != nil {
		return false, fmt.Errorf("enqueue %s: %w", job.Delivery, err)
	}
	select {
	case res := <-r.done:
		return res.fresh, res.err
	case <-ctx.Done():
		// The writer may still write it: the forge's retry is then a
		// replay.
		return false, ctx.Err()
	}
}

// writeBatch writes reqs and answers each.
func (s *Store) writeBatch(reqs []*enqueueReq) {
	// Nobody waits for a caller that gave up before its write began.
	live := reqs[:0:0]
	for _, r := range reqs {
		if err := r.ctx.Err(); err != nil {
			r.done <- enqueueRes{err: err}
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	res, err := s.commitBatch(live)
	if err == nil {
		for i, r := range live {
			r.done <- res[i]
		}
		return
	}
	if len(live) == 1 {
		live[0].done <- enqueueRes{err: err}
		return
	}
	s.logger.Warn("batch of deliveries failed; writing them one by one", "deliveries", len(live), "err", err)
	for _, r := range live {
		if err := r.ctx.Err(); err != nil {
			r.done <- enqueueRes{err: err}
			continue
		}
		res, err := s.commitBatch([]*enqueueReq{r})
		if err != nil {
			r.done <- enqueueRes{err: err}
			continue
		}
		r.done <- res[0]
	}
}

// commitBatch writes reqs in one transaction and returns their answers, in
// order, or the error that rolled the transaction back.
func (s *Store) commitBatch(reqs []*enqueueReq) ([]enqueueRes, error) {
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	what := func() string {
		if len(reqs) == 1 {
			return reqs[0].job.Delivery
		}
		return fmt.Sprintf("%d deliveries", len(reqs))
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("enqueue %s: %w", what(), err)
	}
	defer tx.Rollback()

	// The deliveries: each new (forge, id) once; a repeat within the batch
	// is a replay of the first.
	type deliveryKey struct{ forge, id string }
	res := make([]enqueueRes, len(reqs))
	seen := make(map[deliveryKey]bool, len(reqs))
	var rows deliveryRows
	for _, r := range reqs {
		k := deliveryKey{string(r.job.Forge), r.job.Delivery}
		if _, dup := seen[k]; dup {
			continue
		}
		seen[k] = false // not known to be new yet
		rows.add(r)
	}
	q, args := rows.insert(s.dialect)
	recorded, err := tx.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("record delivery %s: %w", what(), err)
	}
	for recorded.Next() {
		var k deliveryKey
		if err := recorded.Scan(&k.forge, &k.id); err != nil {
			recorded.Close()
			return nil, fmt.Errorf("record delivery %s: %w", what(), err)
		}
		seen[k] = true // recorded now: new
	}
	if err := errors.Join(recorded.Err(), recorded.Close()); err != nil {
		return nil, fmt.Errorf("record delivery %s: %w", what(), err)
	}

	// The jobs of new deliveries: each unique key once (River's SQLite
	// driver refuses a batch holding one twice, PostgreSQL a statement
	// touching a row twice); a repeat within the batch is a duplicate of the
	// first.
	var params []river.InsertManyParams
	owner := make(map[string]int, len(reqs)) // unique key → index in reqs
	for i, r := range reqs {
		k := deliveryKey{string(r.job.Forge), r.job.Delivery}
		if !seen[k] {
			continue // a replay: false
		}
		seen[k] = false // a later repeat in the batch is a replay
		if _, dup := owner[r.key]; dup {
			continue // a duplicate job: false, the delivery recorded
		}
		owner[r.key] = i
		params = append(params, river.InsertManyParams{Args: r.args})
	}
	if len(params) > 0 {
		inserted, err := s.river.InsertManyTx(ctx, tx, params)
		if err != nil {
			if len(reqs) == 1 {
				return nil, fmt.Errorf("insert %s job for delivery %s: %w", reqs[0].job.Kind, reqs[0].job.Delivery, err)
			}
			return nil, fmt.Errorf("insert jobs for %s: %w", what(), err)
		}
		if len(inserted) != len(params) {
			return nil, fmt.Errorf("insert jobs for %s: River answered %d of %d", what(), len(inserted), len(params))
		}
		// River answers in order; match by unique key all the same, which
		// also checks it.
		matched := 0
		for _, ins := range inserted {
			args, err := decodeArgs(ins.Job.Kind, ins.Job.EncodedArgs)
			if err != nil {
				return nil, fmt.Errorf("insert jobs for %s: %w", what(), err)
			}
			key, err := uniqueKey(args)
			if err != nil {
				return nil, fmt.Errorf("insert jobs for %s: %w", what(), err)
			}
			i, ok := owner[key]
			if !ok {
				return nil, fmt.Errorf("insert jobs for %s: River answered with job %d, not in the batch", what(), ins.Job.ID)
			}
			delete(owner, key)
			res[i].fresh = !ins.UniqueSkippedAsDuplicate
			matched++
		}
		if matched != len(params) {
			return nil, fmt.Errorf("insert jobs for %s: River answered %d of %d", what(), matched, len(params))
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("enqueue %s: %w", what(), err)
	}
	return res, nil
}

// deliveryRows are the vouch_delivery rows of a batch, by column.
type deliveryRows struct{ forge, delivery, receivedAt, jobKind []string }

func (d *deliveryRows) add(r *enqueueReq) {
	d.forge = append(d.forge, string(r.job.Forge))
	d.delivery = append(d.delivery, r.job.Delivery)
	d.receivedAt = append(d.receivedAt, stamp(r.at))
	d.jobKind = append(d.jobKind, string(r.job.Kind))
}

// insert is the statement recording the rows, each unless its delivery is
// recorded already, and returning those it recorded. PostgreSQL gets one
// text whatever the number of rows (arrays, unnested), which pgx prepares
// once per connection; SQLite, which prepares every statement anew, a row
// of placeholders per row.
func (d *deliveryRows) insert(dl dialect) (string, []any) {
	const head = `INSERT INTO vouch_delivery (forge, delivery, received_at, job_kind) `
	const tail = ` ON CONFLICT DO NOTHING RETURNING forge, delivery`
	if dl.name == postgresDialect.name {
		return head + `SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])` + tail,
			[]any{d.forge, d.delivery, d.receivedAt, d.jobKind}
	}
	var q strings.Builder
	args := make([]any, 0, 4*len(d.forge))
	q.WriteString(head + `VALUES `)
	for i := range d.forge {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?)")
		args = append(args, d.forge[i], d.delivery[i], d.receivedAt[i], d.jobKind[i])
	}
	q.WriteString(tail)
	return dl.rebind(q.String()), args
}

// argsOf is job's River arguments.
func argsOf(job Job) river.JobArgs {
	switch job.Kind {
	case JobVerify:
		return verifyArgs{Forge: string(job.Forge), Repo: repoKey(job.Repo), PR: job.PR, HeadSHA: job.HeadSHA, BaseSHA: job.BaseSHA, Delivery: job.Delivery}
	case JobCommand:
		return commandArgs{Forge: string(job.Forge), Repo: repoKey(job.Repo), PR: job.PR, HeadSHA: job.HeadSHA,
			Delivery: job.Delivery, CommentID: job.CommentID, CommentAt: job.CommentAt, Author: job.Author, Commands: job.Commands}
	}
	return nil
}

// decodeArgs decodes a job row's arguments.
func decodeArgs(kind string, encoded []byte) (river.JobArgs, error) {
	switch JobKind(kind) {
	case JobVerify:
		var a verifyArgs
		err := json.Unmarshal(encoded, &a)
		return a, err
	case JobCommand:
		var a commandArgs
		err := json.Unmarshal(encoded, &a)
		return a, err
	}
	return nil, fmt.Errorf("unknown job kind %q", kind)
}

// uniqueKey is what River tells equal jobs apart by, for args whose
// InsertOpts say UniqueOpts{ByArgs: true}: the kind and the fields tagged
// river:"unique" (all fields when none is), JSON-encoded.
func uniqueKey(args river.JobArgs) (string, error) {
	v := reflect.ValueOf(args)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return "", fmt.Errorf("job args %T: not a struct", args)
	}
	t := v.Type()
	fields := make(map[string]any)
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || !slices.Contains(strings.Split(f.Tag.Get("river"), ","), "unique") {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" {
			name = f.Name
		}
		fields[name] = v.Field(i).Interface()
	}
	var enc []byte
	var err error
	if len(fields) == 0 {
		enc, err = json.Marshal(args)
	} else {
		enc, err = json.Marshal(fields) // keys sorted
	}
	if err != nil {
		return "", fmt.Errorf("job args %T: %w", args, err)
	}
	return args.Kind() + " " + string(enc), nil
}
