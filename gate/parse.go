package gate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"go.yaml.in/yaml/v3"
)

// MaxRecipeBytes bounds the size of a recipe; a larger `.vouch.yml` is invalid.
const MaxRecipeBytes = 1 << 20

// RecipeError is why a recipe could not be accepted, at a line of the file.
type RecipeError struct {
	// Line is the 1-based line of `.vouch.yml` at fault; 0 when unknown.
	Line int
	// Msg says what is wrong, without the file name or line.
	Msg string
}

// Error reads like `.vouch.yml:3: unknown key "stpes"`.
func (e *RecipeError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", RecipePath, e.Line, e.Msg)
	}
	return RecipePath + ": " + e.Msg
}

// The values a step's `tests` key may take.
var testFormats = map[string]bool{"": true, "go": true, "pytest": true, "tap": true, "plain": true}

// yamlLine finds the line number in yaml's own error texts ("yaml: line 3: ...").
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// ParseRecipe decodes and validates a `.vouch.yml`. It is strict: unknown
// keys, duplicate keys, aliases, a second document, a wrong type or an
// out-of-range value are all errors of type *RecipeError.
func ParseRecipe(data []byte) (*Recipe, error) {
	if len(data) > MaxRecipeBytes {
		return nil, &RecipeError{Msg: fmt.Sprintf("recipe is %d bytes, more than the %d allowed", len(data), MaxRecipeBytes)}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &RecipeError{Msg: "recipe is empty"}
		}
		return nil, syntaxError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, syntaxError(err)
		}
		return nil, &RecipeError{Line: extra.Line, Msg: "more than one YAML document"}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	r := &Recipe{}
	if err := parseTop(root, r); err != nil {
		return nil, err
	}
	return r, nil
}

// syntaxError turns a YAML parser error into a RecipeError, keeping its line.
func syntaxError(err error) *RecipeError {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &RecipeError{Line: line, Msg: strings.TrimPrefix(msg, m[0])}
	}
	return &RecipeError{Msg: strings.TrimPrefix(msg, "yaml: ")}
}

func errAt(n *yaml.Node, format string, args ...any) *RecipeError {
	return &RecipeError{Line: n.Line, Msg: fmt.Sprintf(format, args...)}
}

// field is one key of a mapping with the function that parses its value.
type field struct {
	name  string
	parse func(v *yaml.Node) error
}

// parseMapping walks a mapping node, rejecting unknown and duplicate keys and
// calling each known field's parser. Required fields missing are reported
// against the mapping's own line.
func parseMapping(n *yaml.Node, what string, fields []field, required ...string) error {
	if n.Kind != yaml.MappingNode {
		return errAt(n, "%s must be a mapping, got %s", what, kindName(n))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return errAt(k, "%s: keys must be plain strings", what)
		}
		if seen[k.Value] {
			return errAt(k, "duplicate key %q in %s", k.Value, what)
		}
		seen[k.Value] = true
		if v.Kind == yaml.AliasNode || k.Kind == yaml.AliasNode {
			return errAt(v, "%s: aliases are not allowed", k.Value)
		}
		var f *field
		for j := range fields {
			if fields[j].name == k.Value {
				f = &fields[j]
			}
		}
		if f == nil {
			return errAt(k, "unknown key %q in %s", k.Value, what)
		}
		if err := f.parse(v); err != nil {
			return err
		}
	}
	for _, name := range required {
		if !seen[name] {
			return errAt(n, "%s: missing required key %q", what, name)
		}
	}
	return nil
}

