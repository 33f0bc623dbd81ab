// Package fetch brings exact commits from a forge into a local cache of
// bare repositories, one per clone URL, and proves they arrived whole.
//
// The cache is reused: a repository fetched before only receives the
// objects it lacks, so a new push to a pull request costs the new commits,
// not a clone. Credentials travel only in the fetch's HTTP auth; they are
// never written into the repository's config, a URL, a log or an error.
package fetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/http"

	"vouch.dev/vouch/forge"
)

// Cache keeps one bare repository per clone URL under Dir. The zero value
// with Dir set is ready to use; a Cache is safe for concurrent use, and
// processes sharing Dir take turns through a lock file per repository.
type Cache struct {
	Dir string

	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// refPrefix is where fetched refs live in a cache repository, so that what
// was fetched stays reachable and is offered as "have" on the next fetch.
const refPrefix = "refs/vouch/"

// MissingError says a wanted commit, or an object its tree needs, is not in
// the cache after fetching.
type MissingError struct {
	SHA    string // the wanted commit
	Object string // the missing object (the commit itself, a tree or a blob)
	Path   string // where in the commit's tree, "" for the commit
	Err    error
}

func (e *MissingError) Error() string {
	switch {
	case e.Object == e.SHA:
		return fmt.Sprintf("commit %s not found after fetch: %v", e.SHA, e.Err)
	default:
		return fmt.Sprintf("commit %s incomplete: object %s (%q) missing: %v", e.SHA, e.Object, e.Path, e.Err)
	}
}

func (e *MissingError) Unwrap() error { return e.Err }

// Dir is the cache directory for clone URL u: a hash of the URL without
// credentials, so it never names a token and never depends on one.
func (c *Cache) dirFor(u string) string {
	sum := sha256.Sum256([]byte(u))
	return filepath.Join(c.Dir, hex.EncodeToString(sum[:16])+".git")
}

// Fetch makes every commit in shas (full hex ids) present in the cache
// repository for src.URL, with all the objects of its tree, and returns
// that repository. It fetches src.Refs, then any wanted commit still
// missing by its id (Gitea and Forgejo allow this), and nothing at all when
// every wanted commit is already there. The repository is bare; read trees
// from it, never check it out in place.
func (c *Cache) Fetch(ctx context.Context, src forge.FetchSource, shas ...string) (*git.Repository, error) {
	if c.Dir == "" {
		return nil, errors.New("fetch: cache has no directory")
	}
	u, err := url.Parse(src.URL)
	if err != nil {
		// url.Parse's error repeats the URL, which could carry a secret.
		return nil, errors.New("fetch: clone URL does not parse")
	}
	if u.User != nil {
		return nil, fmt.Errorf("fetch %s: clone URL carries credentials; pass them in the source's Username and Token", u.Redacted())
	}
	if u.Scheme != "https" && u.Scheme != "http" { // no file://: a URL must not reach the host's disk
		return nil, fmt.Errorf("fetch %s: unsupported scheme %q", u.Redacted(), u.Scheme)
	}
	where := u.String()
	wants := make([]plumbing.Hash, 0, len(shas))
	for _, s := range shas {
		if !plumbing.IsHash(s) {
			return nil, fmt.Errorf("fetch %s: %q is not a full commit id", where, s)
		}
		wants = append(wants, plumbing.NewHash(strings.ToLower(s)))
	}

	dir := c.dirFor(where)
	unlock, err := c.lock(dir)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: %w", where, err)
	}
	defer unlock()

	repo, err := openOrInit(dir)
	if err != nil {
		return nil, fmt.Errorf("fetch %s: cache %s: %w", where, dir, err)
	}

	var missing []plumbing.Hash
	for _, h := range wants {
		if complete(repo, h) != nil {
			missing = append(missing, h)
		}
	}
	if len(missing) == 0 && len(wants) > 0 {
		return repo, nil // all there: no network at all
	}
	if err := fetch(ctx, repo, src, where, missing); err != nil {
		return nil, err
	}
	for _, h := range missing {
		if err := complete(repo, h); err != nil {
			return nil, fmt.Errorf("fetch %s: %w", where, err)
		}
	}
	return repo, nil
}

