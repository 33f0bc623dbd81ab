package evidence

import "regexp"

// pytestSummary matches pytest's final line, decorated or not (-q):
// "==== 1 failed, 67 passed, 2 skipped in 0.12s ====", "3 passed in 1.02s (0:00:01)".
var pytestSummary = regexp.MustCompile(`^=*\s*((?:\d+ [a-z]+)(?:, \d+ [a-z]+)*) in [0-9.]+\s*s\b.*?=*$`)

var pytestItem = regexp.MustCompile(`(\d+) ([a-z]+)`)

// countPytest counts the last summary line of a pytest run.
func countPytest(output []byte) (TestCounts, bool) {
	var last TestCounts
	var found bool
	eachLine(output, func(line []byte) {
		m := pytestSummary.FindSubmatch(line)
		if m == nil {
			return
		}
		var c TestCounts
		for _, it := range pytestItem.FindAllSubmatch(m[1], -1) {
			n, ok := atoi(it[1])
			if !ok {
				return
			}
			switch string(it[2]) {
			case "passed", "xpassed":
				add(&c.Passed, n)
			case "failed", "error", "errors":
				add(&c.Failed, n)
			case "skipped", "xfailed":
				add(&c.Skipped, n)
			case "deselected", "warning", "warnings", "rerun", "reruns", "subtests":
			default:
				return // not a pytest summary after all
			}
		}
		last, found = c, true
	})
	return last, found
}
