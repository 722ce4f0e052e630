package backtest

import (
	"slices"
	"testing"
)

// appendBounded holds what append holds, element for element, grows its
// list no further than the bound while the list is within it, and makes
// less than three times the bound in all on its way there (append, some
// five times a long list).
func TestAppendBounded(t *testing.T) {
	t.Parallel()
	for _, most := range []int{1, 2, 7, 8, 9, 100, 2001} {
		var got, want []int
		made := 0 // the capacities the list went through within the bound, summed
		for i := range most + 3 {
			before := cap(got)
			got, want = appendBounded(got, most, i), append(want, i)
			if cap(got) != before && len(got) <= most {
				made += cap(got)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("most %d, after %d: %v, want %v", most, i+1, got, want)
			}
			if len(got) <= most && cap(got) > most {
				t.Fatalf("most %d: %d elements in a list of %d", most, len(got), cap(got))
			}
		}
		if made >= 3*most+8 {
			t.Errorf("most %d: lists of %d elements made in all, want less than three times the bound", most, made)
		}
	}
}
