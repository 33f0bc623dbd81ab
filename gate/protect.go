package gate

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// maxSymlinkHops bounds symlink following while resolving a path in the
// base tree.
const maxSymlinkHops = 16

// maxDerivedRules bounds the rules base's symlinks may add to one glob.
const maxDerivedRules = 1024

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

// protector builds the protection rules of one base tree.
type protector struct {
	r     *treeReader
	root  plumbing.Hash
	rules []rule
	have  map[rule]bool // patterns already listed, names aside
}

func (pr *protector) add(ru rule) {
	key := rule{exact: ru.exact, glob: ru.glob}
	if !pr.have[key] {
		pr.have[key] = true
		pr.rules = append(pr.rules, ru)
	}
}

// protectionRules lists the rules in the order they are reported: always
// `.vouch.yml`; the recipe's globs, each followed by what base's symlinks
// make it reach; the files and directories the steps name, with the
// implicit inputs of the tools they run; the operator's globs, each with
// its symlinks.
func (r *treeReader) protectionRules(baseRoot plumbing.Hash, rc *Recipe, operator []string) ([]rule, error) {
	pr := &protector{r: r, root: baseRoot, have: map[rule]bool{}}
	pr.add(rule{name: "always:" + RecipePath, exact: RecipePath})
	for _, g := range rc.Protected {
		if err := pr.glob("recipe:"+g, g); err != nil {
			return nil, err
		}
	}
	for _, s := range rc.Steps {
		if err := pr.step(s); err != nil {
			return nil, err
		}
	}
	for _, g := range operator {
		if err := pr.glob("operator:"+g, g); err != nil {
			return nil, err
		}
	}
	return pr.rules, nil
}

// violations pairs each changed path with the first rule that catches it,
// the rule's name followed by suffix.
func violations(changed []string, rules []rule, suffix string) []Violation {
	var out []Violation
	for _, p := range changed {
		for _, r := range rules {
			if r.matches(p) {
				out = append(out, Violation{Path: p, Rule: r.name + suffix})
				break
			}
		}
	}
	return out
}

// glob protects the paths g matches and, through base's symlinks, what
// they lead to.
func (pr *protector) glob(name, g string) error {
	pr.add(rule{name: name, glob: g})
	return pr.throughSymlinks(name, g)
}

// throughSymlinks protects what base's symlinks make reachable through the
// glob g. For a symlink g matches, or under which g may match paths (such
// as `ci` for `ci/**`), the links its resolution passes are protected and
// so is where it leads: the file; for a directory, the paths under it that
// g would match through the link ("tools/**" for `ci -> tools`), all of
// them when g matches the link itself; for a target base does not have,
// that path and everything under it, which head could add. Links inside
// the directories reached are followed the same way.
func (pr *protector) throughSymlinks(name, g string) error {
	queue, done, added := []string{g}, map[string]bool{g: true}, 0
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		var links []string
		if err := pr.symlinksFor(cur, "", pr.root, &links); err != nil {
			return err
		}
		for _, p := range links {
			res, ok, err := pr.r.resolvePath(pr.root, p)
			if err != nil {
				return err
			}
			if !ok {
				continue // leaves the tree or loops: nothing of it to protect
			}
			via := fmt.Sprintf("%s via symlink %s -> %s", name, p, displayPath(res.real))
			before := len(pr.rules)
			for _, l := range res.links {
				pr.add(rule{name: via, exact: l})
			}
			var rests []string
			switch {
			case !res.exists:
				pr.add(rule{name: via, exact: res.real})
				rests = []string{"**"}
			case !res.dir:
				pr.add(rule{name: via, exact: res.real})
			default:
				if m, _ := doublestar.Match(cur, p); m {
					rests = []string{"**"}
				} else {
					rests = globBelow(cur, p)
				}
			}
			for _, rest := range rests {
				d := rest
				if res.real != "" {
					d = escapeGlob(res.real) + "/" + rest
				}
				pr.add(rule{name: via, glob: d})
				if !done[d] {
					done[d] = true
					queue = append(queue, d)
				}
			}
			if added += len(pr.rules) - before; added > maxDerivedRules {
				return fmt.Errorf("glob %q reaches more than %d paths through symlinks", g, maxDerivedRules)
			}
		}
	}
	return nil
}

