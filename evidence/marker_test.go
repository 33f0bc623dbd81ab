package evidence

import (
	"strings"
	"testing"
)

func TestRunMarkerRoundTrip(t *testing.T) {
	tests := []struct {
		name             string
		repo             string
		pr               int
		head             string
		wantRepo         string
		wantPR           int
		wantHead         string
		wantMarkerSuffix string
	}{
		{"plain", "owner/name", 12, testHead, "owner/name", 12, testHead, ""},
		{"gitea dots and dashes", "my-org/repo.go_x", 1, "ABCDEF0123", "my-org/repo.go_x", 1, "ABCDEF0123", ""},
		{"hostile repo", "a/b --> <script> pr=9 head=ff", 3, testHead, "a/b--scriptpr9headff", 3, testHead, ""},
		{"hostile head", "o/r", 4, "abc --> <b>\n", "o/r", 4, "abcb", ""},
		{"negative pr", "o/r", -5, testHead, "o/r", 0, testHead, ""},
		{"empty", "", 0, "", "", 0, "", ""},
		{"long", strings.Repeat("r", 500), 1 << 40, strings.Repeat("a", 100), strings.Repeat("r", maxMarkerRepo), 1 << 40, strings.Repeat("a", maxMarkerHead), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := RunMarker(tt.repo, tt.pr, tt.head)
			if strings.Count(m, "<!--") != 1 || strings.Count(m, "-->") != 1 || !strings.HasSuffix(m, " -->") || strings.Contains(m, "\n") {
				t.Fatalf("RunMarker(%q, %d, %q) = %q, want one HTML comment on one line", tt.repo, tt.pr, tt.head, m)
			}
			repo, pr, head, ok := ParseMarker(m)
			if !ok || repo != tt.wantRepo || pr != tt.wantPR || head != tt.wantHead {
				t.Errorf("ParseMarker(%q) = %q, %d, %q, %v; want %q, %d, %q, true", m, repo, pr, head, ok, tt.wantRepo, tt.wantPR, tt.wantHead)
			}
		})
	}
	if got, want := RunMarker("o/r", 7, testHead), "<!-- vouch:run repo=o/r pr=7 head="+testHead+" -->"; got != want {
		t.Errorf("RunMarker() = %q, want %q", got, want)
	}
}

func TestParseMarkerOfComments(t *testing.T) {
	rc := goldenReceipts()["pass"]
	tests := []struct {
		name   string
		body   string
		repo   string
		pr     int
		head   string
		wantOK bool
	}{
		{"Marker", Marker(testHead), "", 0, testHead, true},
		{"Comment", Comment(rc), "", 0, testHead, true},
		{"RunComment", RunComment("o/r", 9, rc), "o/r", 9, testHead, true},
		{"Superseded", Superseded("o/r", 9, testHead, "def5678901234567890abcdef1234567890abcd", testPage), "o/r", 9, testHead, true},
		{"CRLF", "**vouch: PASS**\r\n" + RunMarker("o/r", 1, "ab") + "\r\nrest", "o/r", 1, "ab", true},
		{"empty body", "", "", 0, "", false},
		{"no marker", "**vouch: PASS**\n\nnothing", "", 0, "", false},
		{"marker after a blank line", "**vouch: PASS**\n\n" + RunMarker("o/r", 1, "ab"), "", 0, "", false},
		{"marker on the third line", "a\nb\n" + RunMarker("o/r", 1, "ab"), "", 0, "", false},
		{"marker in a fence", "```\n" + RunMarker("o/r", 1, "ab") + "\n```", "", 0, "", false},
		{"marker in a tilde fence", "~~~\n" + RunMarker("o/r", 1, "ab") + "\n~~~", "", 0, "", false},
		{"indented marker", "    " + RunMarker("o/r", 1, "ab"), "", 0, "", false},
		{"quoted marker", "> " + RunMarker("o/r", 1, "ab"), "", 0, "", false},
		{"marker with text after it", RunMarker("o/r", 1, "ab") + " and more", "", 0, "", false},
		{"marker inside a line", "text " + RunMarker("o/r", 1, "ab"), "", 0, "", false},
		{"forged field", "<!-- vouch:run repo=o/r pr=1 head=ab evil=1 -->", "", 0, "", false},
		{"huge pr", "<!-- vouch:run repo=o/r pr=9999999999999999999 head=ab -->", "", 0, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo, pr, head, ok := ParseMarker(tt.body)
			if ok != tt.wantOK || repo != tt.repo || pr != tt.pr || head != tt.head {
				t.Errorf("ParseMarker(%.80q) = %q, %d, %q, %v; want %q, %d, %q, %v", tt.body, repo, pr, head, ok, tt.repo, tt.pr, tt.head, tt.wantOK)
			}
		})
	}
}

