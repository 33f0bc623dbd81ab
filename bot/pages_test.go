package bot

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
)

// TestPagesBounded: past maxPagesAtOnce pages in flight, evidence pages
// answer 503 without touching the store; /key is always served.
func TestPagesBounded(t *testing.T) {
	p := &pages{store: openStore(t, filepath.Join(t.TempDir(), "vouch.db"))}
	mux := http.NewServeMux()
	p.routes(mux)
	get := func(path string) int {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code
	}
	if code := get("/runs"); code != http.StatusOK {
		t.Fatalf("/runs with room: %d", code)
	}
	for range maxPagesAtOnce {
		p.busy <- struct{}{}
	}
	for _, path := range []string{"/runs", "/runs/1", "/runs/1/receipt.json"} {
		if code := get(path); code != http.StatusServiceUnavailable {
			t.Errorf("%s while busy: %d, want 503", path, code)
		}
	}
	if code := get("/key"); code != http.StatusNotFound { // no key configured here
		t.Errorf("/key while busy: %d, want 404 (served, no key)", code)
	}
}
