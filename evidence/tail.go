package evidence

import (
	"strings"
	"unicode/utf8"
)

// MaxOutputTail bounds a receipt step's OutputTail, in bytes.
const MaxOutputTail = 4 << 10

// Tail returns the last at most n bytes of b as valid UTF-8: invalid
// sequences become U+FFFD and the cut falls on a rune boundary, so the result
// never exceeds n bytes.
func Tail(b []byte, n int) string {
	// Keep a few bytes more than n so a rune cut at the front can be dropped.
	if len(b) > n+utf8.UTFMax {
		b = b[len(b)-n-utf8.UTFMax:]
	}
	return validTail(string(b), n)
}

// validTail is Tail for a string: the last at most n bytes of s, as valid
// UTF-8, cut on a rune boundary. Its cost follows n, not len(s).
func validTail(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) > n+utf8.UTFMax {
		s = s[len(s)-n-utf8.UTFMax:]
	}
	return tailString(strings.ToValidUTF8(s, "\uFFFD"), n)
}

// tailString returns the last at most n bytes of the valid UTF-8 string s,
// starting on a rune boundary.
func tailString(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return s
}

// headString returns the first at most n bytes of the valid UTF-8 string s,
// ending on a rune boundary.
func headString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	s = s[:n]
	for len(s) > 0 {
		r, size := utf8.DecodeLastRuneInString(s)
		if r != utf8.RuneError || size > 1 {
			break
		}
		s = s[:len(s)-1]
	}
	return s
}
