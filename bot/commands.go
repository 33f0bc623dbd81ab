package bot

import (
	"bytes"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// CommandKind is what a comment command asks for.
type CommandKind int

// The commands of the contract.
const (
	// CommandVerify (`/verify`) verifies the current head again.
	CommandVerify CommandKind = iota + 1
	// CommandApprove (`/verify approve`) lets an untrusted author's current
	// head run; it binds to that head SHA.
	CommandApprove
	// CommandHelp (`/verify help`) asks for the list of commands.
	CommandHelp
	// CommandUnknown is `/verify` followed by anything else; Arg says what.
	CommandUnknown
)

func (k CommandKind) String() string {
	switch k {
	case CommandVerify:
		return "verify"
	case CommandApprove:
		return "approve"
	case CommandHelp:
		return "help"
	case CommandUnknown:
		return "unknown"
	}
	return "CommandKind(?)"
}

// MarshalText writes the kind's name (for queued jobs).
func (k CommandKind) MarshalText() ([]byte, error) {
	if k < CommandVerify || k > CommandUnknown {
		return nil, fmt.Errorf("command kind %d", int(k))
	}
	return []byte(k.String()), nil
}

// UnmarshalText reads a kind's name.
func (k *CommandKind) UnmarshalText(b []byte) error {
	for c := CommandVerify; c <= CommandUnknown; c++ {
		if string(b) == c.String() {
			*k = c
			return nil
		}
	}
	return fmt.Errorf("unknown command kind %q", b)
}

// Command is one command found in a comment.
type Command struct {
	Kind CommandKind `json:"kind"`
	// Arg is what followed `/verify` in an unknown command, whitespace
	// collapsed, control characters dropped, at most maxCommandArg runes.
	Arg string `json:"arg,omitempty"`
}

// HelpText is the bot's answer to `/verify help` and to unknown commands.
const HelpText = "vouch commands (one per line, outside code blocks and quotes):\n\n" +
	"- `/verify` — verify the current head again (trusted users)\n" +
	"- `/verify approve <sha>` — let this pull request's current head, named by at least 7 hex digits of its SHA, run; the approval is bound to that commit and lapses on the next push (maintainers; on Gitea and Forgejo `/verify approve` alone names the head the pull request had when you commented)\n" +
	"- `/verify help` — show this help\n"

const (
	commandWord   = "/verify"
	maxCommandArg = 64
	// maxCommentScan bounds the text ParseCommands reads: a longer comment
	// has no commands. Markdown parsing is superlinear on hostile input
	// (64 KiB of `*a_` took seconds with every inline parser on, 64 KiB of
	// "`a" still 0.6 s with code spans alone), and any
	// commenter can post it.
	maxCommentScan = 16 << 10
)

// markdown is CommonMark's block structure, as Gitea and GitHub render
// comments, with only the inline parsers that can hide a line: code spans
// and raw HTML. Emphasis and links never hide a line's first token, and
// leaving them out keeps parsing fast on hostile input.
var markdown = goldmark.New(goldmark.WithParser(parser.NewParser(
	parser.WithBlockParsers(parser.DefaultBlockParsers()...),
	parser.WithInlineParsers(
		util.Prioritized(parser.NewCodeSpanParser(), 100),
		util.Prioritized(parser.NewRawHTMLParser(), 400),
	),
	parser.WithParagraphTransformers(parser.DefaultParagraphTransformers()...),
)))

// ParseCommands returns the commands in a comment body, in order. A command
// is a line of a top-level paragraph whose first token is `/verify`, so
// nothing inside a fenced or indented code block, a block quote (lazy
// continuation lines included), a list, a heading, an HTML block or comment,
// a code span or a link counts, and `/verify` in mid-sentence does not
// either. The body is read as CommonMark, the way the forge renders it.
func ParseCommands(body string) []Command {
	if len(body) > maxCommentScan || !mayHoldCommand(body) || deeplyNested(body) {
		return nil
	}
	src := []byte(strings.ReplaceAll(strings.ReplaceAll(body, "\r\n", "\n"), "\r", "\n"))
	doc := markdown.Parser().Parse(text.NewReader(src))
	var cmds []Command
	for n := doc.FirstChild(); n != nil; n = n.NextSibling() {
		para, ok := n.(*ast.Paragraph)
		if !ok {
			continue
		}
		for c := para.FirstChild(); c != nil; c = c.NextSibling() {
			t, ok := c.(*ast.Text)
			if !ok || !startsLine(src, t.Segment.Start) {
				continue
			}
			line := src[t.Segment.Start:]
			if i := bytes.IndexByte(line, '\n'); i >= 0 {
				line = line[:i]
			}
			if cmd, ok := parseCommandLine(string(line)); ok {
				cmds = append(cmds, cmd)
			}
		}
	}
	return cmds
}

// startsLine reports whether only whitespace, less than an indented code
// block's four columns of it, precedes offset on its line. (A line indented
// further that continues a paragraph is not a command line either.)
func startsLine(src []byte, offset int) bool {
	start := offset
	for start > 0 && src[start-1] != '\n' {
		start--
	}
	col := 0
	for _, c := range src[start:offset] {
		switch c {
		case ' ':
			col++
		case '\t':
			col += 4 - col%4
		default:
			return false
		}
	}
	return col < 4
}

// parseCommandLine reads one line whose first token may be `/verify`.
func parseCommandLine(line string) (Command, bool) {
	fields := strings.Fields(line)
	if len(fields) == 0 || fields[0] != commandWord {
		return Command{}, false
	}
	args := fields[1:]
	switch {
	case len(args) == 0:
		return Command{Kind: CommandVerify}, true
	case len(args) == 1 && strings.EqualFold(args[0], "approve"):
		return Command{Kind: CommandApprove}, true
	case len(args) == 2 && strings.EqualFold(args[0], "approve") && isHeadPrefix(args[1]):
		// `/verify approve abc1234`: the approval names the head it means.
		return Command{Kind: CommandApprove, Arg: strings.ToLower(args[1])}, true
	case len(args) == 1 && strings.EqualFold(args[0], "help"):
		return Command{Kind: CommandHelp}, true
	}
	return Command{Kind: CommandUnknown, Arg: cleanArg(strings.Join(args, " "))}, true
}

// isHeadPrefix reports whether s can abbreviate a commit id: 7 to 64 hex
// digits.
func isHeadPrefix(s string) bool {
	if len(s) < 7 || len(s) > 64 {
		return false
	}
	for _, c := range strings.ToLower(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// cleanArg keeps an unknown command's argument safe to quote in a reply.
func cleanArg(s string) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if n == maxCommandArg {
			b.WriteString("…")
			break
		}
		if r == utf8.RuneError || unicode.IsControl(r) || r == '`' {
			continue
		}
		b.WriteRune(r)
		n++
	}
	return b.String()
}

// mayHoldCommand is a cheap pre-filter: some line starts, after at most
// three spaces, with the command word.
func mayHoldCommand(body string) bool {
	for line := range strings.Lines(body) {
		trimmed := strings.TrimLeft(line, " ")
		if len(line)-len(trimmed) <= 3 && strings.HasPrefix(trimmed, commandWord) {
			return true
		}
	}
	return false
}

// maxBlockMarkers bounds the container markers (quote and list markers and
// their spaces) at the start of a line; deeper nesting makes block parsing
// quadratic (64 KiB of `>` took seconds), and no real comment needs it. Such
// a comment is read as holding no commands.
const maxBlockMarkers = 64

// deeplyNested reports whether some line starts with more than
// maxBlockMarkers container markers.
func deeplyNested(body string) bool {
	for line := range strings.Lines(body) {
		n := 0
		for _, c := range line {
			if !strings.ContainsRune(" \t>-*+.0123456789)", c) {
				break
			}
			if n++; n > maxBlockMarkers {
				return true
			}
		}
	}
	return false
}
