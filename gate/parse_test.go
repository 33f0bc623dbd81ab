package gate_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"vouch.dev/vouch/gate"
)

func TestParseRecipe(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		want    *gate.Recipe
		wantErr string // substring of the error; "" means success
		line    int
	}{
		{
			name: "full",
			yaml: `version: 1
protected:
  - Makefile
  - scripts/**
steps:
  - name: unit
    run: ["go", "test", "./..."]
    timeout: 10m
    tests: go
    allow_skips: true
  - name: lint
    run: [./lint.sh]
env: {GOFLAGS: "-mod=vendor", N: 3}
toolchains: [go]
limits: {memory: 1GiB, pids: 256, tmp: 256MiB, output: 512KiB}
`,
			want: &gate.Recipe{
				Version:   1,
				Protected: []string{"Makefile", "scripts/**"},
				Steps: []gate.Step{
					{Name: "unit", Run: []string{"go", "test", "./..."}, Timeout: 10 * time.Minute, Tests: "go", AllowSkips: true},
					{Name: "lint", Run: []string{"./lint.sh"}},
				},
				Env:        map[string]string{"GOFLAGS": "-mod=vendor", "N": "3"},
				Toolchains: []string{"go"},
				Limits:     gate.Limits{Memory: 1 << 30, Pids: 256, Tmp: 256 << 20, Output: 512 << 10},
			},
		},
		{
			name: "minimal, plain byte size",
			yaml: "version: 1\nsteps: [{name: t, run: [make]}]\nlimits: {output: 4096}\n",
			want: &gate.Recipe{Version: 1, Steps: []gate.Step{{Name: "t", Run: []string{"make"}}}, Limits: gate.Limits{Output: 4096}},
		},
		{name: "unknown top key", yaml: "version: 1\nsteps: [{name: t, run: [make]}]\nstpes: []\n", wantErr: `unknown key "stpes"`, line: 3},
		{name: "unknown step key", yaml: "version: 1\nsteps:\n  - name: t\n    run: [make]\n    tiemout: 1m\n", wantErr: `unknown key "tiemout"`, line: 5},
		{name: "duplicate key", yaml: "version: 1\nversion: 1\nsteps: [{name: t, run: [make]}]\n", wantErr: `duplicate key "version"`, line: 2},
		{name: "bad version", yaml: "version: 2\nsteps: [{name: t, run: [make]}]\n", wantErr: "unsupported version 2", line: 1},
		{name: "version as string", yaml: "version: \"1\"\nsteps: [{name: t, run: [make]}]\n", wantErr: "not an integer", line: 1},
		{name: "missing version", yaml: "steps: [{name: t, run: [make]}]\n", wantErr: `missing required key "version"`, line: 1},
		{name: "bad duration", yaml: "version: 1\nsteps:\n  - name: t\n    run: [make]\n    timeout: 10 minutes\n", wantErr: "not a duration", line: 5},
		{name: "negative duration", yaml: "version: 1\nsteps:\n  - name: t\n    run: [make]\n    timeout: -1s\n", wantErr: "must be positive", line: 5},
		{name: "bad size", yaml: "version: 1\nsteps: [{name: t, run: [make]}]\nlimits:\n  memory: 1GB\n", wantErr: "limits.memory", line: 4},
		{name: "bad pids", yaml: "version: 1\nsteps: [{name: t, run: [make]}]\nlimits: {pids: lots}\n", wantErr: "limits.pids", line: 3},
		{name: "empty steps", yaml: "version: 1\nsteps: []\n", wantErr: "at least one step", line: 1},
		{name: "no steps", yaml: "version: 1\n", wantErr: `missing required key "steps"`, line: 1},
		{name: "empty run", yaml: "version: 1\nsteps:\n  - name: t\n    run: []\n", wantErr: "argv must not be empty", line: 4},
		{name: "run as string", yaml: "version: 1\nsteps:\n  - name: t\n    run: make test\n", wantErr: "run must be a list", line: 4},
		{name: "empty name", yaml: "version: 1\nsteps:\n  - name: \"\"\n    run: [make]\n", wantErr: "name must not be empty", line: 3},
		{name: "duplicate step name", yaml: "version: 1\nsteps:\n  - {name: t, run: [a]}\n  - {name: t, run: [b]}\n", wantErr: `duplicate step name "t"`, line: 4},
		{name: "bad tests format", yaml: "version: 1\nsteps: [{name: t, run: [make], tests: junit}]\n", wantErr: `"junit" is not one of`, line: 2},
		{name: "bad glob", yaml: "version: 1\nprotected: [\"scripts/[\"]\nsteps: [{name: t, run: [make]}]\n", wantErr: "not a valid doublestar pattern", line: 2},
		{name: "absolute glob", yaml: "version: 1\nprotected:\n  - /etc/**\nsteps: [{name: t, run: [make]}]\n", wantErr: "absolute", line: 3},
		{name: "syntax error", yaml: "version: 1\nsteps: [\n", wantErr: "did not find expected node content", line: 2},
		{name: "not a mapping", yaml: "- version\n", wantErr: "recipe must be a mapping", line: 1},
		{name: "empty file", yaml: "", wantErr: "recipe is empty"},
		{name: "two documents", yaml: "version: 1\nsteps: [{name: t, run: [make]}]\n---\nversion: 1\n", wantErr: "more than one YAML document", line: 3},
		{name: "alias", yaml: "version: 1\nx: &a [make]\nsteps: [{name: t, run: *a}]\n", wantErr: `unknown key "x"`, line: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := gate.ParseRecipe([]byte(tt.yaml))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("ParseRecipe() error = %v", err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("ParseRecipe() (-want +got):\n%s", diff)
				}
				return
			}
			var re *gate.RecipeError
			if !errors.As(err, &re) {
				t.Fatalf("ParseRecipe() = %v, %v; want *RecipeError containing %q", got, err, tt.wantErr)
			}
			if !strings.Contains(re.Msg, tt.wantErr) || re.Line != tt.line {
				t.Errorf("ParseRecipe() error = line %d %q, want line %d containing %q", re.Line, re.Msg, tt.line, tt.wantErr)
			}
			if tt.line > 0 && !strings.HasPrefix(err.Error(), ".vouch.yml:") {
				t.Errorf("Error() = %q, want it to start with .vouch.yml:<line>:", err)
			}
		})
	}
}

func TestRecipeErrorText(t *testing.T) {
	_, err := gate.ParseRecipe([]byte("version: 1\nsteps: [{name: t, run: [make]}]\nstpes: []\n"))
	if got, want := err.Error(), `.vouch.yml:3: unknown key "stpes" in recipe`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestParseRecipeAliasRejected(t *testing.T) {
	_, err := gate.ParseRecipe([]byte("version: 1\nsteps:\n  - &s {name: t, run: [make]}\nlimits: *s\n"))
	if err == nil || !strings.Contains(err.Error(), "aliases are not allowed") {
		t.Errorf("ParseRecipe(alias) = %v, want aliases are not allowed", err)
	}
}