func parseTop(n *yaml.Node, r *Recipe) error {
	err := parseMapping(n, "recipe", []field{
		{"version", func(v *yaml.Node) error {
			if err := decodeScalar(v, "version", "!!int", &r.Version); err != nil {
				return err
			}
			if r.Version != 1 {
				return errAt(v, "version: unsupported version %d, want 1", r.Version)
			}
			return nil
		}},
		{"protected", func(v *yaml.Node) error {
			globs, err := stringList(v, "protected")
			if err != nil {
				return err
			}
			for i, g := range globs {
				if err := checkGlob(g); err != nil {
					return errAt(v.Content[i], "protected: %v", err)
				}
			}
			r.Protected = globs
			return nil
		}},
		{"steps", func(v *yaml.Node) error { return parseSteps(v, r) }},
		{"env", func(v *yaml.Node) error { return parseEnv(v, r) }},
		{"toolchains", func(v *yaml.Node) error {
			names, err := stringList(v, "toolchains")
			if err != nil {
				return err
			}
			for i, name := range names {
				if name == "" {
					return errAt(v.Content[i], "toolchains: empty name")
				}
			}
			r.Toolchains = names
			return nil
		}},
		{"limits", func(v *yaml.Node) error { return parseLimits(v, &r.Limits) }},
	}, "version", "steps")
	if err != nil {
		return err
	}
	if len(r.Steps) == 0 {
		return errAt(n, "steps: at least one step is required")
	}
	return nil
}

func checkGlob(g string) error {
	switch {
	case g == "":
		return errors.New("empty glob")
	case strings.HasPrefix(g, "/"):
		return fmt.Errorf("glob %q is absolute; globs are repository-relative", g)
	case !doublestar.ValidatePattern(g):
		return fmt.Errorf("glob %q is not a valid doublestar pattern", g)
	}
	return nil
}

func parseSteps(v *yaml.Node, r *Recipe) error {
	if v.Kind != yaml.SequenceNode {
		return errAt(v, "steps must be a list, got %s", kindName(v))
	}
	names := map[string]bool{}
	for _, sn := range v.Content {
		var s Step
		err := parseMapping(sn, "step", []field{
			{"name", func(v *yaml.Node) error { return decodeScalar(v, "name", "!!str", &s.Name) }},
			{"run", func(v *yaml.Node) error {
				argv, err := stringList(v, "run")
				if err != nil {
					return err
				}
				if len(argv) == 0 {
					return errAt(v, "run: argv must not be empty")
				}
				if argv[0] == "" {
					return errAt(v, "run: argv[0] must not be empty")
				}
				s.Run = argv
				return nil
			}},
			{"timeout", func(v *yaml.Node) error {
				var text string
				if err := decodeScalar(v, "timeout", "!!str", &text); err != nil {
					return err
				}
				d, err := time.ParseDuration(text)
				if err != nil {
					return errAt(v, "timeout: %q is not a duration like \"10m\" or \"90s\"", text)
				}
				if d <= 0 {
					return errAt(v, "timeout: %q must be positive", text)
				}
				s.Timeout = d
				return nil
			}},
			{"tests", func(v *yaml.Node) error {
				if err := decodeScalar(v, "tests", "!!str", &s.Tests); err != nil {
					return err
				}
				if !testFormats[s.Tests] {
					return errAt(v, "tests: %q is not one of go, pytest, tap, plain", s.Tests)
				}
				return nil
			}},
			{"allow_skips", func(v *yaml.Node) error { return decodeScalar(v, "allow_skips", "!!bool", &s.AllowSkips) }},
		}, "name", "run")
		if err != nil {
			return err
		}
		if s.Name == "" {
			return errAt(sn, "step: name must not be empty")
		}
		if names[s.Name] {
			return errAt(sn, "step: duplicate step name %q", s.Name)
		}
		names[s.Name] = true
		r.Steps = append(r.Steps, s)
	}
	return nil
}

