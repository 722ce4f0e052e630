package margin

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// sortPartKeys orders keys as sorting by (k, i) with cmp.Compare does, at
// every length either side of where it changes method, with ties, NaN and
// infinities among the k.
func TestSortPartKeys(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(38, 13))
	specials := []float64{0, math.NaN(), math.Inf(1), 1, 2}
	for n := range 120 {
		for range 20 {
			keys := make([]partKey, n)
			for i := range keys {
				k := float64(r.IntN(8)) / 4
				if r.IntN(6) == 0 {
					k = specials[r.IntN(len(specials))]
				}
				keys[i] = partKey{k, int32(i)}
			}
			want := slices.Clone(keys)
			slices.SortFunc(want, func(x, y partKey) int { return cmp.Or(cmp.Compare(x.k, y.k), cmp.Compare(x.i, y.i)) })
			sortPartKeys(keys)
			for i := range keys {
				if keys[i].i != want[i].i {
					t.Fatalf("n=%d: %v, want %v", n, keys, want)
				}
			}
		}
	}
}

// permute lays the parts out as a second list in the keys' order would.
func TestPermuteIsTheKeysOrder(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(38, 15))
	for n := range 60 {
		for range 20 {
			parts := make([]ForfeitPart, n)
			keys := make([]partKey, n)
			for i := range parts {
				parts[i] = ForfeitPart{At: i, K: float64(r.IntN(5)), Symbols: []string{fmt.Sprint("S", i)}}
				keys[i] = partKey{math.Abs(parts[i].K), int32(i)}
			}
			sortPartKeys(keys)
			want := make([]ForfeitPart, n)
			for d, k := range keys {
				want[d] = parts[k.i]
			}
			permute(parts, keys)
			if !reflect.DeepEqual(parts, want) && n > 0 {
				t.Fatalf("n=%d: %v, want %v", n, parts, want)
			}
		}
	}
}

// sortPartKeys orders keys laid out in any order, the order of their i
// reversed, shuffled or the last sort's of keys moved a little, as
// sorting by (k, i) with cmp.Compare does, at every length
// either side of where it changes method, with ties, NaN and infinities
// among the k.
func TestSortPartKeysFromAnyOrder(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(38, 17))
	specials := []float64{0, math.NaN(), math.Inf(1), 1, 2}
	for n := range 120 {
		for run := range 20 {
			keys := make([]partKey, n)
			for i := range keys {
				k := float64(r.IntN(8)) / 4
				if r.IntN(6) == 0 {
					k = specials[r.IntN(len(specials))]
				}
				keys[i] = partKey{k, int32(i)}
			}
			want := slices.Clone(keys)
			slices.SortFunc(want, func(x, y partKey) int { return cmp.Or(cmp.Compare(x.k, y.k), cmp.Compare(x.i, y.i)) })
			start := slices.Clone(keys)
			switch run % 3 {
			case 0:
				slices.Reverse(start)
			case 1:
				r.Shuffle(len(start), func(a, b int) { start[a], start[b] = start[b], start[a] })
			default:
				// The order sorted, then each k moved a little: the
				// next tick's, its indexes moved.
				copy(start, want)
				for d := range start {
					if !math.IsNaN(start[d].k) && r.IntN(3) == 0 {
						start[d].k += float64(r.IntN(3)-1) / 4
					}
				}
				want = slices.Clone(start)
				slices.SortFunc(want, func(x, y partKey) int { return cmp.Or(cmp.Compare(x.k, y.k), cmp.Compare(x.i, y.i)) })
			}
			sortPartKeys(start)
			for i := range start {
				if start[i] != want[i] && !(math.IsNaN(start[i].k) && start[i].i == want[i].i) {
					t.Fatalf("n=%d, run %d: %v, want %v", n, run, start, want)
				}
			}
		}
	}
}
