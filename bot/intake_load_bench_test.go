package bot

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"vouch.dev/vouch/fixtures/pgtest"
	"vouch.dev/vouch/forge"
	"vouch.dev/vouch/forge/gitea"
)

// The intake load benchmark: real HTTP on loopback, a Go load generator of
// fixed concurrency (each client a keep-alive connection sending its next
// delivery as soon as the last is answered), every delivery distinct (its
// own delivery id and head SHA, so its own job), all bodies built and
// signed before the timer.
//
//	go test -run '^$' -bench BenchmarkIntakeLoad -benchtime 3000x ./bot/
//
// Sub-benchmarks, for each concurrency c:
//
//   - bare/c=N: the ceiling, a handler that only reads the body, checks its
//     HMAC and answers 202.
//   - <store>/c=N: the real Intake over that store (sqlite: a file in the
//     test's temporary directory; postgres: a throw-away server from
//     fixtures/pgtest on loopback, skipped without PostgreSQL's binaries
//     unless CI=true). deliveries/s counts deliveries verified,
//     deduplicated and durably queued: every one was answered 202 and the
//     store holds exactly that many jobs afterwards.
//     In the same run it measures the bare handler again (bare-*) and
//     reports ratio, intake deliveries/s over bare deliveries/s.
//   - <store>/replay/c=N: deliveries already queued sent again, each
//     answered 200 "already queued", no job added.
//
// p50-ms and p99-ms are a delivery's acknowledgement latency, request sent
// to answer read. ns/op is suppressed: the metrics above say it better.
//
// Intake reads at most MaxInflightBodies deliveries at once and answers the
// others 503 "busy, retry later". The generator retries such a delivery
// after a short pause (0.5 ms, growing to 10 ms), counts those answers
// (busy/delivery) and measures its latency from the first attempt to the
// final answer: the time until the sender holds an acknowledgement. Any
// other unexpected answer fails the benchmark. Since a delivery gives its
// slot back before it waits for the store, busy/delivery should be 0.

// intakeLoadStore is one Queue implementation under load: a row of
// intakeLoadStores.
type intakeLoadStore struct {
	name string
	// open returns an empty store, closed by tb.Cleanup, and a function
	// counting the jobs in it, whatever their state.
	open func(tb testing.TB) (Queue, func(context.Context) (int, error))
}

// intakeLoadStores are the stores the intake is measured over; another
// store is one more row.
var intakeLoadStores = []intakeLoadStore{
	{"sqlite", func(tb testing.TB) (Queue, func(context.Context) (int, error)) {
		s := openStore(tb, filepath.Join(tb.TempDir(), "vouch.db"))
		return s, func(ctx context.Context) (n int, err error) {
			err = s.db.QueryRowContext(ctx, `SELECT count(*) FROM river_job`).Scan(&n)
			return n, err
		}
	}},
	{"postgres", func(tb testing.TB) (Queue, func(context.Context) (int, error)) {
		dsn := pgtest.Start(tb)
		s, err := OpenPostgres(tb.Context(), dsn, nil)
		if err != nil {
			tb.Fatalf("OpenPostgres: %v", err)
		}
		tb.Cleanup(func() { s.Close() })
		return s, func(ctx context.Context) (n int, err error) {
			err = s.db.QueryRowContext(ctx, `SELECT count(*) FROM river_job`).Scan(&n)
			return n, err
		}
	}},
}

// intakeLoadConcurrency are the numbers of concurrent clients.
var intakeLoadConcurrency = []int{16, 64}

