package golden

import (
	"strings"
	"testing"
)

func TestFirstDiff(t *testing.T) {
	for _, tc := range []struct{ want, got, has string }{
		{"a\nb\n", "a\nc\n", `line 2 (of 3, now 3):` + "\n" + `  want "b"` + "\n" + `  got  "c"`},
		{"a\n", "a\nb\n", "line 2 (of 2, now 3)"},
		{"a", "a", "same lines"},
	} {
		if got := FirstDiff(tc.want, tc.got); !strings.Contains(got, tc.has) {
			t.Errorf("FirstDiff(%q, %q) = %q, want it to contain %q", tc.want, tc.got, got, tc.has)
		}
	}
}

func TestCheckRewritesAndCompares(t *testing.T) {
	path := t.TempDir() + "/sub/out.golden"
	Check(t, path, "one\n", true)
	Check(t, path, "one\n", false)
	ft := &fakeT{TB: t}
	Check(ft, path, "two\n", false)
	if !ft.failed {
		t.Error("a different output passed")
	}
}

type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Errorf(string, ...any) { f.failed = true }
func (f *fakeT) Helper()               {}
