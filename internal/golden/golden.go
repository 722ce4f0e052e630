// Package golden compares a test's output with a file kept in testdata,
// and rewrites the file when the test runs with -update: one helper for
// every golden test of the repository.
package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Check compares got with the file at path, first rewriting the file when
// update is set. A difference is reported at its first differing line.
func Check(t testing.TB, path, got string, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run the test with -update to accept, then review the diff): %s", path, FirstDiff(string(want), got))
	}
}

// FirstDiff describes the first line where want and got differ.
func FirstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := range max(len(wl), len(gl)) {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g || i >= len(wl) || i >= len(gl) {
			return fmt.Sprintf("line %d (of %d, now %d):\n  want %q\n  got  %q", i+1, len(wl), len(gl), w, g)
		}
	}
	return "same lines"
}
