package evidence

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"vouch.dev/vouch/sandbox"
)

// MaxComment is the most bytes a rendered comment may have: GitHub's limit of
// 65,536 characters (Gitea is held to the same); bytes never undercount.
const MaxComment = 65536

// Bounds on what one rendered path or text may take in a comment.
const (
	maxPathShown  = 1024
	maxValueShown = 256
)

// commentLimits are how much of the receipt's bulk a rendering shows.
type commentLimits struct {
	tail       int // bytes of each step's output tail; 0 omits the tails
	paths      int // changed paths listed
	violations int // violations listed
	detail     int // bytes of the receipt's detail
}

// commentLevels are tried in order until the comment fits: output tails go
// first, then path lists, then detail. The verdict and the STOP_AND_ASK block
// are never trimmed.
var commentLevels = []commentLimits{
	{tail: MaxOutputTail, paths: 200, violations: 200, detail: 4096},
	{tail: 1024, paths: 200, violations: 200, detail: 4096},
	{tail: 256, paths: 200, violations: 200, detail: 4096},
	{tail: 0, paths: 200, violations: 200, detail: 4096},
	{tail: 0, paths: 50, violations: 50, detail: 4096},
	{tail: 0, paths: 0, violations: 20, detail: 1024},
	{tail: 0, paths: 0, violations: 0, detail: 256},
}

// Marker is the hidden line that identifies the comment of a run on head.
// Only hexadecimal digits of head are kept, so it cannot close the comment.
func Marker(head string) string {
	hex := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F' {
			return r
		}
		return -1
	}, head)
	return "<!-- vouch:run head=" + headString(hex, 64) + " -->"
}

// Comment renders rc as the Markdown comment a maintainer reads on the pull
// request: the verdict on the first line, the hidden Marker, for STOP_AND_ASK
// the machine-parseable block, then SHAs, recipe, gate result, sandbox facts
// and each step with its output tail. All text from the pull request is
// inert. The result is at most MaxComment bytes: output tails are trimmed
// first, then path lists, never the verdict or the STOP_AND_ASK block.
func Comment(rc Receipt) string {
	return comment(rc, Marker(rc.Head))
}

// RunComment is Comment with the RunMarker of repo's pull request pr on its
// second line, so that the service finds the comment of each head again.
func RunComment(repo string, pr int, rc Receipt) string {
	return comment(rc, RunMarker(repo, pr, rc.Head))
}

// comment renders rc with the given marker line.
func comment(rc Receipt, marker string) string {
	for _, lim := range commentLevels {
		if s := renderComment(rc, marker, lim); len(s) <= MaxComment {
			return s
		}
	}
	var b strings.Builder
	writeVerdict(&b, rc, marker)
	writeSHAs(&b, rc)
	b.WriteString("The rest of this report does not fit in a comment; the receipt has it.\n")
	return headString(b.String(), MaxComment)
}

// renderComment renders the whole comment within lim.
func renderComment(rc Receipt, marker string, lim commentLimits) string {
	var b strings.Builder
	writeVerdict(&b, rc, marker)
	if rc.Detail != "" && lim.detail > 0 {
		b.WriteString("Detail:\n\n")
		b.WriteString(fenced(defuse(multiLine(bound(rc.Detail, lim.detail)))))
		b.WriteString("\n")
	}
	writeSHAs(&b, rc)
	writeGate(&b, rc, lim)
	writeSandbox(&b, rc)
	writeSteps(&b, rc, lim)
	return b.String()
}

// writeVerdict writes the first line, the marker, the human sentence and,
// for STOP_AND_ASK, the block; all bounded by construction.
func writeVerdict(b *strings.Builder, rc Receipt, marker string) {
	fmt.Fprintf(b, "**vouch: %s** (%s)%s\n", oneLine(string(rc.Outcome), 64), oneLine(string(rc.Reason), 64), notIsolatedTag(rc))
	b.WriteString(marker + "\n\n")
	ask, ok := AskFor(rc)
	if !ok {
		b.WriteString(outcomeSentence(rc.Outcome) + "\n\n")
		return
	}
	b.WriteString(ask.Sentence + "\n\n")
	lines := append([]string{"OUTCOME=" + string(rc.Outcome), "REASON=" + oneLine(string(rc.Reason), 64)}, ask.lines(rc.Executed)...)
	b.WriteString(fenced(defuse(strings.Join(lines, "\n"))))
	b.WriteString("\n")
}