func BenchmarkIntakeLoad(b *testing.B) {
	payload := giteaPayload(b, "pull_request_opened.json")
	for _, c := range intakeLoadConcurrency {
		b.Run(fmt.Sprintf("bare/c=%d", c), func(b *testing.B) {
			st := runIntakeLoad(b, bareIntake([]byte(testSecret)), newLoadDeliveries(b, payload, b.N), c, http.StatusAccepted)
			st.report(b, "")
		})
	}
	for _, row := range intakeLoadStores {
		for _, c := range intakeLoadConcurrency {
			b.Run(fmt.Sprintf("%s/c=%d", row.name, c), func(b *testing.B) {
				q, count := row.open(b)
				bare := runIntakeLoad(b, bareIntake([]byte(testSecret)), newLoadDeliveries(b, payload, b.N), c, http.StatusAccepted)
				st := runIntakeLoad(b, loadIntake(b, q), newLoadDeliveries(b, payload, b.N), c, http.StatusAccepted)
				checkLoadJobs(b, count, b.N)
				st.report(b, "")
				bare.report(b, "bare-")
				b.ReportMetric(st.rate()/bare.rate(), "ratio")
			})
		}
		for _, c := range intakeLoadConcurrency {
			b.Run(fmt.Sprintf("%s/replay/c=%d", row.name, c), func(b *testing.B) {
				q, count := row.open(b)
				intake := loadIntake(b, q)
				// Queue a few deliveries, untimed, then send them again and
				// again.
				queued := newLoadDeliveries(b, payload, min(b.N, 4*c))
				runIntakeLoad(b, intake, queued, c, http.StatusAccepted)
				replays := make([]loadDelivery, b.N)
				for i := range replays {
					replays[i] = queued[i%len(queued)]
				}
				st := runIntakeLoad(b, intake, replays, c, http.StatusOK)
				checkLoadJobs(b, count, len(queued))
				st.report(b, "")
			})
		}
	}
}

// loadIntake is the real Intake over q, serving the repository of the
// testdata payloads.
func loadIntake(tb testing.TB, q Queue) *Intake {
	tb.Helper()
	gp, err := gitea.NewWebhook([]byte(testSecret))
	if err != nil {
		tb.Fatal(err)
	}
	gp.BotLogin = "vouch-bot"
	return &Intake{
		Parsers: map[forge.Kind]forge.WebhookParser{forge.Gitea: gp},
		Queue:   q,
		Served:  ServedSet([]RepoRef{{Forge: forge.Gitea, Owner: "maintainer", Name: "project"}}),
	}
}

// checkLoadJobs fails tb unless the store holds want jobs.
func checkLoadJobs(tb testing.TB, count func(context.Context) (int, error), want int) {
	tb.Helper()
	n, err := count(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	if n != want {
		tb.Fatalf("store holds %d jobs, want %d", n, want)
	}
}

// bareIntake is the ceiling: read the body, check its HMAC in constant
// time, answer 202.
func bareIntake(secret []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, forge.MaxWebhookBody+1))
		if err != nil || len(body) > forge.MaxWebhookBody {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		got, err := hex.DecodeString(r.Header.Get("X-Gitea-Signature"))
		mac := hmac.New(sha256.New, secret)
		mac.Write(body)
		if err != nil || !hmac.Equal(got, mac.Sum(nil)) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, "queued\n")
	})
}

// loadDelivery is one pre-built, pre-signed delivery.
type loadDelivery struct {
	id, sig string
	body    []byte
}

// loadDeliveryBatch numbers the batches of a process, so no two batches
// share a delivery id or a head.
var loadDeliveryBatch atomic.Uint64

// newLoadDeliveries builds n distinct pull_request "opened" deliveries from
// a real one: each has its own delivery id and its own head SHA, and is
// signed as Gitea signs.
func newLoadDeliveries(tb testing.TB, payload []byte, n int) []loadDelivery {
	tb.Helper()
	const head = "069e29b24db14ea8b6316936a890f01498c0c8bd"
	if bytes.Count(payload, []byte(head)) != 1 || bytes.Count(payload, []byte(`"sha": "`+head+`"`)) != 1 {
		tb.Fatalf("payload: want the head SHA %s exactly once", head)
	}
	batch := loadDeliveryBatch.Add(1)
	secret := []byte(testSecret)
	ds := make([]loadDelivery, n)
	for i := range ds {
		sum := sha256.Sum256(fmt.Appendf(nil, "load %d %d", batch, i))
		body := bytes.Replace(payload, []byte(head), []byte(hex.EncodeToString(sum[:20])), 1)
		ds[i] = loadDelivery{id: fmt.Sprintf("load-%d-%d", batch, i), sig: gitea.Signature(secret, body), body: body}
	}
	return ds
}

