//go:build ignore

// engineshape measures the shape of a type in a package: its fields, its
// methods (every method with that receiver, exported or not) and the files
// they are in, and the package's lines (non-test .go files). It is how
// docs/architecture.md's figures of Engine are counted:
//
//	go run scripts/engineshape.go            # engine's Engine
//	go run scripts/engineshape.go DIR TYPE
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	dir, typ := "engine", "Engine"
	if len(os.Args) == 3 {
		dir, typ = os.Args[1], os.Args[2]
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fs := token.NewFileSet()
	fields, methods, lines := 0, 0, 0
	files := map[string]bool{}
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		src, err := os.ReadFile(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		lines += strings.Count(string(src), "\n")
		f, err := parser.ParseFile(fs, p, src, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok && ts.Name.Name == typ {
						if st, ok := ts.Type.(*ast.StructType); ok {
							for _, fl := range st.Fields.List {
								fields += max(len(fl.Names), 1)
							}
						}
						files[filepath.Base(p)] = true
					}
				}
			case *ast.FuncDecl:
				if d.Recv == nil || len(d.Recv.List) == 0 {
					continue
				}
				t := d.Recv.List[0].Type
				if s, ok := t.(*ast.StarExpr); ok {
					t = s.X
				}
				if id, ok := t.(*ast.Ident); ok && id.Name == typ {
					methods++
					files[filepath.Base(p)] = true
				}
			}
		}
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Printf("%s.%s: %d fields, %d methods, in %d files (%s); %s: %d lines of non-test Go\n",
		dir, typ, fields, methods, len(names), strings.Join(names, " "), dir, lines)
}
