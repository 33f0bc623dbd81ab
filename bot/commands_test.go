package bot

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseCommands(t *testing.T) {
	verify := Command{Kind: CommandVerify}
	approve := Command{Kind: CommandApprove}
	help := Command{Kind: CommandHelp}
	unknown := func(arg string) Command { return Command{Kind: CommandUnknown, Arg: arg} }
	tests := []struct {
		name string
		body string
		want []Command
	}{
		{"empty", "", nil},
		{"verify", "/verify", []Command{verify}},
		{"approve", "/verify approve", []Command{approve}},
		{"help", "/verify help", []Command{help}},
		{"subcommand case", "/verify Approve", []Command{approve}},
		{"unknown", "/verify x", []Command{unknown("x")}},
		{"unknown several words", "/verify approve now please", []Command{unknown("approve now please")}},
		{"approve a named head", "/verify approve ABC1234", []Command{{Kind: CommandApprove, Arg: "abc1234"}}},
		{"approve a full head", "/verify approve " + headA, []Command{{Kind: CommandApprove, Arg: headA}}},
		{"approve too short a name", "/verify approve abc123", []Command{unknown("approve abc123")}},
		{"approve a non-hex name", "/verify approve main", []Command{unknown("approve main")}},
		{"leading and trailing whitespace", "   /verify approve  \t ", []Command{approve}},
		{"tab between", "/verify\tapprove", []Command{approve}},
		{"crlf", "LGTM\r\n/verify approve\r\n", []Command{approve}},
		{"after text lines", "Looks good.\n/verify\nthanks", []Command{verify}},
		{"one per line", "/verify help\n\n/verify approve\n/verify", []Command{help, approve, verify}},
		{"mid sentence", "please /verify this", nil},
		{"glued", "/verifyapprove", nil},
		{"punctuated", "/verify, please", nil},
		{"other slash command", "/retest\n/lgtm", nil},
		{"case of command word", "/VERIFY", nil},
		{"fence backticks", "```\n/verify\n```", nil},
		{"fence tildes", "~~~\n/verify\n~~~", nil},
		{"fence long", "`````\n/verify\n```\n/verify approve\n`````", nil},
		{"fence with info", "```sh\n/verify\n```\n/verify help", []Command{help}},
		{"fence indented 3", "   ```\n/verify\n   ```", nil},
		{"fence tilde not closed by backticks", "~~~\n```\n/verify\n~~~\n/verify help", []Command{help}},
		{"fence unclosed", "```\n/verify", nil},
		{"fence closer indented 4 does not close", "```\n    ```\n/verify\n```", nil},
		{"after a fence", "```\ncode\n```\n/verify approve", []Command{approve}},
		{"inline backticks are not a fence", "```x``` text\n/verify", []Command{verify}},
		{"indented code", "text\n\n    /verify", nil},
		{"indented by tab", "text\n\n\t/verify", nil},
		{"indented 4 continues a paragraph", "text\n    /verify", nil},
		{"block quote", "> /verify", nil},
		{"block quote indented", "  > /verify approve", nil},
		{"nested quote", "> > /verify", nil},
		{"quote lazy continuation", "> someone said\n/verify", nil},
		{"after a quote", "> someone said\n\n/verify", []Command{verify}},
		{"html comment", "<!-- /verify -->", nil},
		{"html comment block", "<!--\n/verify\n-->\n\n/verify help", []Command{help}},
		{"html comment inline", "note <!--\n/verify\n--> done", nil},
		{"code span across lines", "a `\n/verify\n` b", nil},
		{"list item", "- /verify", nil},
		{"heading", "# /verify", nil},
		{"fence in list item", "- ```\n  /verify\n  ```", nil},
		{"link text", "[\n/verify](https://example.org)", nil},
		{"control characters dropped from arg", "/verify \x01bad`arg", []Command{unknown("badarg")}},
		{"long arg capped", "/verify " + strings.Repeat("a", 100), []Command{unknown(strings.Repeat("a", maxCommandArg) + "…")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ParseCommands(tt.body)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseCommands(%q) (-want +got):\n%s", tt.body, diff)
			}
		})
	}
}

// fenceFor returns a fence of ch that no line of body can close.
func fenceFor(body string, ch byte) string {
	longest, run := 0, 0
	for i := 0; i < len(body); i++ {
		if body[i] == ch {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return strings.Repeat(string(ch), max(3, longest+1))
}

func FuzzParseCommands(f *testing.F) {
	for _, s := range []string{
		"/verify", "/verify approve\n/verify help", "```\n/verify\n```", "> /verify",
		"<!--\n/verify\n-->", "    /verify", "- ```\n  /verify", "~~~~\n/verify x\n~~~",
		"a\r/verify\rb", "/verify \x00", "\t/verify", "`/verify`", "*/verify*",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		cmds := ParseCommands(body) // must not panic
		for _, c := range cmds {
			if c.Kind < CommandVerify || c.Kind > CommandUnknown {
				t.Fatalf("ParseCommands(%q) kind %v", body, c.Kind)
			}
			if c.Kind != CommandUnknown && c.Arg != "" {
				t.Fatalf("ParseCommands(%q) = %+v: arg on a known command", body, c)
			}
			if len([]rune(c.Arg)) > maxCommandArg+1 || strings.ContainsAny(c.Arg, "`\n\r") {
				t.Fatalf("ParseCommands(%q) arg %q not cleaned", body, c.Arg)
			}
		}
		if len(cmds) > strings.Count(body, commandWord) {
			t.Fatalf("ParseCommands(%q) = %d commands from %d occurrences", body, len(cmds), strings.Count(body, commandWord))
		}
		// Nothing inside a fence is ever a command, whatever the fence holds.
		for _, ch := range []byte{'`', '~'} {
			fence := fenceFor(body, ch)
			if got := ParseCommands(fence + "\n" + body + "\n" + fence); len(got) != 0 {
				t.Fatalf("ParseCommands(fenced %q) = %+v, want none", body, got)
			}
			if got := ParseCommands(fence + "\n" + body + "\n" + fence + "\n\n/verify help"); len(got) != 1 || got[0].Kind != CommandHelp {
				t.Fatalf("ParseCommands(fenced %q then /verify help) = %+v, want only help", body, got)
			}
		}
	})
}
