package gate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// maxPrefetchers bounds the goroutines that load head's trees ahead of the
// safety walk.
const maxPrefetchers = 8

// maxViolations bounds the violations listed in one Decision; Detail counts
// the rest.
const maxViolations = 1000

// Decide freezes baseRev and headRev to commits, computes their merge-base,
// and judges head against base's recipe and policy. Checks run in this
// order, and the first that refuses wins: the recipe (NO_TRUSTED_RECIPE,
// INVALID_RECIPE), protected paths (PROTECTED_PATH_CHANGED), tree safety
// (UNSAFE_TREE). Changed paths are computed whenever the trees allow it:
// a head tree over a bound of the policy (MaxFiles, and the tree-object
// bytes derived from it) or one that cannot be read stops the walk, leaves
// Changed empty and is refused as UNSAFE_TREE (after any recipe refusal).
//
// A protected path is refused when merge-base..head changes it, and also
// when it merely differs between base and head (rule suffixed
// " (differs from base)"): a head based on an old ancestor of base would
// otherwise run an old version of protected tooling that it never touched.
//
// A returned error means no decision could be reached: an unknown revision,
// no common ancestor, an invalid policy, an unreadable object outside
// head's tree (base's recipe, base's trees), the file system, or ctx done.
// Problems of head's tree objects are refusals, not errors. The plan of an
// admitted Decision reads objects from repo, which must stay open while the
// plan is used.
func Decide(ctx context.Context, repo *git.Repository, baseRev, headRev string, policy Policy) (*Decision, error) {
	if err := policy.Validate(); err != nil {
		return nil, err
	}
	policy = policy.withDefaults()
	objs := openObjects(ctx, repo.Storer)
	defer objs.close()
	r := newTreeReader(ctx, objs, decideBaseBytes, baseCacheSize)
	fast := fastStorer{repo.Storer, r.rd}
	base, err := resolveCommit(repo, fast, "--base", baseRev)
	if err != nil {
		return nil, err
	}
	head, err := resolveCommit(repo, fast, "--head", headRev)
	if err != nil {
		return nil, err
	}
	mb, err := mergeBase(base, head)
	if err != nil {
		return nil, err
	}
	d := &Decision{Base: base.Hash.String(), Head: head.Hash.String(), MergeBase: mb.Hash.String()}
	// Tree safety first: it bounds the head tree the diff below may list.
	// Helpers load head's trees ahead of the walk, which stays sequential
	// so its findings do not depend on scheduling.
	r.limitHead(policy)
	stop := r.prefetchAll(head.TreeHash, min(runtime.GOMAXPROCS(0)-1, maxPrefetchers))
	w := newSafetyWalk(r, policy)
	err = w.walk("", 0, head.TreeHash)
	stop()
	r.limitTrusted()
	if err != nil {
		return nil, fmt.Errorf("check head tree %s: %w", d.Head, err)
	}
	if !w.aborted {
		if d.Changed, err = r.changedPaths(mb.TreeHash, head.TreeHash); err != nil {
			return nil, fmt.Errorf("diff %s..%s: %w", d.MergeBase, d.Head, err)
		}
	}

	rc, refusal, detail, err := r.readRecipe(base.TreeHash, d)
	if err != nil {
		return nil, fmt.Errorf("read recipe of base %s: %w", d.Base, err)
	}
	if refusal != RefusalNone {
		d.Refusal, d.Detail = refusal, detail
		return d, nil
	}
	d.Recipe = rc

	if !w.aborted {
		vs, err := r.protectedChanges(base.TreeHash, mb.TreeHash, head.TreeHash, d.Changed, rc, policy.Protected)
		if err != nil {
			return nil, fmt.Errorf("protected paths of base %s: %w", d.Base, err)
		}
		if len(vs) > 0 {
			d.Refusal = RefusalProtectedPath
			d.Violations, d.Detail = capViolations(vs, fmt.Sprintf("%d protected path(s) changed, first %s (%s)", len(vs), vs[0].Path, vs[0].Rule))
			return d, nil
		}
	}
	if len(w.found) > 0 {
		slices.SortStableFunc(w.found, func(a, b finding) int { return strings.Compare(a.v.Path, b.v.Path) })
		vs := make([]Violation, len(w.found))
		whys := make([]string, 0, 3)
		for i, f := range w.found {
			vs[i] = f.v
			if i < cap(whys) {
				whys = append(whys, displayPath(f.v.Path)+": "+f.why)
			}
		}
		d.Refusal = RefusalUnsafeTree
		d.Violations, d.Detail = capViolations(vs, strings.Join(whys, "; "))
		return d, nil
	}
	d.plan = &Plan{recipe: withGoJSON(rc.clone()), head: d.Head, tree: head.TreeHash, store: repo.Storer, files: w.files, bytes: w.bytes}
	return d, nil
}

// protectedChanges lists the protected paths head changes, by path: those
// in changed (merge-base..head) and, with the rule suffixed
// " (differs from base)", those that differ between base and head only.
func (r *treeReader) protectedChanges(baseRoot, mbRoot, headRoot plumbing.Hash, changed []string, rc *Recipe, operator []string) ([]Violation, error) {
	rules, err := r.protectionRules(baseRoot, rc, operator)
	if err != nil {
		return nil, err
	}
	vs := violations(changed, rules, "")
	if baseRoot == mbRoot {
		return vs, nil
	}
	fromBase, err := r.changedPaths(baseRoot, headRoot)
	if err != nil {
		return nil, fmt.Errorf("diff base..head: %w", err)
	}
	fromBase = slices.DeleteFunc(fromBase, func(p string) bool {
		_, in := slices.BinarySearch(changed, p)
		return in
	})
	if more := violations(fromBase, rules, " (differs from base)"); len(more) > 0 {
		vs = append(vs, more...)
		slices.SortStableFunc(vs, func(a, b Violation) int { return strings.Compare(a.Path, b.Path) })
	}
	return vs, nil
}

