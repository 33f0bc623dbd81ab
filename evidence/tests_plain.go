package evidence

import "regexp"

// plainSummary matches "N passed, N failed[, N skipped]", optionally after
// one word and a colon ("tests: 3 passed, 0 failed, 1 skipped").
var plainSummary = regexp.MustCompile(`^\s*(?:[\w-]+:\s*)?(\d+) passed, (\d+) failed(?:, (\d+) skipped)?\s*$`)

// countPlain counts the last plain summary line.
func countPlain(output []byte) (TestCounts, bool) {
	var last TestCounts
	var found bool
	eachLine(output, func(line []byte) {
		m := plainSummary.FindSubmatch(line)
		if m == nil {
			return
		}
		var c TestCounts
		var ok bool
		if c.Passed, ok = atoi(m[1]); !ok {
			return
		}
		if c.Failed, ok = atoi(m[2]); !ok {
			return
		}
		if m[3] != nil {
			if c.Skipped, ok = atoi(m[3]); !ok {
				return
			}
		}
		last, found = c, true
	})
	return last, found
}
