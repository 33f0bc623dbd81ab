package gate

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"vouch.dev/vouch/fixtures"
)

// TestDeltaChainCache: reading every version of a file whose pack stores
// it as one long delta chain applies each delta about once when the base
// cache is far smaller than the chain (it evicts instead of refusing),
// and the read stops when ctx is done.
func TestDeltaChainCache(t *testing.T) {
	const versions = 300
	r := fixtures.NewRepo(t)
	var (
		content  string
		contents []string
		commits  []string
	)
	// Version v rewrites line v: each version is closest to its neighbours,
	// so git chains them instead of basing all on one.
	lines := make([]string, versions)
	for i := range lines {
		lines[i] = fmt.Sprintf("line %03d %s\n", i, strings.Repeat("x", 60))
	}
	for v := range versions {
		lines[v] = fmt.Sprintf("line %03d %s\n", v, strings.Repeat("y", 60))
		content = strings.Join(lines, "")
		contents = append(contents, content)
		commits = []string{r.Commit(fmt.Sprint(v), fixtures.Files(map[string]string{"f.txt": content}), commits...)}
	}
	r.Branch("main", commits[0])
	for _, args := range [][]string{{"repack", "-a", "-d", "-f", "-q", "--depth=4095", "--window=10"}, {"prune-packed"}} {
		if out, err := exec.Command("git", append([]string{"-C", r.Dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	idx, _ := filepath.Glob(filepath.Join(r.Dir, ".git/objects/pack/*.idx"))
	out, err := exec.Command("git", append([]string{"-C", r.Dir, "verify-pack", "-v"}, idx...)...).Output()
	if err != nil {
		t.Fatalf("git verify-pack: %v", err)
	}
	depth := 0
	for _, m := range regexp.MustCompile(`chain length = (\d+)`).FindAllStringSubmatch(string(out), -1) {
		n, _ := strconv.Atoi(m[1])
		depth = max(depth, n)
	}
	if depth < 40 {
		t.Fatalf("longest delta chain is %d, want at least 40 for the test to mean anything", depth)
	}
	// The blobs, newest first: git keeps the newest whole and the older
	// ones as deltas, each against the next newer one.
	var blobs []plumbing.Hash
	for c := commits[0]; ; {
		blob, err := exec.Command("git", "-C", r.Dir, "rev-parse", c+":f.txt").Output()
		if err != nil {
			t.Fatal(err)
		}
		blobs = append(blobs, plumbing.NewHash(strings.TrimSpace(string(blob))))
		parent, err := exec.Command("git", "-C", r.Dir, "rev-parse", "-q", "--verify", c+"^").Output()
		if err != nil {
			break
		}
		c = strings.TrimSpace(string(parent))
	}
	slices.Reverse(contents)
	repo, err := git.PlainOpen(r.Dir)
	if err != nil {
		t.Fatal(err)
	}

	o := openObjects(t.Context(), repo.Storer)
	defer o.close()
	if len(o.packs) != 1 {
		t.Fatalf("%d packs mapped, want 1", len(o.packs))
	}
	cache := int64(4 * len(contents[0])) // a few versions out of 300
	rd := o.reader(maxBaseBytes, cache)
	for i, h := range blobs {
		data, err := rd.read(h, plumbing.BlobObject, 1<<20)
		if err != nil || string(data) != contents[i] {
			t.Fatalf("read version %d: %d bytes, %v; want %d bytes", versions-1-i, len(data), err, len(contents[i]))
		}
		if rd.bases.used > cache {
			t.Fatalf("base cache holds %d bytes, more than its %d", rd.bases.used, cache)
		}
	}
	t.Logf("longest chain %d; %d versions read applying %d deltas", depth, versions, rd.applied)
	if rd.applied > 3*versions {
		t.Errorf("reading %d versions applied %d deltas, want at most %d", versions, rd.applied, 3*versions)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	oc := openObjects(ctx, repo.Storer)
	defer oc.close()
	if _, err := oc.reader(maxBaseBytes, cache).read(blobs[len(blobs)-1], plumbing.BlobObject, 1<<20); !errors.Is(err, context.Canceled) {
		t.Errorf("read of the chain's deepest object with ctx done = %v, want context.Canceled", err)
	}
}

func TestBaseCacheEvictsLeastRecentlyUsed(t *testing.T) {
	c := newBaseCache(30)
	key := func(i int) baseKey { return baseKey{off: int64(i)} }
	for i := range 3 {
		c.add(key(i), baseObj{data: make([]byte, 10)})
	}
	c.get(key(0))                                   // 1 is now the least recently used
	c.add(key(3), baseObj{data: make([]byte, 10)})  // evicts 1
	c.add(key(4), baseObj{data: make([]byte, 100)}) // larger than the cache: not kept
	for i, want := range []bool{true, false, true, true, false} {
		if _, ok := c.get(key(i)); ok != want {
			t.Errorf("get(%d) = %v, want %v", i, ok, want)
		}
	}
	if c.used != 30 {
		t.Errorf("used = %d, want 30", c.used)
	}
}
