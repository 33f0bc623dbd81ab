package evidence

import (
	"regexp"
	"strconv"
	"strings"
)

// Bounds of a RunMarker's fields.
const (
	maxMarkerRepo = 200
	maxMarkerHead = 64
)

// markerSearchLines is how many lines from the top of a comment ParseMarker
// looks at: vouch writes the marker on the first or second line.
const markerSearchLines = 2

// RunMarker is the hidden line that identifies the evidence comment of the
// run of head on repo's pull request pr:
//
//	<!-- vouch:run repo=owner/name pr=12 head=<hex> -->
//
// repo keeps only letters, digits and "._/-", head only hexadecimal digits,
// and a negative pr becomes 0, so no argument can end the HTML comment or
// add a field.
func RunMarker(repo string, pr int, head string) string {
	return "<!-- vouch:run repo=" + keepRunes(repo, isRepoRune, maxMarkerRepo) +
		" pr=" + strconv.Itoa(max(pr, 0)) +
		" head=" + keepRunes(head, isHexRune, maxMarkerHead) + " -->"
}

// markerLine matches a whole marker line: RunMarker's, or Marker's, which
// has no repo and pr.
var markerLine = regexp.MustCompile(`^<!-- vouch:run (?:repo=([A-Za-z0-9._/-]*) pr=([0-9]{1,18}) )?head=([0-9a-fA-F]{0,64}) -->$`)

// ParseMarker finds the marker of a comment vouch wrote and returns its
// fields; for a Marker line repo is "" and pr 0. The marker counts only as
// a whole line of its own within the first two lines of body, before any
// blank line or code fence: a marker anywhere else, quoted, indented or in a
// code block, as hostile step output could place it, is not vouch's.
// Callers must still check that the comment's author is vouch itself.
func ParseMarker(body string) (repo string, pr int, head string, ok bool) {
	for i, line := range strings.SplitN(body, "\n", markerSearchLines+1) {
		if i == markerSearchLines {
			break
		}
		line = strings.TrimSuffix(line, "\r")
		if strings.TrimSpace(line) == "" || isFence(line) {
			break
		}
		m := markerLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if m[2] != "" {
			n, err := strconv.Atoi(m[2])
			if err != nil {
				return "", 0, "", false
			}
			pr = n
		}
		return m[1], pr, m[3], true
	}
	return "", 0, "", false
}

// isFence reports whether line opens or closes a fenced code block
// (CommonMark: up to three spaces, then three or more backticks or tildes).
func isFence(line string) bool {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 {
		return false
	}
	return strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")
}

// keepRunes returns the runes of s that keep accepts, at most n bytes.
func keepRunes(s string, keep func(rune) bool, n int) string {
	s = strings.Map(func(r rune) rune {
		if keep(r) {
			return r
		}
		return -1
	}, s)
	return headString(s, n)
}

// isHexRune reports whether r is a hexadecimal digit.
func isHexRune(r rune) bool {
	return r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F'
}

// isRepoRune reports whether r may appear in a marker's repo: the characters
// of GitHub's and Gitea's owner and repository names, and the slash.
func isRepoRune(r rune) bool {
	return r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '.' || r == '_' || r == '-' || r == '/'
}
