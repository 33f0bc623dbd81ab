package sandbox

import (
	"os"
	"sync"
)

// capture reads a step's combined stdout and stderr, keeps the first limit
// bytes, counts everything, and signals exceeded once the count passes the
// limit. Past the limit it keeps draining into a fixed buffer so the writers
// never block before they are killed: vouch's memory stays bounded whatever
// the step writes.
type capture struct {
	limit    int64
	exceeded chan struct{} // closed when more than limit bytes arrived
	done     chan struct{} // closed when the pipe reached EOF

	mu    sync.Mutex
	buf   []byte
	total int64
}

// newCapture starts draining r in a goroutine.
func newCapture(r *os.File, limit int64) *capture {
	c := &capture{limit: limit, exceeded: make(chan struct{}), done: make(chan struct{})}
	go c.drain(r)
	return c
}

func (c *capture) drain(r *os.File) {
	defer close(c.done)
	defer r.Close()
	chunk := make([]byte, 32<<10)
	signalled := false
	for {
		n, err := r.Read(chunk)
		if n > 0 {
			c.mu.Lock()
			if room := c.limit - int64(len(c.buf)); room > 0 {
				c.buf = append(c.buf, chunk[:min(int64(n), room)]...)
			}
			c.total += int64(n)
			over := c.total > c.limit
			c.mu.Unlock()
			if over && !signalled {
				signalled = true
				close(c.exceeded)
			}
		}
		if err != nil { // io.EOF once every writer is gone, or the pipe was closed
			return
		}
	}
}

// result returns a copy of what was kept and the total byte count.
func (c *capture) result() ([]byte, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.buf...), c.total
}