// outcomeSentence says in one sentence what an outcome means.
func outcomeSentence(o Outcome) string {
	switch o {
	case Pass:
		return "Every step ran in a sandbox whose isolation was observed, and passed."
	case Fail:
		return "A step ran in a sandbox whose isolation was observed, and failed."
	case Blocked:
		return "The proof could not be obtained, so this is not a pass."
	case Error:
		return "vouch itself failed; this says nothing about the pull request."
	default:
		return "vouch did not reach a verdict."
	}
}

// writeSHAs writes the commits and the recipe.
func writeSHAs(b *strings.Builder, rc Receipt) {
	b.WriteString("| | |\n|---|---|\n")
	row := func(k, v string) { fmt.Fprintf(b, "| %s | %s |\n", k, cell(v)) }
	row("base", code(rc.Base, maxValueShown))
	row("merge-base", code(rc.MergeBase, maxValueShown))
	row("head", code(rc.Head, maxValueShown))
	switch {
	case rc.Recipe.Path == "":
		row("recipe", "not read (nothing was fetched)")
	case rc.Recipe.SHA256 != "":
		row("recipe", code(rc.Recipe.Path, maxValueShown)+" sha256 "+code(rc.Recipe.SHA256, maxValueShown))
	default:
		row("recipe", code(rc.Recipe.Path, maxValueShown)+" (none at base)")
	}
	row("executed", yesNo(rc.Executed, "yes", "no: nothing from the head ran"))
	b.WriteString("\n")
}

// writeGate writes the changed paths and the violations, bounded by lim.
func writeGate(b *strings.Builder, rc Receipt, lim commentLimits) {
	changed, violations := rc.Gate.Changed, rc.Gate.Violations
	if rc.Recipe.Path == "" {
		b.WriteString("### Gate\n\nNot run: nothing was fetched.\n\n")
		return
	}
	nc, nv := max(len(changed), rc.Gate.ChangedTotal), max(len(violations), rc.Gate.ViolationsTotal)
	fmt.Fprintf(b, "### Gate\n\n%d changed %s, %d %s.\n\n",
		nc, plural(nc, "path", "paths"), nv, plural(nv, "violation", "violations"))
	if len(violations) > 0 && lim.violations > 0 {
		b.WriteString("| path | rule |\n|---|---|\n")
		for i, v := range violations {
			if i == lim.violations {
				fmt.Fprintf(b, "| ... and %d more | |\n", nv-i)
				break
			}
			fmt.Fprintf(b, "| %s | %s |\n", cell(code(v.Path, maxPathShown)), cell(code(v.Rule, maxValueShown)))
		}
		b.WriteString("\n")
	}
	if len(changed) > 0 && lim.paths > 0 {
		fmt.Fprintf(b, "<details><summary>changed paths (%d)</summary>\n\n", nc)
		for i, p := range changed {
			if i == lim.paths {
				fmt.Fprintf(b, "- ... and %d more\n", nc-i)
				break
			}
			fmt.Fprintf(b, "- %s\n", code(p, maxPathShown))
		}
		b.WriteString("\n</details>\n\n")
	}
}

// writeSandbox writes what the sandbox observed.
func writeSandbox(b *strings.Builder, rc Receipt) {
	sb := rc.Sandbox
	b.WriteString("### Sandbox\n\n")
	if sb.Provider == "" && !rc.Executed && len(sb.Namespaces) == 0 && sb.Error == "" {
		b.WriteString("Not launched: nothing from the head ran.\n\n")
		return
	}
	fmt.Fprintf(b, "Provider %s, version %s. Isolated: **%s**", code(sb.Provider, maxValueShown), code(sb.Version, maxValueShown), yesNo(sb.Isolated, "yes", "no"))
	if sb.Error != "" {
		fmt.Fprintf(b, " (%s)", code(sb.Error, 1024))
	}
	b.WriteString(".\n\n")
	if len(sb.Namespaces) > 0 {
		b.WriteString("| namespace | host | child | differs |\n|---|---|---|---|\n")
		for _, k := range namespaceOrder(sb.Namespaces) {
			p := sb.Namespaces[k]
			fmt.Fprintf(b, "| %s | %s | %s | %s |\n", cell(code(k, maxValueShown)), cell(code(p.Host, maxValueShown)), cell(code(p.Child, maxValueShown)),
				yesNo(p.Host != "" && p.Child != "" && p.Host != p.Child, "yes", "**no**"))
		}
		b.WriteString("\n")
	}
	if len(sb.Limits) > 0 {
		b.WriteString("| limit | value | enforced by |\n|---|---|---|\n")
		for _, l := range sb.Limits {
			fmt.Fprintf(b, "| %s | %s | %s |\n", cell(code(l.Name, maxValueShown)), limitValue(l), cell(code(l.Mechanism, maxValueShown)))
		}
		b.WriteString("\n")
	}
}