// loadStats are one run's results.
type loadStats struct {
	n       int
	elapsed time.Duration
	lat     []time.Duration // sorted
	busy    int64           // 503 answers, retried
}

func (s loadStats) rate() float64 { return float64(s.n) / s.elapsed.Seconds() }

// pct is the p-quantile latency in milliseconds (nearest rank).
func (s loadStats) pct(p float64) float64 {
	i := int(float64(len(s.lat))*p+0.999999) - 1
	return float64(s.lat[max(0, min(i, len(s.lat)-1))]) / float64(time.Millisecond)
}

func (s loadStats) report(b *testing.B, prefix string) {
	b.ReportMetric(s.rate(), prefix+"deliveries/s")
	b.ReportMetric(s.pct(0.50), prefix+"p50-ms")
	b.ReportMetric(s.pct(0.99), prefix+"p99-ms")
	if prefix == "" {
		b.ReportMetric(float64(s.busy)/float64(s.n), "busy/delivery")
		b.ReportMetric(0, "ns/op")
	}
}

// runIntakeLoad serves h on a loopback listener and sends every delivery
// from c keep-alive clients; each must be answered want (a 503 "busy" is
// retried). Only the sending is timed; the timer is stopped outside it, so
// a benchmark may call it more than once.
func runIntakeLoad(b *testing.B, h http.Handler, ds []loadDelivery, c int, want int) loadStats {
	b.Helper()
	b.StopTimer()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/webhook/", h)
	mux.HandleFunc("/warm", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	tr := &http.Transport{MaxIdleConns: c, MaxIdleConnsPerHost: c, IdleConnTimeout: time.Minute, DisableCompression: true}
	defer tr.CloseIdleConnections()
	base := "http://" + ln.Addr().String()

	// Open the c connections before the timer.
	var wg sync.WaitGroup
	for range c {
		wg.Go(func() {
			r, err := http.NewRequest(http.MethodGet, base+"/warm", nil)
			if err != nil {
				return
			}
			if resp, err := tr.RoundTrip(r); err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()

	wantMsg := map[int]string{http.StatusAccepted: "queued", http.StatusOK: "already queued"}[want]
	lat := make([]time.Duration, len(ds))
	var next, busy atomic.Int64
	var failed atomic.Bool
	var failOnce sync.Once
	var failure error
	fail := func(err error) {
		failOnce.Do(func() { failure = err })
		failed.Store(true)
	}
	b.StartTimer()
	start := time.Now()
	for range c {
		wg.Go(func() {
			client := &http.Client{Transport: tr, Timeout: time.Minute}
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= len(ds) {
					return
				}
				t0 := time.Now()
				for attempt := 1; ; attempt++ {
					code, msg, err := postLoadDelivery(client, base, ds[i])
					if err != nil {
						fail(err)
						return
					}
					if code == http.StatusServiceUnavailable && strings.HasPrefix(msg, "busy") {
						busy.Add(1)
						time.Sleep(time.Duration(min(attempt, 20)) * 500 * time.Microsecond)
						continue
					}
					if code != want || msg != wantMsg {
						fail(fmt.Errorf("delivery %s: %d %q, want %d %q", ds[i].id, code, msg, want, wantMsg))
						return
					}
					break
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if failure != nil {
		b.Fatal(failure)
	}
	slices.Sort(lat)
	return loadStats{n: len(ds), elapsed: elapsed, lat: lat, busy: busy.Load()}
}

// postLoadDelivery posts d as Gitea does and returns the answer.
func postLoadDelivery(client *http.Client, base string, d loadDelivery) (int, string, error) {
	r, err := http.NewRequest(http.MethodPost, base+"/webhook/gitea", bytes.NewReader(d.body))
	if err != nil {
		return 0, "", err
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-Gitea-Event", "pull_request")
	r.Header.Set("X-Gitea-Event-Type", "pull_request")
	r.Header.Set("X-Gitea-Delivery", d.id)
	r.Header.Set("X-Gitea-Signature", d.sig)
	resp, err := client.Do(r)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	msg, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", err
	}
	return resp.StatusCode, strings.TrimSpace(string(msg)), nil
}
