package evidence

import (
	"bytes"
	"regexp"
)

var (
	tapTest      = regexp.MustCompile(`^(\s*)(not ok|ok)\b(.*)$`)
	tapDirective = regexp.MustCompile(`(?i)(?:^|[^\\])#\s*(skip|todo)`)
	tapPlan      = regexp.MustCompile(`^1\.\.(\d+)`)
	tapBailOut   = regexp.MustCompile(`^\s*Bail out!`)
)

// countTAP counts TAP test lines, nested subtests included.
func countTAP(output []byte) (TestCounts, bool) {
	var c TestCounts
	var found, inYAML bool
	plan, topLevel := -1, 0
	eachLine(output, func(line []byte) {
		if inYAML {
			if t := bytes.TrimSpace(line); bytes.Equal(t, []byte("...")) {
				inYAML = false
			}
			return
		}
		if bytes.Equal(bytes.TrimSpace(line), []byte("---")) {
			inYAML = true
			return
		}
		if m := tapPlan.FindSubmatch(line); m != nil {
			if n, ok := atoi(m[1]); ok {
				plan = n
			}
			return
		}
		if tapBailOut.Match(line) {
			add(&c.Failed, 1)
			found = true
			return
		}
		m := tapTest.FindSubmatch(line)
		if m == nil {
			return
		}
		found = true
		if len(m[1]) == 0 {
			topLevel++
		}
		directive := ""
		if d := tapDirective.FindSubmatch(m[3]); d != nil {
			directive = string(bytes.ToLower(d[1]))
		}
		notOK := string(m[2]) == "not ok"
		switch {
		case directive == "skip":
			add(&c.Skipped, 1)
		case notOK && directive == "todo":
			add(&c.Skipped, 1)
		case notOK:
			add(&c.Failed, 1)
		default:
			add(&c.Passed, 1)
		}
	})
	if plan > topLevel {
		add(&c.Failed, plan-topLevel)
		found = true
	}
	return c, found
}
