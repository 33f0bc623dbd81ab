package evidence

import (
	"bytes"
	"context"
	"encoding/json"
	"html"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// testCreated is the fixed time of the page fixtures.
var testCreated = time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)

// pwn is PR-controlled text that runs script if it is not escaped.
const pwn = "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\"><b>bold</b>"

// pageRun returns a run of rc as the service would keep it.
func pageRun(t testing.TB, id string, rc Receipt, signed bool) PageRun {
	t.Helper()
	run := PageRun{ID: id, Repo: "owner/name", PR: 12, Title: "Add Sub to calc", Receipt: rc, CreatedAt: testCreated}
	for _, s := range rc.Steps {
		run.Log = append(run.Log, "== "+s.Name+"\n"+s.OutputTail...)
	}
	if signed {
		run.Envelope = mustSign(t, rc, testKey(1))
	}
	return run
}

// hostileRun is a failing run whose title, paths, detail and output are all
// hostile HTML.
func hostileRun(t testing.TB) PageRun {
	d := admitted(unitStep)
	d.Changed = []string{"calc/" + pwn + ".go", "x\u202eog.exe", "<a href=javascript:alert(1)>click</a>"}
	rc := Judge(d, isolated(ran("unit", 1, "before\n"+pwn+"\n</pre></details><script>alert(1)</script>\n\x1b[31mred\x1b[0m\n"+goFail)))
	run := pageRun(t, "7", rc, true)
	run.Title = "Fix " + pwn
	run.Repo = "owner/name"
	run.Log = append(run.Log, "\n"+pwn+"\n"...)
	return run
}

// renderRun renders run or fails the test.
func renderRun(t testing.TB, run PageRun) string {
	t.Helper()
	var b bytes.Buffer
	if err := RenderRun(&b, run); err != nil {
		t.Fatalf("RenderRun() error: %v", err)
	}
	return b.String()
}

func TestPageGolden(t *testing.T) {
	receipts := goldenReceipts()
	for _, name := range []string{"pass", "fail_step_failed", "stop_protected_path", "stop_untrusted_author", "blocked_isolation_unproven", "pass_trusted_development", "error_internal"} {
		t.Run(name, func(t *testing.T) {
			checkGolden(t, "page_run_"+name+".golden.html", renderRun(t, pageRun(t, "run-"+name, receipts[name], name != "error_internal")))
		})
	}
	t.Run("hostile", func(t *testing.T) {
		checkGolden(t, "page_run_hostile.golden.html", renderRun(t, hostileRun(t)))
	})
	t.Run("runs", func(t *testing.T) {
		var runs []PageRun
		for i, name := range []string{"pass", "fail_step_failed", "stop_untrusted_author", "blocked_isolation_unproven"} {
			r := pageRun(t, "run-"+name, receipts[name], false)
			r.PR = 10 + i
			runs = append(runs, r)
		}
		runs = append(runs, hostileRun(t))
		var b bytes.Buffer
		if err := RenderRuns(&b, runs, PageFilter{}); err != nil {
			t.Fatal(err)
		}
		checkGolden(t, "page_runs.golden.html", b.String())
	})
}

func TestPageShowsTheEvidence(t *testing.T) {
	rc := goldenReceipts()["stop_protected_path"]
	page := renderRun(t, pageRun(t, "9", rc, true))
	ask, _ := AskFor(rc)
	for _, want := range []string{
		"STOP_AND_ASK (PROTECTED_PATH_CHANGED)", testBase, testHead, testMergeBase, testRecipeSHA,
		"scripts/check.sh", "step-argv:unit", "DECISION=" + html.EscapeString(ask.Decision), "EXECUTED=NO",
		"vouch receipt verify receipt.json --key vouch.pub",
		"vouch verify --repo path/to/name --base " + testBase + " --head " + testHead,
		`href="/runs/9/receipt.json"`, `&#34;outcome&#34;: &#34;STOP_AND_ASK&#34;`, "payloadType",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("RenderRun(stop) lacks %q", want)
		}
	}
	td := renderRun(t, pageRun(t, "td", goldenReceipts()["pass_trusted_development"], false))
	if !strings.Contains(td, "PASS (ALL_STEPS_PASSED) — NOT ISOLATED") || !strings.Contains(td, "This receipt is not signed") {
		t.Errorf("RenderRun(trusted-development, unsigned) does not say NOT ISOLATED and unsigned")
	}
}

func TestPageEscapesHostileText(t *testing.T) {
	run := hostileRun(t)
	html := renderRun(t, run)
	for _, bad := range []string{"<script", "<img", "<b>bold", "<a href=javascript", "\x1b", "\u202e", "</pre></details><script"} {
		if strings.Contains(html, bad) {
			t.Errorf("RenderRun(hostile) contains %q unescaped", bad)
		}
	}
	if n := strings.Count(html, "&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;"); n < 4 {
		t.Errorf("RenderRun(hostile) shows the title, path, output and log's script as text %d times, want at least 4", n)
	}
	var b bytes.Buffer
	if err := RenderRuns(&b, []PageRun{run}, PageFilter{Repo: pwn}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "<script") {
		t.Errorf("RenderRuns(hostile filter) contains <script unescaped")
	}
}

