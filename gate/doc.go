// Package gate decides whether a pull request's head may run: from the git
// objects of a frozen base and head, base's recipe (`.vouch.yml`) and the
// operator's Policy, it computes a Decision and, only when it admits head,
// the Plan the sandbox runs. It is pure: it reads objects, never executes
// anything from either tree, never writes outside Materialize's directory,
// and never logs.
//
// # What it protects
//
// A head is refused (PROTECTED_PATH_CHANGED) when merge-base..head touches,
// or base..head differs in, a protected path:
//
//   - `.vouch.yml`, always;
//   - the recipe's and the operator's globs, and what base's symlinks make
//     them reach: with `ci -> tools` in base, `ci/**` protects `tools/**`
//     too (rule "recipe:ci/** via symlink ci -> tools"), and a symlink a
//     glob matches protects its target;
//   - every path a step's argv names that base has, followed through
//     base's symlinks: a file, or every path under a directory (including
//     files head adds there);
//   - the implicit inputs of a few tools, whether or not base has them: for
//     `make` and `gmake` without -f, GNUmakefile, makefile and Makefile in
//     the directory -C leads to.
//
// # The limits of argv inference
//
// Argv inference is a heuristic, not an analysis of what a step runs:
//
//   - every argv element, and each shell-like word in it (split at spaces,
//     quotes, `;&|()<>=:,$` and backquotes), is taken as a path from the
//     repository root, whatever directory a command would resolve it in;
//   - absolute words and words with a ".." component are skipped;
//   - what a protected file loads in turn is not protected unless a glob
//     covers it: files a script sources or executes, makefiles a makefile
//     includes, configuration a wrapper (gradlew, npm, tox, a pre-commit
//     hook) reads, modules an interpreter imports;
//   - a step is only as safe as what runs first in it: head code that
//     runs in a step (a test, a build script) can change anything that
//     runs after it in the same step, and, where steps share the
//     workspace, in later ones.
//
// Recipes that run head's code should therefore keep their tooling under
// a protected glob (`protected: [ci/**]`), not rely on argv alone. And
// since a directory an argv word names is protected whole, a step should
// name the code under test by a pattern or let the tool discover it
// (`go test ./...`, `pytest`), not by its directory (`pytest tests`
// would refuse every change to tests/).
//
// # Bounds
//
// Head's tree is checked before anything else reads it: at most MaxFiles
// files and MaxFiles directories, MaxBytes bytes of blobs, each tree object
// at most min(16 MiB, MaxFiles × 300 B) bytes and all of them together at
// most MaxFiles × 300 B (rule "max-tree-bytes"), judged from object
// headers before a tree is inflated. Objects that do not parse, are
// missing or have the wrong type are refusals (UNSAFE_TREE, rule
// "bad-tree"), not errors. Delta bases are kept in a bounded LRU cache,
// the helpers that load head's trees ahead of the walk share a budget and
// skip large trees, and Decide and Materialize stop when their ctx is done.
package gate
