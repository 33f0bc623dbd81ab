package gate

import (
	"path"
	"strings"
	"unicode"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// maxSymlinkHops bounds symlink following while resolving a step's files in
// the base tree.
const maxSymlinkHops = 16

// rule is one protection: an exact path or a doublestar glob, with the name
// reported in a Violation.
type rule struct {
	name  string
	exact string
	glob  string
}

func (r rule) matches(p string) bool {
	if r.glob == "" {
		return p == r.exact
	}
	ok, err := doublestar.Match(r.glob, p)
	return err == nil && ok
}

// protectionRules lists the rules in the order they are reported: always
// `.vouch.yml`, the recipe's globs, the files the steps name, the operator's
// globs.
func (r *treeReader) protectionRules(baseRoot plumbing.Hash, rc *Recipe, operator []string) ([]rule, error) {
	rules := []rule{{name: "always:" + RecipePath, exact: RecipePath}}
	for _, g := range rc.Protected {
		rules = append(rules, rule{name: "recipe:" + g, glob: g})
	}
	for _, s := range rc.Steps {
		seen := map[string]bool{}
		for _, arg := range s.Run {
			for _, cand := range argPaths(arg) {
				paths, err := r.resolve(baseRoot, cand)
				if err != nil {
					return nil, err
				}
				for _, p := range paths {
					if !seen[p] {
						seen[p] = true
						rules = append(rules, rule{name: "step:" + s.Name, exact: p})
					}
				}
			}
		}
	}
	for _, g := range operator {
		rules = append(rules, rule{name: "operator:" + g, glob: g})
	}
	return rules, nil
}

// violations pairs each changed path with the first rule that catches it.
func violations(changed []string, rules []rule) []Violation {
	var out []Violation
	for _, p := range changed {
		for _, r := range rules {
			if r.matches(p) {
				out = append(out, Violation{Path: p, Rule: r.name})
				break
			}
		}
	}
	return out
}

// argPaths returns the repository-relative paths an argv element may name:
// the element itself and, for elements such as `sh -c "scripts/a.sh && make"`
// or `--config=ci/x.yml`, each shell-like word in it. Absolute paths and
// paths with ".." are skipped: they cannot name a file of the tree.
func argPaths(arg string) []string {
	var out []string
	add := func(s string) {
		if c := cleanRel(s); c != "" {
			out = append(out, c)
		}
	}
	add(arg)
	words := strings.FieldsFunc(arg, func(c rune) bool {
		return unicode.IsSpace(c) || strings.ContainsRune(";&|()<>'\"`=:,$", c)
	})
	if len(words) != 1 || words[0] != arg {
		for _, w := range words {
			add(w)
		}
	}
	return out
}

// cleanRel returns p as a clean repository-relative path, or "" if p is
// empty, absolute, has a ".." component, or names the root.
func cleanRel(p string) string {
	if p == "" || strings.HasPrefix(p, "/") {
		return ""
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return ""
		}
	}
	c := path.Clean(p)
	if c == "." {
		return ""
	}
	return c
}

// resolve follows the slash path p through the base tree as the kernel
// would once the tree is checked out, and returns every non-directory path
// the resolution passes through: each symlink and the final file. It returns
// nothing when p does not end at a file of the tree, escapes it, or loops.
func (r *treeReader) resolve(root plumbing.Hash, p string) ([]string, error) {
	var (
		passed []string
		dir    []string        // names of the directories we are in
		trees  []plumbing.Hash // their tree hashes; trees[0] is the root
		parts  = strings.Split(p, "/")
		hops   int
	)
	trees = append(trees, root)
	for len(parts) > 0 {
		name := parts[0]
		parts = parts[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			if len(dir) == 0 {
				return nil, nil
			}
			dir, trees = dir[:len(dir)-1], trees[:len(trees)-1]
			continue
		}
		es, err := r.tree(trees[len(trees)-1])
		if err != nil {
			return nil, err
		}
		e, ok := lookup(es, name)
		if !ok {
			return nil, nil
		}
		full := path.Join(append(append([]string{}, dir...), name)...)
		switch e.mode {
		case filemode.Dir:
			dir, trees = append(dir, name), append(trees, e.hash)
		case filemode.Symlink:
			passed = append(passed, full)
			if hops++; hops > maxSymlinkHops {
				return nil, nil
			}
			target, err := r.blob(e.hash, maxSymlinkTarget)
			if err != nil {
				return nil, err
			}
			if strings.HasPrefix(string(target), "/") {
				return nil, nil
			}
			parts = append(strings.Split(string(target), "/"), parts...)
		case filemode.Regular, filemode.Executable:
			if len(parts) > 0 && strings.Trim(strings.Join(parts, "/"), "/.") != "" {
				return nil, nil
			}
			return append(passed, full), nil
		default:
			return nil, nil
		}
	}
	return nil, nil // p names a directory
}
