package gate

import "slices"

// withGoJSON makes a `go test` step whose recipe says `tests: go` print the
// -json event stream, so every test result can be counted (plain `go test`
// prints nothing for passing tests). The recipe's own argv is kept when it
// already asks for -json or is not a direct `go test`.
func withGoJSON(r Recipe) Recipe {
	for i, s := range r.Steps {
		if s.Tests != "go" || len(s.Run) < 2 || s.Run[0] != "go" || s.Run[1] != "test" {
			continue
		}
		if slices.Contains(s.Run, "-json") || slices.Contains(s.Run, "--json") {
			continue
		}
		r.Steps[i].Run = slices.Insert(slices.Clone(s.Run), 2, "-json")
	}
	return r
}