func TestPageRunsFilter(t *testing.T) {
	receipts := goldenReceipts()
	a := pageRun(t, "a", receipts["pass"], false)
	b := pageRun(t, "b", receipts["fail_step_failed"], false)
	b.PR = 13
	c := pageRun(t, "c", receipts["pass"], false)
	c.Repo = "other/repo"
	runs := []PageRun{a, b, c}
	tests := []struct {
		filter PageFilter
		want   []string
	}{
		{PageFilter{}, []string{"a", "b", "c"}},
		{PageFilter{Repo: "owner/name"}, []string{"a", "b"}},
		{PageFilter{Repo: "owner/name", PR: 13}, []string{"b"}},
		{PageFilter{Outcome: Pass}, []string{"a", "c"}},
		{PageFilter{Outcome: Blocked}, nil},
	}
	link := regexp.MustCompile(`href="/runs/([^"]+)"`)
	for _, tt := range tests {
		var buf bytes.Buffer
		if err := RenderRuns(&buf, runs, tt.filter); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range link.FindAllStringSubmatch(buf.String(), -1) {
			got = append(got, m[1])
		}
		if strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("RenderRuns(%+v) links %v, want %v", tt.filter, got, tt.want)
		}
		if len(tt.want) == 0 && !strings.Contains(buf.String(), "No runs match.") {
			t.Errorf("RenderRuns(%+v) does not say that no runs match", tt.filter)
		}
	}
}

func TestPageBoundsTheLog(t *testing.T) {
	run := pageRun(t, "big", goldenReceipts()["pass"], false)
	run.Log = append(bytes.Repeat([]byte("x"), MaxPageLog), "THE-END\n"...)
	html := renderRun(t, run)
	if !strings.Contains(html, "THE-END") || !strings.Contains(html, "the last 8388608 are shown") {
		t.Error("RenderRun(big log) lost the log's tail or does not say it was cut")
	}
	if len(html) > MaxPageLog+64<<10 {
		t.Errorf("RenderRun(big log) is %d bytes, want the log bounded to %d", len(html), MaxPageLog)
	}
}

// requireChromium returns Debian's chromium, skipping the test when it is
// missing, unless CI=true, where its absence is a failure.
func requireChromium(t testing.TB) string {
	t.Helper()
	const path = "/usr/bin/chromium"
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("chromium is required under CI=true (apt-get install chromium): %v", err)
		}
		t.Skipf("chromium not installed: %v", err)
	}
	return path
}

// chromium runs headless chromium with args and the page's URL and returns
// its stdout.
func chromium(t *testing.T, bin, url string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, append(append(base, args...), url)...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\nstderr:\n%s", args, err, stderr.String())
	}
	return stdout.String()
}

// TestPageInChromium opens the evidence page of a hostile run in headless
// Chromium, checks what it rendered and takes a screenshot.
func TestPageInChromium(t *testing.T) {
	t.Parallel()
	bin := requireChromium(t)
	run := hostileRun(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/runs/7" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if err := RenderRun(w, run); err != nil {
			t.Errorf("RenderRun() error: %v", err)
		}
	}))
	t.Cleanup(srv.Close)
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Fatalf("test server at %s, want 127.0.0.1", srv.URL)
	}
	url := srv.URL + "/runs/7"

	dom := chromium(t, bin, url, "--dump-dom")
	title := regexp.MustCompile(`(?s)<title>(.*?)</title>`).FindStringSubmatch(dom)
	if title == nil || !strings.HasPrefix(title[1], "vouch FAIL (STEP_FAILED) — owner/name #12 abc1234") {
		t.Errorf("document title = %q, want it unchanged by the page's text (a script ran?)", title)
	}
	for _, want := range []string{
		"FAIL (STEP_FAILED)", testBase, testMergeBase, testHead, testRecipeSHA,
		`<code>unit</code>`, "<td>1</td>", "--- FAIL: TestSub", "Sub(3, 1) = 4, want 2",
		"Fix &lt;script&gt;document.title='pwned'&lt;/script&gt;&lt;img src=x onerror=\"document.title='pwned'\"&gt;&lt;b&gt;bold&lt;/b&gt;",
		"&lt;/pre&gt;&lt;/details&gt;&lt;script&gt;alert(1)&lt;/script&gt;",
		"vouch receipt verify receipt.json --key vouch.pub",
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered DOM lacks %q", want)
		}
	}
	for _, bad := range []string{"<script", "<img", "<b>bold", "pwned</title>"} {
		if strings.Contains(dom, bad) {
			t.Errorf("rendered DOM contains %q: PR text became markup", bad)
		}
	}
	if t.Failed() {
		t.Logf("DOM:\n%s", dom)
	}

	shot := filepath.Join(t.TempDir(), "page.png")
	chromium(t, bin, url, "--screenshot="+shot, "--window-size=1280,2000", "--hide-scrollbars")
	png, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	if len(png) < 10<<10 || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("screenshot is %d bytes, not a plausible PNG", len(png))
	}
	if dir := os.Getenv("VOUCH_KEEP_SCREENSHOT"); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "page.png"), png, 0o644); err != nil {
			t.Error(err)
		}
	}
}

func TestJSONInert(t *testing.T) {
	rc := hostileRun(t).Receipt
	rc.Detail = "\u202e\x00\u200b\U000e0041 ok"
	js, err := rc.JSON()
	if err != nil {
		t.Fatal(err)
	}
	inert := jsonInert(string(js))
	if strings.ContainsAny(inert, "\u202e\x00\u200b\U000e0041\x1b") {
		t.Errorf("jsonInert() kept an invisible rune: %q", inert)
	}
	var a, b any
	if err := json.Unmarshal(js, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(inert), &b); err != nil {
		t.Fatalf("jsonInert() is not JSON: %v", err)
	}
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("jsonInert() changed the JSON value (-want +got):\n%s", diff)
	}
}
