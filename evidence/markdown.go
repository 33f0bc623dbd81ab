package evidence

import "strings"

// Markdown helpers for hostile text. GitHub and Gitea render the inside of a
// fenced code block and of a code span as raw text, so text placed there can
// neither format, link, nor close the surrounding HTML, provided the fence or
// delimiter is longer than any backtick run inside.

// fenced returns s as a fenced code block (ending in a newline) whose fence is
// longer than any run of backticks in s, so no line of s can close it.
func fenced(s string) string {
	f := strings.Repeat("`", max(3, longestRun(s, '`')+1))
	if s != "" && !strings.HasSuffix(s, "\n") {
		s += "\n"
	}
	return f + "\n" + s + f + "\n"
}

// code returns s as an inline code span of inert, one-line text of at most
// n bytes (before escaping backticks' delimiters).
func code(s string, n int) string {
	s = defuse(oneLine(s, n))
	if s == "" {
		return "_(empty)_"
	}
	d := strings.Repeat("`", longestRun(s, '`')+1)
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") || strings.HasPrefix(s, " ") || strings.HasSuffix(s, " ") {
		s = " " + s + " "
	}
	return d + s + d
}

// cell makes rendered Markdown safe inside a table cell: a pipe, even inside
// a code span, would end the cell.
func cell(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}

// longestRun is the length of the longest run of c in s.
func longestRun(s string, c byte) int {
	longest, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return longest
}
