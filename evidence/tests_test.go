package evidence

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCountTests(t *testing.T) {
	tests := []struct {
		name   string
		format string
		file   string // under testdata/tests
		input  string // used when file is empty
		want   TestCounts
		wantOK bool
	}{
		// go: TestAdd + 3 subtests, TestFails/ok, TestB pass; TestFails and
		// TestFails/bad fail; TestSkipped skips.
		{name: "go json mixed with build failure", format: "go", file: "go_json_mixed.txt", want: TestCounts{6, 2, 1}, wantOK: true},
		{name: "go json with plain build errors interleaved", format: "go", file: "go_json_interleaved.txt", want: TestCounts{6, 2, 1}, wantOK: true},
		{name: "go json pass", format: "go", file: "go_json_pass.txt", want: TestCounts{1, 0, 0}, wantOK: true},
		{name: "go -v mixed with subtests", format: "go", file: "go_v_mixed.txt", want: TestCounts{6, 2, 1}, wantOK: true},
		{name: "go -v pass", format: "go", file: "go_v_pass.txt", want: TestCounts{1, 0, 0}, wantOK: true},
		{name: "go without -v shows only failures", format: "go", file: "go_plain_failures_only.txt", want: TestCounts{0, 2, 0}, wantOK: true},
		{name: "go without -v passing proves nothing", format: "go", file: "go_plain_pass_nov.txt"},
		{name: "go json without test events", format: "go", input: `{"Action":"start","Package":"p"}` + "\n" + `{"Action":"skip","Package":"p"}` + "\n"},
		{name: "go garbage json", format: "go", input: "{not json\n{\"Action\":\n"},

		{name: "pytest mixed", format: "pytest", file: "pytest_mixed.txt", want: TestCounts{67, 1, 2}, wantOK: true},
		{name: "pytest errors xfail xpass", format: "pytest", file: "pytest_errors_xfail.txt", want: TestCounts{6, 2, 1}, wantOK: true},
		{name: "pytest quiet", format: "pytest", file: "pytest_quiet_pass.txt", want: TestCounts{120, 0, 0}, wantOK: true},
		{name: "pytest colour", format: "pytest", file: "pytest_color.txt", want: TestCounts{4, 0, 0}, wantOK: true},
		{name: "pytest no tests ran", format: "pytest", file: "pytest_no_tests.txt"},
		{name: "pytest only deselected", format: "pytest", input: "===== 5 deselected in 0.01s =====\n"},
		{name: "pytest last summary wins", format: "pytest", input: "== 1 failed in 0.1s ==\n== 2 passed in 0.1s ==\n", want: TestCounts{2, 0, 0}, wantOK: true},
		{name: "pytest brief example", format: "pytest", input: "==== 67 passed, 2 skipped, 1 failed in 0.12s ====\n", want: TestCounts{67, 1, 2}, wantOK: true},
		{name: "pytest unknown word is not a summary", format: "pytest", input: "3 apples, 2 passed in 1s\n"},

		{name: "tap node nested", format: "tap", file: "tap_node.txt", want: TestCounts{3, 1, 2}, wantOK: true},
		{name: "tap perl", format: "tap", file: "tap_perl.txt", want: TestCounts{2, 1, 2}, wantOK: true},
		{name: "tap directive case and escape", format: "tap", file: "tap_skip_case.txt", want: TestCounts{2, 0, 2}, wantOK: true},
		{name: "tap bail out and missing planned tests", format: "tap", file: "tap_bail.txt", want: TestCounts{1, 10, 0}, wantOK: true},
		{name: "tap okay is not ok", format: "tap", input: "okay then\nnot okay\n"},

		{name: "plain last line with word", format: "plain", file: "plain_summary.txt", want: TestCounts{3, 0, 1}, wantOK: true},
		{name: "plain without word", format: "plain", file: "plain_no_word.txt", want: TestCounts{12, 1, 0}, wantOK: true},
		{name: "plain two words not allowed", format: "plain", file: "plain_two_words.txt"},
		{name: "plain zero tests", format: "plain", input: "0 passed, 0 failed\n"},
		{name: "plain crlf", format: "plain", input: "x\r\n2 passed, 1 failed, 3 skipped\r\n", want: TestCounts{2, 1, 3}, wantOK: true},
		{name: "plain huge number ignored", format: "plain", input: "99999999999999999999 passed, 0 failed\n"},

		{name: "unknown format", format: "junit", input: "1 passed, 0 failed\n"},
		{name: "empty format", format: "", input: "1 passed, 0 failed\n"},
		{name: "empty output", format: "go", input: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []byte(tt.input)
			if tt.file != "" {
				var err error
				if in, err = os.ReadFile(filepath.Join("testdata", "tests", tt.file)); err != nil {
					t.Fatal(err)
				}
			}
			got, ok := CountTests(tt.format, in)
			if ok != tt.wantOK {
				t.Errorf("CountTests(%q, %s) ok = %v, want %v", tt.format, tt.name, ok, tt.wantOK)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("CountTests(%q, %s) counts (-want +got):\n%s", tt.format, tt.name, diff)
			}
		})
	}
}

func TestCountTestsLongLine(t *testing.T) {
	// A line far longer than bufio.Scanner's default limit must not stop counting.
	out := strings.Repeat("x", 1<<20) + "\n--- PASS: TestA (0.00s)\n"
	got, ok := CountTests("go", []byte(out))
	if !ok || got != (TestCounts{Passed: 1}) {
		t.Errorf("CountTests(go, long line) = %+v, %v, want 1 passed", got, ok)
	}
}

func FuzzCountTests(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "tests", "*.txt"))
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		format := strings.SplitN(filepath.Base(name), "_", 2)[0]
		f.Add(format, b)
	}
	f.Add("tap", []byte("1..999999999999\nBail out!\n"))
	f.Add("go", []byte("{\"Action\":\"pass\",\"Test\":\"T\"}\n\x1b[1m--- FAIL: X"))
	f.Fuzz(func(t *testing.T, format string, output []byte) {
		c, ok := CountTests(format, output)
		if c.Passed < 0 || c.Failed < 0 || c.Skipped < 0 {
			t.Fatalf("CountTests(%q) = %+v: negative count", format, c)
		}
		if ok != (c.Total() > 0) {
			t.Fatalf("CountTests(%q) = %+v, ok=%v: ok must mean something was counted", format, c, ok)
		}
	})
}
