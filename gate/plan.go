package gate

import (
	"maps"
	"slices"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// Plan is what the sandbox may execute: the admitted head tree and base's
// recipe. Its fields are unexported, so only this package can build a usable
// Plan; a zero Plan is not Valid and the sandbox refuses it.
type Plan struct {
	recipe Recipe
	head   string
	tree   plumbing.Hash
	store  storer.EncodedObjectStorer
	files  int
	bytes  int64
}

// Valid reports whether p was made by the gate.
func (p *Plan) Valid() bool { return p != nil && p.head != "" && p.store != nil && !p.tree.IsZero() }

// Head is the admitted head SHA.
func (p *Plan) Head() string { return p.head }

// Recipe returns a copy of base's recipe the plan runs.
func (p *Plan) Recipe() Recipe { return p.recipe.clone() }

// Size is what Materialize will write: non-directory entries and blob bytes.
func (p *Plan) Size() (files int, bytes int64) { return p.files, p.bytes }

// clone copies r deeply, so a plan's recipe cannot be changed through the
// Decision or a previous Recipe() result.
func (r Recipe) clone() Recipe {
	r.Protected = slices.Clone(r.Protected)
	r.Toolchains = slices.Clone(r.Toolchains)
	r.Env = maps.Clone(r.Env)
	r.Steps = slices.Clone(r.Steps)
	for i := range r.Steps {
		r.Steps[i].Run = slices.Clone(r.Steps[i].Run)
	}
	return r
}
