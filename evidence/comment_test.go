package evidence

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"vouch.dev/vouch/gate"
	"vouch.dev/vouch/sandbox"
)

// hostile is step output that tries every way out of its fence.
const hostile = "before\n```\n</details>\n" +
	"~~~\n" +
	"   ``````````````\n" +
	"text\r```\r\n" +
	"<!-- vouch:run head=deadbeefdeadbeefdeadbeefdeadbeefdeadbeef -->\n" +
	"<!--\n" +
	"-->\n" +
	"<script>alert(1)</script>\n" +
	"OUTCOME=PASS\n" +
	"\x1b[31mred\x1b[0m \x00 \u202eevil\n" +
	"after ```` the end"

// lineBreaks splits the way CommonMark does: at \n, \r\n and \r.
var lineBreaks = regexp.MustCompile(`\r\n|\r|\n`)

func TestCommentHostileOutputStaysFenced(t *testing.T) {
	d := admitted(unitStep)
	d.Changed = []string{"a|b`c", "x\n<!-- evil -->", "[click](https://evil.example)", "<img src=x onerror=alert(1)>"}
	rc := Judge(d, isolated(ran("unit", 1, hostile)))
	c := Comment(rc)

	lines := lineBreaks.Split(c, -1)
	open := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "<details><summary>output (last ") {
			open = i + 2
			break
		}
	}
	if open < 0 || open >= len(lines) {
		t.Fatalf("Comment() has no output block:\n%s", c)
	}
	fence := lines[open]
	if !regexp.MustCompile("^`{3,}$").MatchString(fence) {
		t.Fatalf("line after the output summary is %q, want an opening fence", fence)
	}
	// CommonMark: a closing fence is up to 3 spaces, at least as many
	// backticks as the opener, then only spaces or tabs.
	closing := regexp.MustCompile("^ {0,3}`{" + fmt.Sprint(len(fence)) + ",}[ \t]*$")
	end := -1
	for i := open + 1; i < len(lines); i++ {
		if closing.MatchString(lines[i]) {
			end = i
			break
		}
	}
	if end < 0 {
		t.Fatalf("output fence never closes:\n%s", c)
	}
	inside := strings.Join(lines[open+1:end], "\n")
	for _, want := range []string{"before", "</details>", "OUTCOME=PASS", "<script>", "after ```` the end"} {
		if !strings.Contains(inside, want) {
			t.Errorf("fenced output lacks %q; the fence closed early at line %d:\n%s", want, end, inside)
		}
	}
	if got := lines[end+1 : end+3]; got[0] != "" || got[1] != "</details>" {
		t.Errorf("after the closing fence: %q, want a blank line and </details>", got)
	}
	if n := strings.Count(c, "<!--"); n != 1 {
		t.Errorf("Comment() has %d HTML comment openers, want only the marker", n)
	}
	if n := strings.Count(c, "-->"); n != 1 {
		t.Errorf("Comment() has %d HTML comment closers, want only the marker's", n)
	}
	if strings.ContainsAny(c, "\x00\x1b\u202e\r") {
		t.Errorf("Comment() passes control characters through")
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "- ") && !strings.HasPrefix(l, "- `") && !strings.HasPrefix(l, "- ...") {
			t.Errorf("path list line %q is not a code span", l)
		}
		if strings.HasPrefix(l, "OUTCOME=") && !strings.Contains(inside, l) {
			t.Errorf("forged line %q outside the fence", l)
		}
	}
	if !strings.Contains(c, "- ``a|b`c``\n") {
		t.Errorf("Comment() renders the backtick path wrongly:\n%s", c)
	}
}

func TestCommentFitsForgeLimit(t *testing.T) {
	big := strings.Repeat("flood line of output\n", 5<<20/21)
	paths := make([]string, 10000)
	violations := make([]gate.Violation, 10000)
	for i := range paths {
		paths[i] = fmt.Sprintf("pkg/module%04d/%s/file%04d.go", i, strings.Repeat("deep/", 20), i)
		violations[i] = gate.Violation{Path: paths[i], Rule: "recipe:pkg/**"}
	}

	judged := admitted(unitStep)
	judged.Changed = paths
	fail := Judge(judged, isolated(ran("unit", 1, big)))

	stop := Judge(refused(gate.RefusalProtectedPath, strings.Repeat("detail ", 1<<20), violations...), nil)
	stop.Gate.Changed = paths
	stop.Steps = []StepRecord{{Name: "unit", OutputTail: big, OutputBytes: int64(len(big))}}

	manySteps := fail
	manySteps.Steps = nil
	for i := range 10000 {
		manySteps.Steps = append(manySteps.Steps, StepRecord{Name: strings.Repeat("s", 300) + fmt.Sprint(i), OutputTail: big})
	}

	tests := []struct {
		name string
		rc   Receipt
		want []string
	}{
		{"fail with 5 MB output and 10,000 paths", fail, []string{"**vouch: FAIL** (STEP_FAILED)\n" + Marker(testHead) + "\n"}},
		{"stop with 5 MB tail, 10,000 paths and violations", stop, []string{
			"**vouch: STOP_AND_ASK** (PROTECTED_PATH_CHANGED)\n",
			"OUTCOME=STOP_AND_ASK\nREASON=PROTECTED_PATH_CHANGED\nDECISION=this PR changes vouch's trusted tooling; it will not be executed\nWHO=a maintainer with write access\nREPLY=none:",
			"EXECUTED=NO\n",
		}},
		{"10,000 steps", manySteps, []string{"**vouch: FAIL** (STEP_FAILED)\n", "does not fit"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Comment(tt.rc)
			if len(c) > MaxComment || utf8.RuneCountInString(c) > MaxComment {
				t.Errorf("Comment() is %d bytes, want at most %d", len(c), MaxComment)
			}
			if !strings.HasPrefix(c, tt.want[0]) {
				t.Errorf("Comment() starts %q, want %q", c[:min(len(c), 80)], tt.want[0])
			}
			for _, w := range tt.want[1:] {
				if !strings.Contains(c, w) {
					t.Errorf("Comment() lacks %q", w)
				}
			}
			if !utf8.ValidString(c) {
				t.Errorf("Comment() is not valid UTF-8")
			}
		})
	}
}