// fetch runs one or two fetches: src.Refs with the missing commits by id,
// and if the server refuses ids, src.Refs alone.
func fetch(ctx context.Context, repo *git.Repository, src forge.FetchSource, where string, missing []plumbing.Hash) error {
	var specs []config.RefSpec
	for _, r := range src.Refs {
		if !strings.HasPrefix(r, "refs/") || strings.ContainsAny(r, ":*^~ \\") || strings.Contains(r, "..") {
			return fmt.Errorf("fetch %s: ref %q is not a plain ref name", where, r)
		}
		specs = append(specs, config.RefSpec("+"+r+":"+refPrefix+strings.TrimPrefix(r, "refs/")))
	}
	byID := specs
	for _, h := range missing {
		byID = append(byID, config.RefSpec("+"+h.String()+":"+refPrefix+"commits/"+h.String()))
	}
	remote := git.NewRemote(repo.Storer, &config.RemoteConfig{Name: "vouch", URLs: []string{where}})
	opts := func(specs []config.RefSpec) *git.FetchOptions {
		o := &git.FetchOptions{RemoteName: "vouch", RefSpecs: specs, Tags: git.NoTags, Force: true}
		if src.Username != "" || src.Token != "" {
			user := src.Username
			if user == "" {
				user = "vouch"
			}
			o.Auth = &http.BasicAuth{Username: user, Password: src.Token}
		}
		return o
	}
	if len(byID) == 0 {
		return nil
	}
	err := remote.FetchContext(ctx, opts(byID))
	if errors.Is(err, git.ErrExactSHA1NotSupported) && len(specs) > 0 {
		err = remote.FetchContext(ctx, opts(specs))
	}
	if err == nil || errors.Is(err, git.NoErrAlreadyUpToDate) {
		return nil
	}
	err = scrub(err, src.Token)
	if errors.Is(err, transport.ErrAuthenticationRequired) || errors.Is(err, transport.ErrAuthorizationFailed) {
		return fmt.Errorf("fetch %s: %w: %w", where, forge.ErrUnauthorized, err)
	}
	if errors.Is(err, transport.ErrRepositoryNotFound) {
		return fmt.Errorf("fetch %s: %w: %w", where, forge.ErrNotFound, err)
	}
	if len(missing) > 0 {
		return fmt.Errorf("fetch %s (wanted %s): %w", where, joinHashes(missing), err)
	}
	return fmt.Errorf("fetch %s: %w", where, err)
}

func joinHashes(hs []plumbing.Hash) string {
	s := make([]string, len(hs))
	for i, h := range hs {
		s[i] = h.String()
	}
	return strings.Join(s, ", ")
}

// scrub keeps a token out of an error's text should a transport ever echo
// it, while still letting errors.Is see the original.
func scrub(err error, token string) error {
	if token == "" || !strings.Contains(err.Error(), token) {
		return err
	}
	return &scrubbed{msg: strings.ReplaceAll(err.Error(), token, "***"), err: err}
}

type scrubbed struct {
	msg string
	err error
}

func (s *scrubbed) Error() string { return s.msg }
func (s *scrubbed) Unwrap() error { return s.err }

// complete checks that commit h and every tree and blob its tree names are
// present. Submodule entries name commits of another repository and are
// not followed (the gate refuses them).
func complete(repo *git.Repository, h plumbing.Hash) error {
	commit, err := repo.CommitObject(h)
	if err != nil {
		return &MissingError{SHA: h.String(), Object: h.String(), Err: err}
	}
	seen := map[plumbing.Hash]bool{}
	var walk func(tree plumbing.Hash, path string) error
	walk = func(th plumbing.Hash, path string) error {
		if seen[th] {
			return nil
		}
		seen[th] = true
		tree, err := object.GetTree(repo.Storer, th)
		if err != nil {
			return &MissingError{SHA: h.String(), Object: th.String(), Path: path, Err: err}
		}
		for _, e := range tree.Entries {
			p := e.Name
			if path != "" {
				p = path + "/" + e.Name
			}
			switch {
			case e.Mode == filemode.Submodule:
			case e.Mode == filemode.Dir:
				if err := walk(e.Hash, p); err != nil {
					return err
				}
			default:
				if seen[e.Hash] {
					continue
				}
				seen[e.Hash] = true
				if err := repo.Storer.HasEncodedObject(e.Hash); err != nil {
					return &MissingError{SHA: h.String(), Object: e.Hash.String(), Path: p, Err: err}
				}
			}
		}
		return nil
	}
	return walk(commit.TreeHash, "")
}

func openOrInit(dir string) (*git.Repository, error) {
	repo, err := git.PlainOpen(dir)
	if err == nil {
		return repo, nil
	}
	if !errors.Is(err, git.ErrRepositoryNotExists) {
		return nil, err
	}
	return git.PlainInit(dir, true)
}

// lock serialises work on one cache repository: a mutex within the
// process, a lock file across processes.
func (c *Cache) lock(dir string) (func(), error) {
	c.mu.Lock()
	if c.locks == nil {
		c.locks = map[string]*sync.Mutex{}
	}
	m := c.locks[dir]
	if m == nil {
		m = new(sync.Mutex)
		c.locks[dir] = m
	}
	c.mu.Unlock()
	m.Lock()

	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		m.Unlock()
		return nil, err
	}
	f, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		m.Unlock()
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		m.Unlock()
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
		m.Unlock()
	}, nil
}
