package gate

// Plan is what the sandbox may execute: the admitted head tree and base's
// recipe. Its fields are unexported, so only this package can build a usable
// Plan; a zero Plan is not Valid and the sandbox refuses it.
type Plan struct {
	recipe Recipe
	head   string
	// TODO(gate): the head tree to materialize.
}

// Valid reports whether p was made by the gate.
func (p *Plan) Valid() bool { return p != nil && p.head != "" }

// Head is the admitted head SHA.
func (p *Plan) Head() string { return p.head }

// Recipe returns a copy of base's recipe the plan runs.
func (p *Plan) Recipe() Recipe { return p.recipe }