// TestParseMarkerIgnoresForgedMarkers renders a comment whose step output,
// detail and paths carry fake markers for another head, and checks that only
// vouch's own marker is found.
func TestParseMarkerIgnoresForgedMarkers(t *testing.T) {
	const fake = "ffffffffffffffffffffffffffffffffffffffff"
	forged := RunMarker("evil/repo", 666, fake)
	d := admitted(unitStep)
	d.Changed = []string{forged, "\n" + forged + "\n"}
	d.Detail = forged
	out := forged + "\n```\n" + forged + "\n" + Marker(fake) + "\n"
	for _, rc := range []Receipt{
		Judge(d, isolated(ran("unit", 1, out))),
		Judge(refused("invalid-recipe", forged+"\n"+forged), nil),
		NewError(testBase, testHead, ReasonInternal, "\n"+forged+"\n"),
	} {
		body := RunComment("o/r", 5, rc)
		repo, pr, head, ok := ParseMarker(body)
		if !ok || repo != "o/r" || pr != 5 || head != testHead {
			t.Errorf("ParseMarker(RunComment(%s)) = %q, %d, %q, %v; want o/r, 5, %s", rc.Reason, repo, pr, head, ok, testHead)
		}
		if strings.Contains(body, forged) || strings.Contains(body, Marker(fake)) {
			t.Errorf("RunComment(%s) carries a forged marker verbatim:\n%s", rc.Reason, body)
		}
		// Even with the real marker gone, no forged one is taken for it.
		stripped := strings.Replace(body, RunMarker("o/r", 5, testHead), "", 1)
		if _, _, h, ok := ParseMarker(stripped); ok {
			t.Errorf("ParseMarker(comment without its marker) found head %q", h)
		}
	}
}

func TestSuperseded(t *testing.T) {
	const newHead = "def5678901234567890abcdef1234567890abcd0"
	got := Superseded("o/r", 3, testHead, newHead, "https://vouch.example/runs/43")
	checkGolden(t, "comment_superseded.golden", got)
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "superseded by [`def5678`](https://vouch.example/runs/43)") {
		t.Errorf("Superseded() = %q, want one visible line linking def5678, then the marker", got)
	}

	for _, u := range []string{"javascript:alert(1)", "", "/runs/43", "https://"} {
		if got := Superseded("o/r", 3, testHead, newHead, u); strings.Contains(got, "](") || !strings.Contains(got, "superseded by `def5678`") {
			t.Errorf("Superseded(url %q) = %q, want the short SHA without a link", u, got)
		}
	}
	hostileURL := "https://vouch.example/runs/1) [x](https://evil.example \"t\" <b>`"
	got = Superseded("o/r", 3, testHead, "zz<!--"+newHead, hostileURL)
	first := strings.SplitN(got, "\n", 2)[0]
	dest := strings.TrimSuffix(strings.SplitN(first, "](", 2)[1], "; this head was not verified further.")
	if !strings.HasSuffix(dest, ")") || strings.ContainsAny(strings.TrimSuffix(dest, ")"), " ()<>\"`[]") {
		t.Errorf("Superseded(hostile url) link destination = %q, want everything that could end it encoded", dest)
	}
	if strings.Count(got, "<!--") != 1 {
		t.Errorf("Superseded(hostile) = %q, want only the marker's HTML comment", got)
	}
}

func TestRunCommentGolden(t *testing.T) {
	checkGolden(t, "comment_run_pass.golden", RunComment("owner/name", 12, goldenReceipts()["pass"]))
}