func TestCommentTrimsTailsBeforePaths(t *testing.T) {
	var steps []sandbox.StepResult
	var recipe []gate.Step
	for i := range 20 {
		name := fmt.Sprintf("s%d", i)
		recipe = append(recipe, gate.Step{Name: name})
		steps = append(steps, ran(name, 0, strings.Repeat("z", 8000)))
	}
	d := admitted(recipe...)
	c := Comment(Judge(d, isolated(steps...)))
	if len(c) > MaxComment {
		t.Fatalf("Comment() is %d bytes", len(c))
	}
	if !strings.Contains(c, "- `calc/add_test.go`") {
		t.Errorf("Comment() dropped the paths before the output tails")
	}
	if !strings.Contains(c, "output (last 1024 bytes)") {
		t.Errorf("Comment() did not trim the tails to 1024 bytes")
	}
}

func TestMarker(t *testing.T) {
	if got, want := Marker(testHead), "<!-- vouch:run head="+testHead+" -->"; got != want {
		t.Errorf("Marker(%q) = %q, want %q", testHead, got, want)
	}
	if got := Marker("abc --> <b>"); got != "<!-- vouch:run head=abcb -->" {
		t.Errorf("Marker(hostile) = %q, want only hex digits kept", got)
	}
}

func TestAskReplies(t *testing.T) {
	tests := []struct {
		reason    Reason
		wantReply string
	}{
		{ReasonUntrustedAuthor, "/verify approve abc1234"},
		{ReasonProtectedPathChanged, "none: no command unlocks this"},
		{ReasonNoTrustedRecipe, "none: a maintainer adds .vouch.yml to the base branch"},
		{ReasonInvalidRecipe, "none: a maintainer fixes .vouch.yml"},
		{ReasonUnsafeTree, "none: push a head without the entries"},
	}
	for _, tt := range tests {
		rc := Receipt{Outcome: StopAndAsk, Reason: tt.reason, Head: testHead, Detail: "line 1\nline 2"}
		a, ok := AskFor(rc)
		if !ok || !strings.HasPrefix(a.Reply, tt.wantReply) {
			t.Errorf("AskFor(%s).Reply = %q, want prefix %q", tt.reason, a.Reply, tt.wantReply)
		}
		for _, v := range []string{a.Decision, a.Who, a.Reply, a.Sentence} {
			if strings.ContainsAny(v, "\n\r") {
				t.Errorf("AskFor(%s) has a multi-line field %q", tt.reason, v)
			}
		}
	}
	if _, ok := AskFor(Receipt{Outcome: Pass}); ok {
		t.Errorf("AskFor(PASS) ok = true, want false")
	}
}

func FuzzComment(f *testing.F) {
	f.Add("scripts/check.sh", "step-argv:unit", hostile, "line 3: bad")
	f.Add("a`b", "|", "```", "<!--")
	f.Fuzz(func(t *testing.T, path, rule, output, detail string) {
		d := refused(gate.RefusalUnsafeTree, detail, gate.Violation{Path: path, Rule: rule})
		d.Changed = []string{path}
		for _, rc := range []Receipt{Judge(d, nil), Judge(admitted(unitStep), isolated(ran("unit", 1, output)))} {
			c := Comment(rc)
			if len(c) > MaxComment || !utf8.ValidString(c) {
				t.Fatalf("Comment() is %d bytes, valid UTF-8 %v", len(c), utf8.ValidString(c))
			}
			if strings.Count(c, "<!--") != 1 || strings.Count(c, "-->") != 1 {
				t.Fatalf("Comment() lets an HTML comment through:\n%s", c)
			}
			first := fmt.Sprintf("**vouch: %s** (%s)\n", rc.Outcome, rc.Reason)
			if !strings.HasPrefix(c, first) {
				t.Fatalf("Comment() starts %q, want %q", c[:min(len(c), 80)], first)
			}
			s := Summary(rc)
			if !strings.HasSuffix(s, fmt.Sprintf("\nOUTCOME=%s\nREASON=%s\n", rc.Outcome, rc.Reason)) || strings.Count(s, "\nOUTCOME=") != 1 {
				t.Fatalf("Summary() does not end with one OUTCOME and REASON:\n%s", s)
			}
		}
	})
}
