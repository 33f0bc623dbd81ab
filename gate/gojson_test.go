package gate

import (
	"slices"
	"testing"
)

func TestWithGoJSON(t *testing.T) {
	tests := []struct {
		name  string
		tests string
		run   []string
		want  []string
	}{
		{"go test gets -json", "go", []string{"go", "test", "./..."}, []string{"go", "test", "-json", "./..."}},
		{"already -json", "go", []string{"go", "test", "-json", "./..."}, []string{"go", "test", "-json", "./..."}},
		{"not counting go", "plain", []string{"go", "test", "./..."}, []string{"go", "test", "./..."}},
		{"not go test", "go", []string{"make", "test"}, []string{"make", "test"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orig := slices.Clone(tt.run)
			r := Recipe{Steps: []Step{{Name: "s", Run: tt.run, Tests: tt.tests}}}
			got := withGoJSON(r.clone())
			if !slices.Equal(got.Steps[0].Run, tt.want) {
				t.Errorf("withGoJSON(%q) = %q, want %q", tt.run, got.Steps[0].Run, tt.want)
			}
			if !slices.Equal(r.Steps[0].Run, orig) {
				t.Errorf("withGoJSON changed its input: %q", r.Steps[0].Run)
			}
		})
	}
}
