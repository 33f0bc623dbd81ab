//go:build !unix

package gate

import (
	"errors"
	"os"
)

// mmap is unavailable here; objects are then read through go-git alone.
func mmap(f *os.File, n int) ([]byte, func(), error) {
	return nil, nil, errors.New("mmap not supported on this platform")
}
