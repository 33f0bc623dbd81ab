package bot

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "code.gitea.io/sdk/gitea"
)

// tcpProxy forwards a loopback port to Gitea and can be taken down and
// brought back on the same port, as a forge outage looks to vouch.
type tcpProxy struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        map[net.Conn]bool
}

func newProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	p := &tcpProxy{target: target, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.down)
	return p
}

func (p *tcpProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
}

func (p *tcpProxy) pipe(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	go func() { io.Copy(up, c); up.Close() }()
	io.Copy(c, up)
	c.Close()
}

// down closes the listener and every open connection.
func (p *tcpProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

// up listens again on the same port.
func (p *tcpProxy) up(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("proxy back up on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

// TestE2EForgeOutage: the forge goes away while a verification runs, so
// the result cannot be posted; the receipt is persisted anyway, and when
// the forge is back 30 s later the result appears.
func TestE2EForgeOutage(t *testing.T) {
	e := newE2E(t, "e2e-outage")
	m := e.g.Maintainer
	proxy := newProxy(t, strings.TrimPrefix(e.g.URL, "http://"))
	e.cfg = e.config(t)
	e.cfg.Forges.Gitea.BaseURL = "http://" + proxy.addr
	e.start(t)
	e.hook(t)

	head := e.push(m, e.repo, "feature", map[string]string{"tests/slow.check": "touch SLOW-STARTED; sleep 3\n"})
	pr := e.openPR(m, "feature", "during an outage")
	e.waitFor("the step running", func() bool { return e.ran("SLOW-STARTED") })
	proxy.down()
	downAt := time.Now()
	e.waitFor("the receipt persisted while the forge is down", func() bool {
		for _, r := range e.allRuns(pr, head) {
			if r.State == RunFinal && r.Receipt != nil {
				return true
			}
		}
		return false
	})
	if sts := e.statuses(head); len(sts) == 0 || sts[len(sts)-1].State != sdk.StatusPending {
		t.Fatalf("the forge showed a result while vouch could not reach it: %+v", sts)
	}
	time.Sleep(30*time.Second - time.Since(downAt)) // the outage itself, not synchronisation
	proxy.up(t)
	if st := e.waitFinal(head); st.State != sdk.StatusSuccess {
		t.Fatalf("after the outage: %s %q", st.State, st.Description)
	}
	e.waitFor("the evidence comment", func() bool {
		c := e.evidenceComments(pr)[head]
		return len(c) == 1 && strings.HasPrefix(c[0], "**vouch: PASS**")
	})
	e.waitFor("the run marked posted", func() bool {
		runs := e.allRuns(pr, head)
		return len(runs) == 1 && runs[0].State == RunPosted
	})
}

// allRuns returns every run of head, finished or not.
func (e *e2e) allRuns(pr int, head string) []Run {
	e.t.Helper()
	runs, err := e.svc.store.Runs(e.t.Context(), RunFilter{Repo: repoKey(e.repo), PR: pr, Head: head}, 100)
	if err != nil {
		e.t.Fatal(err)
	}
	return runs
}