func parseEnv(v *yaml.Node, r *Recipe) error {
	if v.Kind != yaml.MappingNode {
		return errAt(v, "env must be a mapping, got %s", kindName(v))
	}
	r.Env = make(map[string]string, len(v.Content)/2)
	for i := 0; i+1 < len(v.Content); i += 2 {
		k, val := v.Content[i], v.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Value == "" || strings.ContainsAny(k.Value, "=\x00") {
			return errAt(k, "env: %q is not a valid variable name", k.Value)
		}
		if _, dup := r.Env[k.Value]; dup {
			return errAt(k, "duplicate key %q in env", k.Value)
		}
		var s string
		if err := decodeScalar(val, "env."+k.Value, "", &s); err != nil {
			return err
		}
		if strings.ContainsRune(s, 0) {
			return errAt(val, "env.%s: value contains a NUL byte", k.Value)
		}
		r.Env[k.Value] = s
	}
	return nil
}

func parseLimits(v *yaml.Node, l *Limits) error {
	size := func(name string, dst *int64) field {
		return field{name, func(v *yaml.Node) error {
			var text string
			if err := decodeScalar(v, "limits."+name, "", &text); err != nil {
				return err
			}
			n, err := ParseSize(text)
			if err != nil {
				return errAt(v, "limits.%s: %v", name, err)
			}
			*dst = n
			return nil
		}}
	}
	return parseMapping(v, "limits", []field{
		size("memory", &l.Memory),
		size("tmp", &l.Tmp),
		size("output", &l.Output),
		{"pids", func(v *yaml.Node) error {
			if err := decodeScalar(v, "limits.pids", "!!int", &l.Pids); err != nil {
				return err
			}
			if l.Pids <= 0 {
				return errAt(v, "limits.pids: %d must be positive", l.Pids)
			}
			return nil
		}},
	})
}

// sizeUnits are the suffixes a size may carry, binary only, longest first.
var sizeUnits = []struct {
	suffix string
	shift  uint
}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}

// ParseSize reads a size as recipes and configs write it: "1GiB",
// "256MiB", "512KiB", "100B" or plain "4096" bytes.
func ParseSize(text string) (int64, error) {
	num, shift := strings.TrimSpace(text), uint(0)
	for _, u := range sizeUnits {
		if strings.HasSuffix(num, u.suffix) {
			num, shift = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.shift
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q is not a positive size like 1GiB, 256MiB, 512KiB or 4096", text)
	}
	if n > (1<<63-1)>>shift {
		return 0, fmt.Errorf("%q is too large", text)
	}
	return n << shift, nil
}

// stringList decodes a sequence of scalars.
func stringList(v *yaml.Node, what string) ([]string, error) {
	if v.Kind != yaml.SequenceNode {
		return nil, errAt(v, "%s must be a list, got %s", what, kindName(v))
	}
	out := make([]string, 0, len(v.Content))
	for _, item := range v.Content {
		var s string
		if err := decodeScalar(item, what, "", &s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// decodeScalar decodes a scalar node into dst. When tag is set, the scalar
// must resolve to that YAML tag (so `version: "1"` or `allow_skips: yes` as a
// string is rejected rather than guessed).
func decodeScalar(v *yaml.Node, what, tag string, dst any) error {
	if v.Kind != yaml.ScalarNode {
		return errAt(v, "%s must be a single value, got %s", what, kindName(v))
	}
	if tag == "!!str" && v.ShortTag() == "!!null" {
		return errAt(v, "%s must not be empty", what)
	}
	if tag != "" && tag != "!!str" && v.ShortTag() != tag {
		return errAt(v, "%s: %q is not %s", what, v.Value, tagName(tag))
	}
	if tag == "" && v.ShortTag() == "!!null" {
		return errAt(v, "%s must not be null", what)
	}
	if s, ok := dst.(*string); ok {
		// Any scalar reads as its text: `name: 2024` is the step "2024".
		*s = v.Value
		return nil
	}
	if err := v.Decode(dst); err != nil {
		return errAt(v, "%s: %q is not %s", what, v.Value, tagName(tag))
	}
	return nil
}

func tagName(tag string) string {
	switch tag {
	case "!!int":
		return "an integer"
	case "!!bool":
		return "true or false"
	}
	return "a string"
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "nothing"
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "a document"
}
