package engine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoCapabilityAsserted holds the venue's capabilities to being asked
// once, in New (Deps.offer, exchange.OfferOf): no code under engine/ asks
// a venue for one by a type assertion of its own, where a part would find
// a missing call only when a rule first needs it.
func TestNoCapabilityAsserted(t *testing.T) {
	t.Parallel()
	capabilities := map[string]bool{"OrderPlacer": true, "HistoryReader": true, "ClosedOrderReader": true, "HistoryClient": true}
	fset := token.NewFileSet()
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ta, ok := n.(*ast.TypeAssertExpr)
			if !ok || ta.Type == nil {
				return true
			}
			name := ""
			switch ty := ta.Type.(type) {
			case *ast.Ident:
				name = ty.Name
			case *ast.SelectorExpr:
				name = ty.Sel.Name
			}
			if capabilities[name] {
				t.Errorf("%s: the venue asked for %s by a type assertion; take it from New (Deps.offer)", fset.Position(ta.Pos()), name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
