package gate

import "fmt"

// Policy is the operator's server-wide part of the gate: what no pull request
// may touch whatever the recipe says, and how large a head tree may be.
type Policy struct {
	// Protected are doublestar globs, repository-relative, protected in every
	// repository (rule "operator:<glob>").
	Protected []string
	// MaxFiles bounds the non-directory entries of head's tree (and,
	// separately, its directories); zero means DefaultMaxFiles. It also
	// bounds head's tree objects, judged from their headers before they
	// are read: each at most min(16 MiB, MaxFiles × 300 B) and all of them
	// together at most MaxFiles × 300 B (64 KiB at least), rule
	// "max-tree-bytes".
	MaxFiles int
	// MaxBytes bounds the total size of head's blobs; zero means DefaultMaxBytes.
	MaxBytes int64
}

// Defaults of a Policy.
const (
	DefaultMaxFiles       = 100_000
	DefaultMaxBytes int64 = 1 << 30
)

// DefaultPolicy protects nothing beyond what every recipe protects and admits
// trees of up to DefaultMaxFiles files and DefaultMaxBytes bytes.
func DefaultPolicy() Policy {
	return Policy{MaxFiles: DefaultMaxFiles, MaxBytes: DefaultMaxBytes}
}

// Validate reports the first unusable field of p, by name.
func (p Policy) Validate() error {
	for _, g := range p.Protected {
		if err := checkGlob(g); err != nil {
			return fmt.Errorf("policy protected: %w", err)
		}
	}
	if p.MaxFiles < 0 {
		return fmt.Errorf("policy max files: %d is negative", p.MaxFiles)
	}
	if p.MaxBytes < 0 {
		return fmt.Errorf("policy max bytes: %d is negative", p.MaxBytes)
	}
	return nil
}

// withDefaults fills p's zero bounds.
func (p Policy) withDefaults() Policy {
	if p.MaxFiles == 0 {
		p.MaxFiles = DefaultMaxFiles
	}
	if p.MaxBytes == 0 {
		p.MaxBytes = DefaultMaxBytes
	}
	return p
}
