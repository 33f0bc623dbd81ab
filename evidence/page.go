package evidence

import (
	"embed"
	"fmt"
	"html/template"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
)

// MaxPageLog bounds the log an evidence page shows, in bytes: its tail is
// kept, like the output tails of the comment.
const MaxPageLog = 8 << 20

// MaxPageRuns bounds the rows of the list of runs.
const MaxPageRuns = 1000

// PageRun is one verification as the evidence pages show it: the receipt and
// what the service kept beside it.
type PageRun struct {
	// ID names the run in URLs: /runs/{ID}.
	ID string
	// Repo is the repository, "owner/name"; PR the pull request number (0
	// for a local run); Title the pull request's title, which its author
	// controls.
	Repo  string
	PR    int
	Title string
	// Receipt is the run's receipt.
	Receipt Receipt
	// Log is the run's full output, as bounded by the sandbox; the page
	// shows its last MaxPageLog bytes.
	Log []byte
	// Envelope is the signed receipt (Sign's DSSE envelope), or nil when
	// the run was not signed.
	Envelope []byte
	// CreatedAt is when the run was queued.
	CreatedAt time.Time
}

// PageFilter selects runs for RenderRuns; a zero field selects all.
type PageFilter struct {
	Repo    string
	PR      int
	Outcome Outcome
}

// Match reports whether run passes f.
func (f PageFilter) Match(run PageRun) bool {
	return (f.Repo == "" || run.Repo == f.Repo) &&
		(f.PR == 0 || run.PR == f.PR) &&
		(f.Outcome == "" || run.Receipt.Outcome == f.Outcome)
}

//go:embed templates/*.html.tmpl
var templateFS embed.FS

// pageTemplates are the evidence pages. html/template escapes every value
// for where it lands; values from the pull request are also made inert text
// (control and bidi characters escaped) before they get there.
var pageTemplates = template.Must(template.New("").Funcs(template.FuncMap{
	"line":  func(s string) string { return oneLine(s, maxPathShown) },
	"short": shortSHA,
	"yesno": func(b bool) string { return yesNo(b, "yes", "no") },
	"runURL": func(id string) string {
		return "/runs/" + url.PathEscape(id)
	},
	"time": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
}).ParseFS(templateFS, "templates/*.html.tmpl"))

// RenderRun writes the evidence page of run: everything the comment says,
// unbounded by the forge's limit, plus the log, the raw receipt, the signed
// envelope and the commands that check the run locally. It needs no
// JavaScript and loads nothing else.
func RenderRun(w io.Writer, run PageRun) error {
	v, err := newRunView(run)
	if err != nil {
		return fmt.Errorf("render run %q: %w", oneLine(run.ID, 64), err)
	}
	if err := pageTemplates.ExecuteTemplate(w, "run.html.tmpl", v); err != nil {
		return fmt.Errorf("render run %q: %w", oneLine(run.ID, 64), err)
	}
	return nil
}

// RenderRuns writes the list of the runs that pass filter, in the order
// given (the caller sorts, newest first), at most MaxPageRuns of them, with
// a form to change the filter.
func RenderRuns(w io.Writer, runs []PageRun, filter PageFilter) error {
	v := runsView{Filter: filter, Outcomes: []Outcome{Pass, Fail, StopAndAsk, Blocked, Error}}
	if filter.PR > 0 {
		v.PR = strconv.Itoa(filter.PR)
	}
	for _, r := range runs {
		if !filter.Match(r) {
			continue
		}
		if len(v.Runs) == MaxPageRuns {
			v.More = true
			break
		}
		v.Runs = append(v.Runs, rowView{PageRun: r, Tag: tagText(r.Receipt)})
	}
	if err := pageTemplates.ExecuteTemplate(w, "runs.html.tmpl", v); err != nil {
		return fmt.Errorf("render runs: %w", err)
	}
	return nil
}

// runsView is what runs.html.tmpl shows.
type runsView struct {
	Filter   PageFilter
	PR       string
	Outcomes []Outcome
	Runs     []rowView
	More     bool
}

// rowView is one row of the list.
type rowView struct {
	PageRun
	Tag string
}

// runView is what run.html.tmpl shows; every string is inert text.
type runView struct {
	Run         PageRun
	Receipt     Receipt
	Tag         string
	Sentence    string
	Ask         []string
	Detail      string
	Namespaces  []nsRow
	Limits      []limitRow
	Steps       []stepRow
	Log         string
	LogNote     string
	ReceiptJSON string
	Envelope    string
	ReceiptURL  string
	VerifyCmd   string
	ReceiptCmd  string
}

