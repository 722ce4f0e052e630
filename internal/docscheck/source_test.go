package docscheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// root is the repository's root, from this package's directory.
const root = "../.."

// source is the repository's Go source, parsed once: every file but those
// under testdata and hidden directories, tests included (a doc may name a
// test), each with its package directory.
type source struct {
	fset  *token.FileSet
	files map[string]*ast.File // by slash path from the root
}

// repo parses the repository; each test parses it once.
func repo(t *testing.T) *source {
	t.Helper()
	s := &source{fset: token.NewFileSet(), files: map[string]*ast.File{}}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		f, err := parser.ParseFile(s.fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		s.files[filepath.ToSlash(rel)] = f
		return nil
	})
	if err != nil {
		t.Fatalf("parse the repository: %v", err)
	}
	return s
}

// isTest reports whether a path is a test file.
func isTest(path string) bool { return strings.HasSuffix(path, "_test.go") }

// recvName is a method's receiver type name without pointer or type
// parameters; "" for a function.
func recvName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return ""
	}
	t := fd.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
		case *ast.IndexExpr:
			t = x.X
		case *ast.IndexListExpr:
			t = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// funcs returns the function declarations of a file by "Recv.Name" or
// "Name".
func (s *source) funcs(path string) map[string]*ast.FuncDecl {
	out := map[string]*ast.FuncDecl{}
	f := s.files[path]
	if f == nil {
		return out
	}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok {
			name := fd.Name.Name
			if r := recvName(fd); r != "" {
				name = r + "." + name
			}
			out[name] = fd
		}
	}
	return out
}

// pkgFiles returns the paths of a directory's Go files, sorted.
func (s *source) pkgFiles(dir string) []string {
	var out []string
	for p := range s.files {
		if pathDir(p) == dir {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// pathDir is a slash path's directory, "" at the root.
func pathDir(p string) string {
	i := strings.LastIndex(p, "/")
	if i < 0 {
		return ""
	}
	return p[:i]
}

// pkgDirs maps a package name to the directories whose package has it (a
// name such as main is in several).
func (s *source) pkgDirs() map[string][]string {
	seen := map[string]map[string]bool{}
	for p, f := range s.files {
		name := strings.TrimSuffix(f.Name.Name, "_test")
		if seen[name] == nil {
			seen[name] = map[string]bool{}
		}
		seen[name][pathDir(p)] = true
	}
	out := map[string][]string{}
	for name, dirs := range seen {
		for d := range dirs {
			out[name] = append(out[name], d)
		}
		sort.Strings(out[name])
	}
	return out
}

// declared returns every name a directory's files declare: package-level
// types, functions, variables and constants, methods (as "Recv.Name" and
// "Name"), and the fields and interface methods of its types.
func (s *source) declared(dir string) map[string]bool {
	out := map[string]bool{}
	for _, p := range s.pkgFiles(dir) {
		for _, d := range s.files[p].Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				out[d.Name.Name] = true
				if r := recvName(d); r != "" {
					out[r+"."+d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					switch sp := sp.(type) {
					case *ast.TypeSpec:
						out[sp.Name.Name] = true
						ast.Inspect(sp.Type, func(n ast.Node) bool {
							if f, ok := n.(*ast.Field); ok {
								for _, nm := range f.Names {
									out[nm.Name] = true
									out[sp.Name.Name+"."+nm.Name] = true
								}
							}
							return true
						})
					case *ast.ValueSpec:
						for _, nm := range sp.Names {
							out[nm.Name] = true
						}
					}
				}
			}
		}
	}
	return out
}

// exists reports whether a slash path from the root is a file or directory.
func exists(p string) bool {
	_, err := os.Stat(filepath.Join(root, filepath.FromSlash(p)))
	return err == nil
}

// isDir reports whether a slash path from the root is a directory.
func isDir(p string) bool {
	fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(p)))
	return err == nil && fi.IsDir()
}

// lines is a node's length in lines, its first and last included.
func (s *source) lines(n ast.Node) int {
	return s.fset.Position(n.End()).Line - s.fset.Position(n.Pos()).Line + 1
}

// refers reports whether a function's body (its closures included) names
// name, as a call, a method value or a function value.
func refers(fd *ast.FuncDecl, name string) bool {
	if fd.Body == nil {
		return false
	}
	found := false
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.SelectorExpr:
			if x.Sel.Name == name {
				found = true
			}
		case *ast.Ident:
			if x.Name == name {
				found = true
			}
		}
		return !found
	})
	return found
}
