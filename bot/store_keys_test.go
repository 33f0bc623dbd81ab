package bot

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"vouch.dev/vouch/forge"
)

// TestStoreJobKeys: what makes two jobs the same. A new base is a new
// verification; a repository's name is compared without case; a comment
// redelivered under a new delivery id is still one command job.
func TestStoreJobKeys(t *testing.T) {
	s := openStore(t, filepath.Join(t.TempDir(), "vouch.db"))
	ctx := t.Context()
	enqueue := func(j Job) bool {
		t.Helper()
		ok, err := s.Enqueue(ctx, j)
		if err != nil {
			t.Fatalf("Enqueue(%+v): %v", j, err)
		}
		return ok
	}
	first := verifyJob("d1", headA, 1)
	first.BaseSHA = headB
	if !enqueue(first) {
		t.Fatal("first job refused")
	}
	upper := verifyJob("d2", headA, 1)
	upper.BaseSHA = headB
	upper.Repo.Owner = strings.ToUpper(upper.Repo.Owner)
	if enqueue(upper) {
		t.Error("same job with the owner in other case queued twice")
	}
	rebased := verifyJob("d3", headA, 1)
	rebased.BaseSHA = strings.Repeat("c", 40)
	if !enqueue(rebased) {
		t.Error("same head on a new base not queued")
	}
	cmd := Job{Kind: JobCommand, Forge: forge.Gitea, Repo: first.Repo, PR: 1, Delivery: "c1", CommentID: 42, Author: "m", Commands: []Command{{Kind: CommandVerify}}}
	if !enqueue(cmd) {
		t.Fatal("command job refused")
	}
	cmd.Delivery = "c2-redelivered"
	if enqueue(cmd) {
		t.Error("one comment redelivered under a new delivery id queued twice")
	}
}

// TestIntakeBusy: deliveries that declare a small body and the others
// have separate slots: past the bound of one class, that class answers 503
// without reading the body, and the other class is still served.
func TestIntakeBusy(t *testing.T) {
	in := &Intake{Parsers: map[forge.Kind]forge.WebhookParser{forge.Gitea: nil}}
	in.Parsers[forge.Gitea] = parserFunc(func(http.Header, []byte) (*forge.Event, error) { return nil, forge.ErrIgnored })
	small := func() *http.Request {
		return httptest.NewRequest(http.MethodPost, "/webhook/gitea", strings.NewReader("{}"))
	}
	unsized := func() *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/webhook/gitea", strings.NewReader("{}"))
		r.ContentLength = -1
		return r
	}
	post := func(r *http.Request) int {
		rec := httptest.NewRecorder()
		in.ServeHTTP(rec, r)
		return rec.Code
	}
	post(small()) // creates the slots
	for _, tt := range []struct {
		name         string
		slots        chan struct{}
		n            int
		busy, served func() *http.Request
	}{
		{"large or unsized bodies", in.inflight, MaxInflightBodies, unsized, small},
		{"small bodies", in.inflightSmall, MaxInflightSmallBodies, small, unsized},
	} {
		for range tt.n {
			tt.slots <- struct{}{}
		}
		if code := post(tt.busy()); code != http.StatusServiceUnavailable {
			t.Errorf("%s: busy intake answered %d, want 503", tt.name, code)
		}
		if code := post(tt.served()); code != http.StatusOK {
			t.Errorf("%s busy: the other class answered %d, want 200 (ignored)", tt.name, code)
		}
		<-tt.slots
		if code := post(tt.busy()); code != http.StatusOK {
			t.Errorf("%s: intake with room answered %d, want 200 (ignored)", tt.name, code)
		}
		for range tt.n - 1 {
			<-tt.slots
		}
	}
}

// TestIntakeSlowBody: a sender that trickles its body loses its slot after
// BodyReadTimeout, and a real delivery then gets through (over a real
// loopback server, where read deadlines apply).
func TestIntakeSlowBody(t *testing.T) {
	in := &Intake{Parsers: map[forge.Kind]forge.WebhookParser{forge.Gitea: parserFunc(func(http.Header, []byte) (*forge.Event, error) {
		return nil, forge.ErrIgnored
	})}, BodyReadTimeout: 300 * time.Millisecond}
	srv := httptest.NewServer(in)
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	var conns []net.Conn
	for range MaxInflightSmallBodies {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "POST /webhook/gitea HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
	}
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	// Each slow sender is cut off: its connection ends without a 2xx.
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil && resp.StatusCode < 300 {
			t.Fatalf("a trickled body was accepted: %s", resp.Status)
		}
	}
	resp, err := http.Post(srv.URL+"/webhook/gitea", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("delivery after the slow senders: %s, want 200 (ignored)", resp.Status)
	}
}

type parserFunc func(http.Header, []byte) (*forge.Event, error)

func (f parserFunc) Parse(h http.Header, b []byte) (*forge.Event, error) { return f(h, b) }

// TestSecretRedactedEverywhere: JSON, text and slog never print a secret.
func TestSecretRedactedEverywhere(t *testing.T) {
	s := Secret("hunter2-very-secret")
	j, _ := json.Marshal(struct{ S Secret }{s})
	var b strings.Builder
	slog.New(slog.NewJSONHandler(&b, nil)).Info("cfg", "secret", s)
	txt, _ := s.MarshalText()
	for name, out := range map[string]string{"json": string(j), "slog": b.String(), "text": string(txt), "fmt": fmt.Sprint(s)} {
		if strings.Contains(out, "hunter2") {
			t.Errorf("%s output carries the secret: %s", name, out)
		}
	}
}

// TestIntakePerPeer: one address (an IPv6 /64) may send at most MaxPerPeer
// bodies at once; other addresses are still served.
func TestIntakePerPeer(t *testing.T) {
	in := &Intake{Parsers: map[forge.Kind]forge.WebhookParser{forge.Gitea: parserFunc(func(http.Header, []byte) (*forge.Event, error) {
		return nil, forge.ErrIgnored
	})}, MaxPerPeer: 2}
	from := func(addr string) int {
		r := httptest.NewRequest(http.MethodPost, "/webhook/gitea", strings.NewReader("{}"))
		r.RemoteAddr = addr
		rec := httptest.NewRecorder()
		in.ServeHTTP(rec, r)
		return rec.Code
	}
	for range 2 {
		in.enterPeer("192.0.2.1:1000")
		in.enterPeer("[2001:db8:1:2::1]:1000")
	}
	for _, tt := range []struct {
		addr string
		want int
	}{
		{"192.0.2.1:2000", http.StatusServiceUnavailable},
		{"192.0.2.2:2000", http.StatusOK},
		{"[2001:db8:1:2::ffff]:2000", http.StatusServiceUnavailable}, // same /64
		{"[2001:db8:1:3::1]:2000", http.StatusOK},
	} {
		if got := from(tt.addr); got != tt.want {
			t.Errorf("delivery from %s: %d, want %d", tt.addr, got, tt.want)
		}
	}
	in.leavePeer("192.0.2.1:1000")
	if got := from("192.0.2.1:3000"); got != http.StatusOK {
		t.Errorf("after one left: %d, want 200", got)
	}
}