// capViolations keeps the first maxViolations and says how many were left off.
func capViolations(vs []Violation, detail string) ([]Violation, string) {
	if len(vs) <= maxViolations {
		return vs, detail
	}
	return vs[:maxViolations], fmt.Sprintf("%s (%d more violations not listed)", detail, len(vs)-maxViolations)
}

// resolveCommit freezes rev to a commit, read through s; flag names the
// revision in errors. A full hex SHA of a commit is taken as is, as git
// does; anything else is resolved by go-git.
func resolveCommit(repo *git.Repository, s storer.EncodedObjectStorer, flag, rev string) (*object.Commit, error) {
	if rev == "" {
		return nil, fmt.Errorf("resolve %s: empty revision", flag)
	}
	if plumbing.IsHash(rev) {
		if c, err := object.GetCommit(s, plumbing.NewHash(rev)); err == nil {
			return c, nil
		}
	}
	h, err := repo.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return nil, fmt.Errorf("resolve %s %q: %w", flag, rev, err)
	}
	c, err := object.GetCommit(s, *h)
	if err != nil {
		return nil, fmt.Errorf("resolve %s %q: commit %s: %w", flag, rev, h, err)
	}
	return c, nil
}

// mergeBase returns the best common ancestor of base and head; when there
// are several, the one with the smallest hash, so the choice is stable.
func mergeBase(base, head *object.Commit) (*object.Commit, error) {
	bases, err := base.MergeBase(head)
	if err != nil {
		return nil, fmt.Errorf("merge-base of %s and %s: %w", base.Hash, head.Hash, err)
	}
	if len(bases) == 0 {
		return nil, fmt.Errorf("merge-base of %s and %s: no common ancestor", base.Hash, head.Hash)
	}
	slices.SortFunc(bases, func(a, b *object.Commit) int { return bytes.Compare(a.Hash[:], b.Hash[:]) })
	return bases[0], nil
}

// readRecipe reads and parses RecipePath from the base tree, recording its
// digest in d. A missing or unusable recipe is a refusal, not an error.
func (r *treeReader) readRecipe(baseRoot plumbing.Hash, d *Decision) (*Recipe, Refusal, string, error) {
	e, ok, err := r.find(baseRoot, RecipePath)
	if err != nil {
		return nil, "", "", err
	}
	if !ok {
		return nil, RefusalNoTrustedRecipe, fmt.Sprintf("base %s has no %s", d.Base, RecipePath), nil
	}
	switch e.mode {
	case filemode.Regular, filemode.Executable, filemode.Symlink:
		data, sum, whole, err := r.hashBlob(e.hash, MaxRecipeBytes)
		if err != nil {
			return nil, "", "", fmt.Errorf("%s: %w", RecipePath, err)
		}
		d.RecipeSHA256 = sum
		if e.mode == filemode.Symlink {
			return nil, RefusalInvalidRecipe, (&RecipeError{Msg: "is a symlink, not a regular file"}).Error(), nil
		}
		if !whole {
			return nil, RefusalInvalidRecipe, (&RecipeError{Msg: fmt.Sprintf("larger than %d bytes", MaxRecipeBytes)}).Error(), nil
		}
		rc, err := ParseRecipe(data)
		if err != nil {
			return nil, RefusalInvalidRecipe, err.Error(), nil
		}
		return rc, RefusalNone, "", nil
	case filemode.Dir:
		return nil, RefusalInvalidRecipe, (&RecipeError{Msg: "is a directory, not a regular file"}).Error(), nil
	}
	return nil, RefusalInvalidRecipe, (&RecipeError{Msg: fmt.Sprintf("has mode %o, not a regular file", uint32(e.mode))}).Error(), nil
}

// hashBlob returns the hex SHA-256 of blob h and its bytes; ok is false and
// the bytes nil when it is larger than max (the digest still covers it all).
func (r *treeReader) hashBlob(h plumbing.Hash, max int64) (data []byte, digest string, ok bool, err error) {
	info, err := r.rd.stat(h)
	if err != nil {
		return nil, "", false, fmt.Errorf("size of blob %s: %w", h, err)
	}
	if info.size <= max {
		if data, err = r.blob(h, max); err != nil {
			return nil, "", false, err
		}
		data = slices.Clone(data) // blob may return a reused buffer
		sum := sha256.Sum256(data)
		return data, hex.EncodeToString(sum[:]), true, nil
	}
	// Too large to parse, but its digest is still evidence: stream it.
	rd, _, err := r.o.stream(h)
	if err != nil {
		return nil, "", false, fmt.Errorf("read blob %s: %w", h, err)
	}
	defer rd.Close()
	sum := sha256.New()
	if _, err := io.Copy(sum, rd); err != nil {
		return nil, "", false, fmt.Errorf("read blob %s: %w", h, err)
	}
	return nil, hex.EncodeToString(sum.Sum(nil)), false, nil
}