// namespaceOrder lists the kinds of ns: the proof's kinds first, then others sorted.
func namespaceOrder(ns map[string]sandbox.NamespacePair) []string {
	var keys, rest []string
	for _, k := range sandbox.Namespaces {
		if _, ok := ns[k]; ok {
			keys = append(keys, k)
		}
	}
	for k := range ns {
		if !slices.Contains(sandbox.Namespaces, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	return append(keys, rest...)
}

// limitValue renders a limit's value in its unit.
func limitValue(l sandbox.AppliedLimit) string {
	switch l.Name {
	case "timeout":
		return (time.Duration(l.Value) * time.Millisecond).String()
	case "output", "memory", "tmp", "fsize", "swap":
		return byteSize(l.Value)
	case "cpu":
		return fmt.Sprintf("%.2f CPUs", float64(l.Value)/1000)
	case "cpu-time":
		return (time.Duration(l.Value) * time.Millisecond).String()
	default:
		return fmt.Sprint(l.Value)
	}
}

// byteSize renders n bytes in the largest binary unit that divides it.
func byteSize(n int64) string {
	for _, u := range []struct {
		size int64
		name string
	}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if n >= u.size && n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}

// writeSteps writes each launched step and its output tail within lim.
func writeSteps(b *strings.Builder, rc Receipt, lim commentLimits) {
	b.WriteString("### Steps\n\n")
	if len(rc.Steps) == 0 {
		b.WriteString("No step ran.\n")
		return
	}
	b.WriteString("| step | exit | duration | tests |\n|---|---|---|---|\n")
	for _, s := range rc.Steps {
		if b.Len() > MaxComment {
			return // too long already; Comment tries a smaller rendering
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", cell(code(s.Name, maxValueShown)), exitText(s), duration(s.DurationMS), testsText(s.Tests))
	}
	for _, s := range rc.Steps {
		if b.Len() > MaxComment {
			return
		}
		fmt.Fprintf(b, "\nOutput of %s: %s in all", code(s.Name, maxValueShown), byteCount(s.OutputBytes))
		switch {
		case s.OutputTail == "":
			b.WriteString(".\n")
		case lim.tail == 0:
			b.WriteString("; the tail is omitted to fit the comment limit (see the receipt).\n")
		default:
			tail := validTail(s.OutputTail, lim.tail)
			fmt.Fprintf(b, ".\n\n<details><summary>output (last %d bytes)</summary>\n\n", len(tail))
			b.WriteString(fenced(defuse(multiLine(tail))))
			b.WriteString("\n</details>\n")
		}
	}
}

// exitText renders a step's exit and why it was killed.
func exitText(s StepRecord) string {
	switch {
	case s.TimedOut:
		return fmt.Sprintf("%d (timed out)", s.ExitCode)
	case s.OutputLimited:
		return fmt.Sprintf("%d (output limit)", s.ExitCode)
	case s.OOMKilled:
		return fmt.Sprintf("%d (killed: out of memory)", s.ExitCode)
	default:
		return fmt.Sprint(s.ExitCode)
	}
}

// testsText renders test counts.
func testsText(c *TestCounts) string {
	if c == nil {
		return "not counted"
	}
	return fmt.Sprintf("%d passed, %d failed, %d skipped", c.Passed, c.Failed, c.Skipped)
}

// duration renders milliseconds.
func duration(ms int64) string {
	return (time.Duration(ms) * time.Millisecond).String()
}

// byteCount renders a number of bytes.
func byteCount(n int64) string {
	if n == 1 {
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", n)
}

// plural picks the word for n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
