package evidence

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
)

// bigRun is a FAIL run with 10,000 changed paths whose one step printed
// 5 MB; raw also carries the whole 5 MB as the step's tail, as a receipt
// read back from anywhere might.
func bigRun(tb testing.TB) (judged, raw Receipt, output []byte) {
	tb.Helper()
	output = []byte(strings.Repeat("flood line of <!-- output --> ```\n", 5<<20/34))
	d := admitted(unitStep)
	d.Changed = make([]string, 10000)
	for i := range d.Changed {
		d.Changed[i] = fmt.Sprintf("pkg/module%04d/%s/file%04d.go", i, strings.Repeat("deep/", 20), i)
	}
	judged = Judge(d, isolated(ran("unit", 1, string(output))))
	raw = judged
	raw.Steps = []StepRecord{judged.Steps[0]}
	raw.Steps[0].OutputTail = string(output)
	return judged, raw, output
}

// BenchmarkComment10kPaths5MB renders the comment of a 10,000-path run
// whose step printed 5 MB, and checks it fits the forge with its verdict.
func BenchmarkComment10kPaths5MB(b *testing.B) {
	judged, raw, _ := bigRun(b)
	for _, bc := range []struct {
		name string
		rc   Receipt
	}{{"judged", judged}, {"raw-5MB-tail", raw}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var c string
			for b.Loop() {
				c = RunComment("owner/name", 12, bc.rc)
			}
			if len(c) > MaxComment || !strings.HasPrefix(c, "**vouch: FAIL** (STEP_FAILED)\n") {
				b.Fatalf("comment is %d bytes or lost its verdict: %.100q", len(c), c)
			}
			b.ReportMetric(float64(len(c)), "comment-bytes")
		})
	}
}

// BenchmarkRenderRun10kPaths5MB renders the evidence page of the same run
// with its 5 MB log.
func BenchmarkRenderRun10kPaths5MB(b *testing.B) {
	judged, _, output := bigRun(b)
	run := PageRun{ID: "1", Repo: "owner/name", PR: 12, Title: "big", Receipt: judged, Log: output, CreatedAt: testCreated}
	b.ReportAllocs()
	for b.Loop() {
		if err := RenderRun(io.Discard, run); err != nil {
			b.Fatal(err)
		}
	}
}

func TestBigRunPageAndComment(t *testing.T) {
	judged, raw, output := bigRun(t)
	for _, rc := range []Receipt{judged, raw} {
		c := RunComment("owner/name", 12, rc)
		if len(c) > MaxComment || !strings.HasPrefix(c, "**vouch: FAIL** (STEP_FAILED)\n"+RunMarker("owner/name", 12, testHead)+"\n") {
			t.Errorf("RunComment(big) is %d bytes or lost its verdict", len(c))
		}
	}
	var b bytes.Buffer
	if err := RenderRun(&b, PageRun{ID: "1", Receipt: judged, Log: output}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "file9999.go") || strings.Contains(b.String(), "<!-- output") {
		t.Error("RenderRun(big) lost paths or let the output's HTML comment through")
	}
}
