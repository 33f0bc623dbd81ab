package evidence

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// Text from a pull request (paths, output, provider stderr) is hostile: it
// may carry terminal escapes, bidi overrides, line breaks that forge a
// "OUTCOME=" line, or HTML comments that forge a comment marker. These
// helpers make it inert before it is rendered.

// oneLine returns s on one line with every non-printable rune (line breaks
// included) escaped Go-style, bounded to n bytes with "…" when cut.
func oneLine(s string, n int) string {
	return bound(escape(s, false), n)
}

// multiLine is oneLine that keeps line feeds and tabs, normalises carriage
// returns to line feeds and drops ANSI colour sequences, for blocks of output.
func multiLine(s string) string {
	s = ansiEscape.ReplaceAllString(s, "")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	return escape(s, true)
}

// escape makes s valid UTF-8 and escapes every rune that is not graphic or a
// space (and, when keepLines, not a line feed or tab).
func escape(s string, keepLines bool) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r == ' ' || unicode.IsGraphic(r):
			b.WriteRune(r)
		case keepLines && (r == '\n' || r == '\t'):
			b.WriteRune(r)
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
	}
	return b.String()
}

// bound cuts s to at most n bytes on a rune boundary, ending with "…" when cut.
func bound(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const more = "…"
	return headString(s, n-len(more)) + more
}

// htmlComment matches the openers and closers of HTML comments.
var htmlComment = regexp.MustCompile(`<!--|-->`)

// defuse breaks HTML comment openers and closers with a zero-width space, so
// that hostile text can neither forge vouch's hidden marker nor hide the rest
// of a comment, whatever renders it.
func defuse(s string) string {
	return htmlComment.ReplaceAllStringFunc(s, func(m string) string {
		return m[:2] + "\u200b" + m[2:]
	})
}

// shortSHA is the 7-character form of a commit SHA used in replies.
func shortSHA(sha string) string {
	return headString(oneLine(sha, 64), 7)
}
