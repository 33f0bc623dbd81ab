package evidence

import (
	"net/url"
	"strings"
)

// Superseded renders the comment of the run of oldHead once newHead of
// repo's pull request pr is being verified: one visible line, "superseded
// by" newHead's short SHA linked to newURL (its evidence page; plain text
// when newURL is not an absolute http(s) URL), and the RunMarker of oldHead
// on the second line, so the comment is still found, and never edited twice.
func Superseded(repo string, pr int, oldHead, newHead, newURL string) string {
	short := code(shortSHA(keepRunes(newHead, isHexRune, maxMarkerHead)), 64)
	if u := linkURL(newURL); u != "" {
		short = "[" + short + "](" + u + ")"
	}
	return "**vouch:** superseded by " + short + "; this head was not verified further.\n" +
		RunMarker(repo, pr, oldHead) + "\n"
}

// linkURL returns u for a Markdown link destination when it is an absolute
// http(s) URL, with every character that could end the destination or the
// link percent-encoded; otherwise "".
func linkURL(u string) string {
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return ""
	}
	var b strings.Builder
	for _, c := range []byte(p.String()) {
		switch {
		case c <= ' ' || c >= 0x7f || strings.IndexByte(`()<>[]\"'`+"`", c) >= 0:
			b.WriteString("%" + strings.ToUpper(hexByte(c)))
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// hexByte is c as two hexadecimal digits.
func hexByte(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&0xf]})
}