// symlinksFor appends to out the symlinks of base under dir (tree h) that
// g matches or may match paths under.
func (pr *protector) symlinksFor(g, dir string, h plumbing.Hash, out *[]string) error {
	es, err := pr.r.tree(h)
	if err != nil {
		return err
	}
	for _, e := range es {
		p := e.name
		if dir != "" {
			p = dir + "/" + e.name
		}
		switch e.mode {
		case filemode.Symlink:
			if m, _ := doublestar.Match(g, p); m || globBelow(g, p) != nil {
				*out = append(*out, p)
			}
		case filemode.Dir:
			if globBelow(g, p) != nil {
				if err := pr.symlinksFor(g, p, e.hash, out); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// globBelow returns the patterns a path under dir must match, relative to
// dir, for g to match it: for g "ci/**/*.sh" and dir "ci/a", "**/*.sh". It
// returns nil when no path under dir can match g, and "**" alone when g
// cannot be split at its slashes (a brace or class that spans one).
func globBelow(g, dir string) []string {
	gs := strings.Split(g, "/")
	for _, c := range gs {
		if strings.Count(c, "{") != strings.Count(c, "}") || strings.Count(c, "[") != strings.Count(c, "]") {
			return []string{"**"}
		}
	}
	ds := strings.Split(dir, "/")
	var out []string
	seen := map[[2]int]bool{}
	var walk func(i, j int)
	walk = func(i, j int) {
		if seen[[2]int{i, j}] || i == len(gs) {
			return
		}
		seen[[2]int{i, j}] = true
		switch {
		case j == len(ds):
			rest := strings.Join(gs[i:], "/")
			for _, o := range out {
				if o == rest {
					return
				}
			}
			out = append(out, rest)
		case gs[i] == "**":
			walk(i+1, j)
			walk(i, j+1)
		default:
			if ok, _ := doublestar.Match(gs[i], ds[j]); ok {
				walk(i+1, j+1)
			}
		}
	}
	walk(0, 0)
	return out
}

// escapeGlob quotes the characters doublestar would read as a pattern.
func escapeGlob(p string) string {
	var b strings.Builder
	for _, c := range p {
		if strings.ContainsRune(`*?[]{}\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func displayPath(p string) string {
	if p == "" {
		return "."
	}
	return p
}

// step protects what a step names: each word of its argv that is a file
// or directory of base, and the implicit inputs of the tool it runs.
func (pr *protector) step(s Step) error {
	name := "step:" + s.Name
	for _, arg := range s.Run {
		for _, cand := range argPaths(arg) {
			if err := pr.named(name, cand); err != nil {
				return err
			}
		}
	}
	if err := pr.implicit(name, s.Run); err != nil {
		return err
	}
	// A tool started indirectly — `sh -c "make test"`, `env make`, `nice
	// make` — reads the same implicit inputs: look for it at every word.
	var words []string
	for _, arg := range s.Run {
		words = append(words, shellWords(arg)...)
	}
	for i := 1; i < len(words); i++ {
		if implicitInputs[path.Base(words[i])] != nil {
			if err := pr.implicit(name, words[i:]); err != nil {
				return err
			}
		}
	}
	return nil
}

// shellWords splits an argv element the way argPaths does: on blanks and
// shell operators.
func shellWords(arg string) []string {
	return strings.FieldsFunc(arg, func(c rune) bool {
		return unicode.IsSpace(c) || strings.ContainsRune(";&|()<>'\"`=:,$", c)
	})
}

// named protects what the repository-relative path p leads to in base: the
// symlinks passed and the file, or every path under the directory (not the
// root: every step runs there). A path base does not have is left alone.
func (pr *protector) named(name, p string) error {
	res, ok, err := pr.r.resolvePath(pr.root, p)
	if err != nil || !ok || !res.exists {
		return err
	}
	for _, l := range res.links {
		pr.add(rule{name: name, exact: l})
	}
	switch {
	case !res.dir:
		pr.add(rule{name: name, exact: res.real})
	case res.real != "":
		return pr.glob(name, escapeGlob(res.real)+"/**")
	}
	return nil
}

// makefiles are the files make reads, in this order, when no -f option
// names one; the first that exists wins.
var makefiles = []string{"GNUmakefile", "makefile", "Makefile", "BSDmakefile"}

// implicitInputs maps the base name of a step's argv[0] to a parser of its
// arguments that returns the files the tool reads without being named and
// that decide which commands it runs. They are protected whether or not
// base has them: adding one (a GNUmakefile next to a protected Makefile)
// is enough to change what runs. The table holds only such entry files;
// what they load in turn (an included makefile, a sourced script, a
// wrapper's configuration) is protected only when a glob or argv word
// covers it.
var implicitInputs = map[string]func(args []string) []string{
	"make":  makeInputs,
	"gmake": makeInputs,
	"bmake": makeInputs,
}

// implicit protects the implicit inputs of the tool a step's argv runs.
func (pr *protector) implicit(name string, argv []string) error {
	if len(argv) == 0 {
		return nil
	}
	inputs := implicitInputs[path.Base(argv[0])]
	if inputs == nil {
		return nil
	}
	for _, p := range inputs(argv[1:]) {
		pr.add(rule{name: name, exact: p})
		if err := pr.named(name, p); err != nil {
			return err
		}
		// Through a symlinked -C directory, the files make reads are
		// those of its target.
		dir, file := path.Split(p)
		if dir == "" {
			continue
		}
		res, ok, err := pr.r.resolvePath(pr.root, dir)
		if err != nil {
			return err
		}
		if ok && res.dir {
			for _, l := range res.links {
				pr.add(rule{name: name, exact: l})
			}
			pr.add(rule{name: name, exact: path.Join(res.real, file)})
		}
	}
	return nil
}

// makeInputs returns, for GNU make's arguments, the makefiles it reads:
// those -f names, or else all of makefiles, in the directory the -C options
// lead to (each relative to the one before). It returns nothing when that
// directory is not inside the repository.
func makeInputs(args []string) []string {
	var (
		dir      string
		named    []string
		explicit bool
		bad      bool
	)
	setDir := func(v string) {
		if strings.HasPrefix(v, "/") {
			bad = true
		}
		dir = path.Join(dir, v)
	}
	addFile := func(v string) {
		explicit = true
		named = append(named, v)
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		next := func() (string, bool) {
			if i+1 < len(args) {
				i++
				return args[i], true
			}
			return "", false
		}
		switch {
		case a == "--":
			i = len(args)
		case strings.HasPrefix(a, "--"):
			opt, val, hasVal := strings.Cut(a[2:], "=")
			long, takes := makeLongOption(opt)
			if !takes {
				continue
			}
			if !hasVal {
				if val, hasVal = next(); !hasVal {
					continue
				}
			}
			switch long {
			case "directory":
				setDir(val)
			case "file", "makefile":
				addFile(val)
			}
		case strings.HasPrefix(a, "-") && len(a) > 1:
			for k := 1; k < len(a); k++ {
				if strings.ContainsRune("jlO", rune(a[k])) {
					break // the rest of the word is its optional argument
				}
				if !strings.ContainsRune("CEfIoW", rune(a[k])) {
					continue
				}
				val := a[k+1:]
				if val == "" {
					var ok bool
					if val, ok = next(); !ok {
						break
					}
				}
				switch a[k] {
				case 'C':
					setDir(val)
				case 'f':
					addFile(val)
				}
				break
			}
		}
	}
	dir = path.Clean(dir)
	if bad || dir == ".." || strings.HasPrefix(dir, "../") {
		return nil
	}
	if dir == "." {
		dir = ""
	}
	var out []string
	files := makefiles
	if explicit {
		files = named
	}
	for _, f := range files {
		if strings.HasPrefix(f, "/") {
			continue
		}
		if p := cleanRel(path.Join(dir, f)); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// makeLongOptions are GNU make's long options; the value says whether the
// option takes an argument that may be the next word.
var makeLongOptions = map[string]bool{
	"always-make": false, "assume-new": true, "assume-old": true, "check-symlink-times": false,
	"debug": false, "directory": true, "dry-run": false, "environment-overrides": false,
	"eval": true, "file": true, "help": false, "ignore-errors": false, "include-dir": true,
	"jobs": false, "jobserver-auth": false, "jobserver-style": false, "just-print": false,
	"keep-going": false, "load-average": false, "makefile": true, "max-load": false,
	"new-file": true, "no-builtin-rules": false, "no-builtin-variables": false,
	"no-keep-going": false, "no-print-directory": false, "no-silent": false, "old-file": true,
	"output-sync": false, "print-data-base": false, "print-directory": false, "question": false,
	"quiet": false, "recon": false, "shuffle": false, "silent": false, "stop": false,
	"touch": false, "trace": false, "version": false, "warn-undefined-variables": false,
	"what-if": true,
}

// makeLongOption resolves opt, which getopt lets be any unambiguous prefix,
// to a long option of make and says whether that takes an argument.
func makeLongOption(opt string) (string, bool) {
	if takes, ok := makeLongOptions[opt]; ok {
		return opt, takes
	}
	var found string
	for o := range makeLongOptions {
		if opt != "" && strings.HasPrefix(o, opt) {
			if found != "" {
				return "", false // ambiguous: make refuses to run
			}
			found = o
		}
	}
	return found, makeLongOptions[found]
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

// resolved is where a path leads in a tree, followed as the kernel would
// once the tree is checked out.
type resolved struct {
	// real is the path with every symlink replaced by what it leads to;
	// "" for the root.
	real string
	// exists says real is an entry of the tree; dir that it is a directory.
	exists, dir bool
	// links are the symlinks passed, in order, by their real paths.
	links []string
}

// resolve follows the slash path p through the tree root. ok is false when
// p leaves the tree (an absolute target, ".." above the root), loops,
// passes through a file, a gitlink or an unknown mode, or climbs with ".."
// out of a directory the tree does not have. A missing entry ends the
// walk: real is then the path head could add there.
func (r *treeReader) resolvePath(root plumbing.Hash, p string) (resolved, bool, error) {
	var (
		res   resolved
		dir   []string        // names of the directories we are in
		trees []plumbing.Hash // their tree hashes; trees[0] is the root
		parts = strings.Split(p, "/")
		hops  int
	)
	trees = append(trees, root)
	join := func(names ...string) string {
		return strings.Join(append(append([]string{}, dir...), names...), "/")
	}
	for len(parts) > 0 {
		name := parts[0]
		parts = parts[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			if len(dir) == 0 {
				return res, false, nil
			}
			dir, trees = dir[:len(dir)-1], trees[:len(trees)-1]
			continue
		}
		es, err := r.tree(trees[len(trees)-1])
		if err != nil {
			return res, false, err
		}
		e, ok := lookup(es, name)
		if !ok {
			rest := []string{name}
			for _, q := range parts {
				switch q {
				case "", ".":
				case "..":
					return res, false, nil
				default:
					rest = append(rest, q)
				}
			}
			res.real = join(rest...)
			return res, true, nil
		}
		switch e.mode {
		case filemode.Dir:
			dir, trees = append(dir, name), append(trees, e.hash)
		case filemode.Symlink:
			res.links = append(res.links, join(name))
			if hops++; hops > maxSymlinkHops {
				return res, false, nil
			}
			target, err := r.blob(e.hash, maxSymlinkTarget)
			if errors.Is(err, errTooLarge) {
				return res, false, nil // longer than the kernel follows
			}
			if err != nil {
				return res, false, err
			}
			if len(target) == 0 || target[0] == '/' {
				return res, false, nil
			}
			parts = append(strings.Split(string(target), "/"), parts...)
		case filemode.Regular, filemode.Executable:
			for _, q := range parts {
				if q != "" && q != "." {
					return res, false, nil
				}
			}
			res.real, res.exists = join(name), true
			return res, true, nil
		default:
			return res, false, nil
		}
	}
	res.real, res.exists, res.dir = join(), true, true
	return res, true, nil
}