type nsRow struct {
	Kind, Host, Child string
	Differs           bool
}

type limitRow struct{ Name, Value, Mechanism string }

type stepRow struct {
	Name, Exit, Duration, Tests, Output string
	OutputBytes                         int64
	CPU                                 string
}

// newRunView prepares run for the template.
func newRunView(run PageRun) (runView, error) {
	rc := run.Receipt
	js, err := rc.JSON()
	if err != nil {
		return runView{}, err
	}
	v := runView{
		Run:         run,
		Receipt:     rc,
		Tag:         tagText(rc),
		Sentence:    outcomeSentence(rc.Outcome),
		Detail:      multiLine(rc.Detail),
		ReceiptJSON: jsonInert(string(js)),
		ReceiptURL:  "/runs/" + url.PathEscape(run.ID) + "/receipt.json",
		VerifyCmd: "vouch verify --repo " + shellQuote(cloneDir(run.Repo)) +
			" --base " + shellQuote(oneLine(rc.Base, maxValueShown)) + " --head " + shellQuote(oneLine(rc.Head, maxValueShown)),
		ReceiptCmd: "vouch receipt verify receipt.json --key vouch.pub",
	}
	if ask, ok := AskFor(rc); ok {
		v.Sentence = strings.ReplaceAll(ask.Sentence, "`", "")
		v.Ask = append([]string{"OUTCOME=" + oneLine(string(rc.Outcome), 64), "REASON=" + oneLine(string(rc.Reason), 64)}, ask.lines(rc.Executed)...)
	}
	if len(run.Envelope) > 0 {
		v.Envelope = jsonInert(strings.ToValidUTF8(string(run.Envelope), "\uFFFD"))
	}
	for _, k := range namespaceOrder(rc.Sandbox.Namespaces) {
		p := rc.Sandbox.Namespaces[k]
		v.Namespaces = append(v.Namespaces, nsRow{Kind: k, Host: p.Host, Child: p.Child, Differs: p.Host != "" && p.Child != "" && p.Host != p.Child})
	}
	for _, l := range rc.Sandbox.Limits {
		v.Limits = append(v.Limits, limitRow{Name: l.Name, Value: limitValue(l), Mechanism: l.Mechanism})
	}
	for _, s := range rc.Steps {
		row := stepRow{Name: s.Name, Exit: exitText(s), Duration: duration(s.DurationMS), Tests: testsText(s.Tests),
			Output: multiLine(s.OutputTail), OutputBytes: s.OutputBytes}
		if s.CPUMS > 0 {
			row.CPU = duration(s.CPUMS)
		}
		v.Steps = append(v.Steps, row)
	}
	log := run.Log
	if len(log) > MaxPageLog {
		v.LogNote = fmt.Sprintf("The log has %d bytes; the last %d are shown.", len(log), MaxPageLog)
		log = log[len(log)-MaxPageLog:]
	}
	v.Log = multiLine(Tail(log, MaxPageLog))
	return v, nil
}

// tagText is the verdict in words: "OUTCOME (REASON)", with NOT ISOLATED
// when the run was not isolated.
func tagText(rc Receipt) string {
	s := oneLine(string(rc.Outcome), 64) + " (" + oneLine(string(rc.Reason), 64) + ")"
	if notIsolated(rc) {
		s += " — " + NotIsolated
	}
	return s
}

// cloneDir is a directory name for a clone of repo in the local command.
func cloneDir(repo string) string {
	name := keepRunes(repo[strings.LastIndex(repo, "/")+1:], isRepoRune, 100)
	if name == "" || name == "." || name == ".." {
		return "path/to/clone"
	}
	return "path/to/" + name
}

// shellQuote quotes s for a POSIX shell unless it needs none.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// jsonInert escapes, as JSON \u escapes, every rune of the JSON text s that
// is not graphic (bidi overrides, zero-width and control characters), so
// that it reads as what it is; the JSON value is unchanged, since such runes
// can only occur inside strings.
func jsonInert(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if r == ' ' || r == '\n' || r == '\t' || unicode.IsGraphic(r) {
			b.WriteRune(r)
			continue
		}
		if r1, r2 := utf16.EncodeRune(r); r1 != unicode.ReplacementChar {
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
			continue
		}
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	return b.String()
}
