//go:build unix

package gate

import (
	"fmt"
	"os"
	"syscall"
)

// mmap maps the first n bytes of f read-only. git never rewrites a pack in
// place (it writes a new one and renames it), so the mapping stays valid.
func mmap(f *os.File, n int) ([]byte, func(), error) {
	b, err := syscall.Mmap(int(f.Fd()), 0, n, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap %s: %w", f.Name(), err)
	}
	return b, func() { _ = syscall.Munmap(b) }, nil
}
