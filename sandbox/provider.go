package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"syscall"
)

// trustedBinary refuses a provider binary that someone other than root or
// vouch's own user could have replaced: one owned by another user, or
// writable by group or others. The proof checks what the binary does; this
// checks who could have changed it.
func trustedBinary(path string) *ProofError {
	fi, err := os.Stat(path)
	if err != nil {
		return &ProofError{Cause: fmt.Sprintf("bubblewrap not found: %v", err)}
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return &ProofError{Cause: fmt.Sprintf("%s: cannot read its owner", path)}
	}
	if st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return &ProofError{Cause: fmt.Sprintf("%s is owned by uid %d, not by root or vouch's user: refusing an untrusted provider", path, st.Uid)}
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return &ProofError{Cause: fmt.Sprintf("%s is writable by group or others (%v): refusing an untrusted provider", path, fi.Mode().Perm())}
	}
	return nil
}

// fileSHA256 is the hex SHA-256 of the file at path, "" when it cannot be read.
func fileSHA256(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}
