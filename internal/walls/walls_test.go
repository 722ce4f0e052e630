package walls

import (
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/riskguard/riskguard/"

// floor says which floor a package (its path in the module) stands on;
// a package may import only packages on a lower floor, or on its own
// floor where same says so.
func floor(pkg string) int {
	top := strings.SplitN(pkg, "/", 2)[0]
	switch {
	case top == "internal":
		return 0
	case top == "exchange", top == "rules", top == "notify", top == "ha":
		return 1
	case pkg == "engine/backtest", pkg == "engine/ruletest":
		return 4
	case top == "engine" && pkg != "engine":
		return 2
	case pkg == "engine":
		return 3
	case top == "web":
		return 4
	case top == "config":
		return 5
	case top == "cmd", top == "scripts", top == "deploy":
		return 6
	}
	return -1
}

// sameFloor reports whether from may import to though both stand on one
// floor: a family's packages among themselves (exchange/sim uses
// exchange/margin, engine/act uses engine/market), never one family of
// floor 1 another (exchange never reads rules, notify never the exchange).
func sameFloor(from, to string) bool {
	fam := func(p string) string { return strings.SplitN(p, "/", 2)[0] }
	return fam(from) == fam(to)
}

// TestImportsPointDown walks every package of the module (tests aside:
// they may reach anything they drive) and fails on an import that points
// up a floor or across families on one floor, naming both.
func TestImportsPointDown(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pkgs := map[string][]string{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
			return filepath.SkipDir
		}
		p, err := build.Default.ImportDir(path, 0)
		if err != nil {
			if _, ok := err.(*build.NoGoError); ok {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, module) {
				pkgs[rel] = append(pkgs[rel], strings.TrimPrefix(imp, module))
			}
		}
		if _, ok := pkgs[rel]; !ok {
			pkgs[rel] = nil
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"engine", "engine/act", "exchange", "rules", "notify", "cmd/riskguard"} {
		if _, ok := pkgs[want]; !ok {
			t.Fatalf("package %s not found under %s: the walk lost its way", want, root)
		}
	}
	names := make([]string, 0, len(pkgs))
	for p := range pkgs {
		names = append(names, p)
	}
	slices.Sort(names)
	for _, from := range names {
		f := floor(from)
		if f < 0 {
			t.Errorf("%s stands on no floor: add its top directory to floor() in internal/walls", from)
			continue
		}
		for _, to := range pkgs[from] {
			g := floor(to)
			switch {
			case g > f:
				t.Errorf("%s (floor %d) imports %s (floor %d): an import points up", from, f, to, g)
			case g == f && !sameFloor(from, to):
				t.Errorf("%s imports %s: two families on floor %d know nothing of each other", from, to, f)
			}
		}
	}
}

// TestFloorsOfTheModule is the table of floors itself, so that a change
// to floor() is a change a reader sees.
func TestFloorsOfTheModule(t *testing.T) {
	for _, tc := range []struct {
		pkg  string
		want int
	}{
		{"internal/nextstep", 0},
		{"exchange/margin", 1},
		{"rules", 1},
		{"engine/act", 2},
		{"engine/market", 2},
		{"engine", 3},
		{"engine/backtest", 4},
		{"web", 4},
		{"cmd/riskguard", 6},
		{"nowhere", -1},
	} {
		if got := floor(tc.pkg); got != tc.want {
			t.Errorf("floor(%q) = %d, want %d", tc.pkg, got, tc.want)
		}
	}
	if _, err := os.Stat("../../go.mod"); err != nil {
		t.Fatalf("the test runs from internal/walls: %v", err)
	}
}
