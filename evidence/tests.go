package evidence

import (
	"bytes"
	"regexp"
	"strconv"
)

// The test output formats a recipe step may name in its `tests:` key.
const (
	FormatGo     = "go"
	FormatPytest = "pytest"
	FormatTAP    = "tap"
	FormatPlain  = "plain"
)

// maxCount bounds any single number read from output, so that sums of
// counts cannot overflow whatever a step prints.
const maxCount = 1 << 30

// CountTests counts the tests reported in a step's output, read in the given
// format ("go", "pytest", "tap" or "plain"). It reports ok=false when the
// format is unknown or nothing countable was found, including a summary that
// counts zero tests: zero tests prove nothing.
//
// Counting rules, per format:
//   - go: `go test -json` events with a Test field (subtests included), with
//     non-JSON lines tolerated; if no such event exists, the `--- PASS:`,
//     `--- FAIL:` and `--- SKIP:` lines of `go test -v` (subtests included).
//   - pytest: the last summary line ("67 passed, 2 skipped, 1 failed in 0.12s");
//     errors count as failed, xfailed as skipped, xpassed as passed,
//     deselected and warnings are ignored.
//   - tap: `ok`/`not ok` lines at any indentation (nested subtests included,
//     YAML blocks ignored); a `# SKIP` directive counts as skipped, a `# TODO`
//     not-ok as skipped rather than failed; `Bail out!` and tests missing from
//     the top-level plan count as failed.
//   - plain: the last line `[word:] N passed, N failed[, N skipped]`.
func CountTests(format string, output []byte) (TestCounts, bool) {
	var c TestCounts
	var found bool
	switch format {
	case FormatGo:
		c, found = countGo(output)
	case FormatPytest:
		c, found = countPytest(output)
	case FormatTAP:
		c, found = countTAP(output)
	case FormatPlain:
		c, found = countPlain(output)
	default:
		return TestCounts{}, false
	}
	if !found || c.Total() == 0 {
		return TestCounts{}, false
	}
	return c, true
}

// Total is the number of tests counted.
func (c TestCounts) Total() int { return c.Passed + c.Failed + c.Skipped }

// eachLine calls fn with every line of b, without its line ending and with
// ANSI escape sequences (colour) removed. Unlike bufio.Scanner it has no line
// length limit.
func eachLine(b []byte, fn func(line []byte)) {
	for len(b) > 0 {
		var line []byte
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			line, b = b, nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if bytes.IndexByte(line, 0x1b) >= 0 {
			line = ansiEscape.ReplaceAll(line, nil)
		}
		fn(line)
	}
}

var ansiEscape = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)

// atoi parses a decimal count, refusing values above maxCount.
func atoi(b []byte) (int, bool) {
	n, err := strconv.Atoi(string(b))
	if err != nil || n < 0 || n > maxCount {
		return 0, false
	}
	return n, true
}

// add adds n to *dst, saturating at maxCount.
func add(dst *int, n int) {
	*dst = min(*dst+n, maxCount)
}
