package docscheck

import (
	"fmt"
	"go/ast"
	"sort"
	"testing"
)

// maxFuncLines is the longest a function may be, its signature and closing
// brace included (issue 39: no function over 150 lines).
const maxFuncLines = 150

// TestNoFunctionOver150Lines fails when a function or method outside the
// tests is longer than maxFuncLines, naming each, longest first.
func TestNoFunctionOver150Lines(t *testing.T) {
	s := repo(t)
	type long struct {
		where string
		n     int
	}
	var over []long
	for p, f := range s.files {
		if isTest(p) {
			continue
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if n := s.lines(fd); n > maxFuncLines {
				name := fd.Name.Name
				if r := recvName(fd); r != "" {
					name = r + "." + name
				}
				pos := s.fset.Position(fd.Pos())
				over = append(over, long{fmt.Sprintf("%s:%d %s", p, pos.Line, name), n})
			}
		}
	}
	sort.Slice(over, func(i, j int) bool {
		if over[i].n != over[j].n {
			return over[i].n > over[j].n
		}
		return over[i].where < over[j].where
	})
	for _, o := range over {
		t.Errorf("%s is %d lines, over %d", o.where, o.n, maxFuncLines)
	}
}
