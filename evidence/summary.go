package evidence

import (
	"fmt"
	"strings"
)

// Bounds of the summary's lists.
const (
	maxSummaryPaths  = 20
	maxSummaryDetail = 4096
)

// Summary renders rc as the few lines `vouch verify` prints to stdout:
// verdict, SHAs, recipe digest, changed paths and violations (at most 20 of
// each), sandbox facts, one line per step and, for STOP_AND_ASK, the decision
// needed and the exact reply. Text from the pull request is escaped so it
// cannot drive the terminal or forge a line. The last two lines are always
// exactly "OUTCOME=<outcome>" and "REASON=<reason>".
func Summary(rc Receipt) string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }

	line("vouch: %s (%s)%s", oneLine(string(rc.Outcome), 64), oneLine(string(rc.Reason), 64), notIsolatedTag(rc))
	if ask, ok := AskFor(rc); ok {
		line("  %s", strings.ReplaceAll(ask.Sentence, "`", ""))
	} else {
		line("  %s", outcomeSentence(rc.Outcome))
	}
	if rc.Detail != "" {
		line("detail:")
		for _, l := range strings.Split(multiLine(bound(rc.Detail, maxSummaryDetail)), "\n") {
			line("  %s", l)
		}
	}
	line("base:        %s", oneLine(rc.Base, maxValueShown))
	line("merge-base:  %s", oneLine(rc.MergeBase, maxValueShown))
	line("head:        %s", oneLine(rc.Head, maxValueShown))
	if rc.Recipe.SHA256 != "" {
		line("recipe:      %s sha256:%s", oneLine(rc.Recipe.Path, maxValueShown), oneLine(rc.Recipe.SHA256, maxValueShown))
	} else {
		line("recipe:      %s (none at base)", oneLine(rc.Recipe.Path, maxValueShown))
	}
	line("executed:    %s", yesNo(rc.Executed, "yes", "no"))

	line("changed:     %d %s", len(rc.Gate.Changed), plural(len(rc.Gate.Changed), "path", "paths"))
	for i, p := range rc.Gate.Changed {
		if i == maxSummaryPaths {
			line("  ... and %d more", len(rc.Gate.Changed)-i)
			break
		}
		line("  %s", oneLine(p, maxPathShown))
	}
	if len(rc.Gate.Violations) > 0 {
		line("violations:  %d", len(rc.Gate.Violations))
		for i, v := range rc.Gate.Violations {
			if i == maxSummaryPaths {
				line("  ... and %d more", len(rc.Gate.Violations)-i)
				break
			}
			line("  %s  (%s)", oneLine(v.Path, maxPathShown), oneLine(v.Rule, maxValueShown))
		}
	}

	sb := rc.Sandbox
	if sb.Provider == "" && !rc.Executed && len(sb.Namespaces) == 0 && sb.Error == "" {
		line("sandbox:     not launched")
	} else {
		line("sandbox:     %s (%s), isolated: %s", oneLine(sb.Provider, maxValueShown), oneLine(sb.Version, maxValueShown), yesNo(sb.Isolated, "yes", "NO"))
		if sb.Error != "" {
			line("  %s", oneLine(sb.Error, 1024))
		}
		for _, k := range namespaceOrder(sb.Namespaces) {
			p := sb.Namespaces[k]
			line("  %-7s %s -> %s", oneLine(k, 32), oneLine(p.Host, maxValueShown), oneLine(p.Child, maxValueShown))
		}
	}
	if len(rc.Steps) > 0 {
		line("steps:")
		for _, s := range rc.Steps {
			line("  %s: exit %s, %s, tests %s", oneLine(s.Name, maxValueShown), exitText(s), duration(s.DurationMS), testsText(s.Tests))
		}
	}

	if ask, ok := AskFor(rc); ok {
		line("")
		for _, l := range ask.lines(rc.Executed) {
			line("%s", l)
		}
	}
	line("OUTCOME=%s", oneLine(string(rc.Outcome), 64))
	line("REASON=%s", oneLine(string(rc.Reason), 64))
	return b.String()
}
