package act

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// dedupeReference is Dedupe as it was written first: through a map.
func dedupeReference(s []string) []string {
	out := s[:0:0]
	seen := make(map[string]bool, len(s))
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// Dedupe is the list without repeats, in order, nil for nil and empty for
// empty, in a list of its own: short lists looked through and long ones
// through a map alike.
func TestDedupe(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   []string
	}{
		{"nil", nil},
		{"empty", []string{}},
		{"one", []string{"a"}},
		{"no repeat", []string{"a", "b", "c"}},
		{"repeats", []string{"a", "b", "a", "c", "b", "a"}},
		{"all one", []string{"x", "x", "x"}},
	}
	r := rand.New(rand.NewPCG(38, 31))
	for n := range 3 * dedupeShort {
		in := make([]string, n)
		for i := range in {
			in[i] = fmt.Sprint("r", r.IntN(n/2+1))
		}
		tests = append(tests, struct {
			name string
			in   []string
		}{fmt.Sprintf("random %d", n), in})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			was := slices.Clone(tt.in)
			got, want := Dedupe(tt.in), dedupeReference(tt.in)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Dedupe(%q) = %#v, want %#v", tt.in, got, want)
			}
			if len(got) > 0 {
				got[0] = "changed"
				if !slices.Equal(tt.in, was) {
					t.Fatalf("Dedupe(%q) shares its list with the input", was)
				}
			}
		})
	}
}
