package didyoumean

import "testing"

func TestClosest(t *testing.T) {
	t.Parallel()
	candidates := []string{"interval", "dry_run", "XBTC", "XETH", "Distance"}
	tests := []struct{ word, want string }{
		{"intervall", "interval"},
		{"dryrun", "dry_run"},
		{"xbtc", "XBTC"},  // case only
		{"XBTCC", "XBTC"}, // one extra letter
		{"Distnce", "Distance"},
		{"XTEH", "XETH"}, // a transposition
		{"zzz", ""},      // nothing close
		{"", ""},
	}
	for _, tt := range tests {
		if got := Closest(tt.word, candidates); got != tt.want {
			t.Errorf("Closest(%q) = %q, want %q", tt.word, got, tt.want)
		}
	}
}
