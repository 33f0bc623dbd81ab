package evidence

// PendingComment renders the evidence comment of a run of head on repo's
// pull request pr that has no verdict yet: the phase on the first line, the
// RunMarker on the second (so the result replaces this comment in place),
// and a link to the evidence page when pageURL is an absolute http(s) URL.
// It claims nothing about the head.
func PendingComment(repo string, pr int, head string, phase Phase, pageURL string) string {
	what := "queued: waiting for a worker"
	if phase == Running {
		what = "running: the gate and the sandbox are verifying this head"
	}
	body := "**vouch: " + what + "** (head " + code(shortSHA(keepRunes(head, isHexRune, maxMarkerHead)), 64) + ")\n" +
		RunMarker(repo, pr, head) + "\n\n" +
		"No verdict yet; this comment is replaced by the result.\n"
	if u := linkURL(pageURL); u != "" {
		body += "\n[Evidence page](" + u + ")\n"
	}
	return body
}
