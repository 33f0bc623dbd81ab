package evidence

import (
	"bytes"
	"encoding/json"
	"regexp"
)

// goEvent is the part of a `go test -json` (test2json) event that is counted.
type goEvent struct {
	Action string
	Test   string
}

var goVerboseLine = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): \S`)

// countGo counts test2json events when there are any, else `go test -v` lines.
func countGo(output []byte) (TestCounts, bool) {
	var jsonCounts, textCounts TestCounts
	var jsonFound, textFound bool
	eachLine(output, func(line []byte) {
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) > 0 && trimmed[0] == '{' {
			var ev goEvent
			if json.Unmarshal(trimmed, &ev) == nil && ev.Test != "" {
				switch ev.Action {
				case "pass":
					add(&jsonCounts.Passed, 1)
					jsonFound = true
				case "fail":
					add(&jsonCounts.Failed, 1)
					jsonFound = true
				case "skip":
					add(&jsonCounts.Skipped, 1)
					jsonFound = true
				}
			}
			return
		}
		m := goVerboseLine.FindSubmatch(line)
		if m == nil {
			return
		}
		textFound = true
		switch string(m[1]) {
		case "PASS":
			add(&textCounts.Passed, 1)
		case "FAIL":
			add(&textCounts.Failed, 1)
		case "SKIP":
			add(&textCounts.Skipped, 1)
		}
	})
	if jsonFound {
		return jsonCounts, true
	}
	return textCounts, textFound
}
