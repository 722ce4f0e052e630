package docscheck

import (
	"fmt"
	"go/ast"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// architecture is docs/architecture.md's text.
func architecture(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section returns the text under the "## " heading that starts with
// title, up to the next "## " heading.
func section(t *testing.T, md, title string) string {
	t.Helper()
	_, rest, ok := strings.Cut(md, "\n## "+title)
	if !ok {
		t.Fatalf("docs/architecture.md has no section %q", title)
	}
	body, _, _ := strings.Cut(rest, "\n## ")
	return body
}

// tableRows returns the cells of a section's table rows, header and
// separator left out.
func tableRows(body string) [][]string {
	var rows [][]string
	for _, l := range strings.Split(body, "\n") {
		if !strings.HasPrefix(l, "|") {
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(l, "|"), " | ") {
			cells = append(cells, strings.TrimSpace(c))
		}
		rows = append(rows, cells)
	}
	if len(rows) < 2 {
		return nil
	}
	return rows[2:]
}

var (
	codeSpan  = regexp.MustCompile("`([^`]+)`")
	goFile    = regexp.MustCompile(`^[A-Za-z0-9_./-]*[A-Za-z0-9_]\.go$`)
	slashPath = regexp.MustCompile(`^[a-z][a-z0-9_]*(/[a-z0-9_.-]+)+/?$`)
	qualified = regexp.MustCompile(`^([a-z][a-z0-9]*)\.([A-Z][A-Za-z0-9_]*)(\.[A-Za-z][A-Za-z0-9_]*)?(\(.*\))?$`)
	ident     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	method    = regexp.MustCompile(`^([A-Z][A-Za-z0-9_]*)\.([A-Za-z][A-Za-z0-9_]*)(\(.*\))?$`)
	testName  = regexp.MustCompile(`^(Test|Benchmark|Fuzz|Example)[A-Z][A-Za-z0-9_]*$`)
	treeWord  = regexp.MustCompile(`[A-Za-z0-9_/.-]+`)
)

// contextDirs returns the directories a block of text names: every path
// token that is a directory, and the directory of every path to a file.
func contextDirs(block string) []string {
	var dirs []string
	for _, w := range treeWord.FindAllString(block, -1) {
		w = strings.TrimRight(w, ".,;:")
		if !strings.Contains(w, "/") || strings.HasPrefix(w, "/") {
			continue
		}
		w = strings.TrimSuffix(w, "/")
		switch {
		case isDir(w):
			dirs = append(dirs, w)
		case goFile.MatchString(w) && exists(w):
			dirs = append(dirs, pathDir(w))
		}
	}
	return dirs
}

// checkNames checks the code spans of one block of text (a paragraph, a
// table row, an entry of the parts tree): a path names a file or
// directory; a bare file name is in one of the block's directories; a
// qualified name (pkg.Name) is declared by a package of that name; a
// method (Type.Method) by the type's package; a test or benchmark exists; and, with ids, an identifier is declared in one of
// the block's directories.
func checkNames(t *testing.T, s *source, where, block string, ids bool) {
	t.Helper()
	dirs := contextDirs(block)
	pkgs := s.pkgDirs()
	tests := map[string]bool{}
	for p, f := range s.files {
		if isTest(p) {
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
					tests[fd.Name.Name] = true
				}
			}
		}
	}
	for _, m := range codeSpan.FindAllStringSubmatch(block, -1) {
		if q := qualified.FindStringSubmatch(strings.TrimSpace(m[1])); q != nil {
			dirs = append(dirs, pkgs[q[1]]...) // rules.DefaultKinds: its Needs
		}
	}
	inDirs := func(name string) bool {
		for _, d := range dirs {
			if s.declared(d)[name] {
				return true
			}
		}
		return false
	}
	for _, m := range codeSpan.FindAllStringSubmatch(block, -1) {
		tok := strings.TrimSpace(m[1])
		switch {
		case slashPath.MatchString(tok) && !strings.Contains(tok, "{"):
			if !exists(strings.TrimSuffix(tok, "/")) {
				t.Errorf("%s: `%s` does not exist", where, tok)
			}
		case goFile.MatchString(tok):
			found := exists(tok) && strings.Contains(tok, "/")
			for _, d := range dirs {
				found = found || exists(d+"/"+tok)
			}
			if !found {
				t.Errorf("%s: `%s` is in none of %v", where, tok, dirs)
			}
		case testName.MatchString(tok):
			if !tests[tok] {
				t.Errorf("%s: no test %s", where, tok)
			}
		case qualified.MatchString(tok):
			q := qualified.FindStringSubmatch(tok)
			pd, ok := pkgs[q[1]]
			if !ok {
				continue // a config key's section, not a package
			}
			name := q[2] + q[3]
			found := false
			for _, d := range pd {
				found = found || s.declared(d)[name]
			}
			if !found {
				t.Errorf("%s: `%s`: package %s (%v) declares no %s", where, tok, q[1], pd, name)
			}
		case method.MatchString(tok):
			q := method.FindStringSubmatch(tok)
			typed, found := false, false
			for _, ds := range pkgs {
				for _, d := range ds {
					decl := s.declared(d)
					typed = typed || decl[q[1]]
					found = found || decl[q[1]+"."+q[2]]
				}
			}
			if typed && !found {
				t.Errorf("%s: `%s`: no type %s has %s", where, tok, q[1], q[2])
			}
		case ids && ident.MatchString(tok) && strings.ToLower(tok) != tok && len(dirs) > 0:
			if !inDirs(tok) {
				t.Errorf("%s: `%s` is declared in none of %v", where, tok, dirs)
			}
		}
	}
}

// treeEntries returns the parts tree's entries: each unindented line with
// the indented lines under it, and its directory.
func treeEntries(t *testing.T, md string) (entries []string, dirs []string) {
	t.Helper()
	body := section(t, md, "The parts")
	_, rest, ok := strings.Cut(body, "```\n")
	if !ok {
		t.Fatal("the parts: no tree")
	}
	tree, _, _ := strings.Cut(rest, "```")
	for _, l := range strings.Split(strings.TrimRight(tree, "\n"), "\n") {
		if l == "" {
			continue
		}
		if !strings.HasPrefix(l, " ") {
			entries = append(entries, l)
			dirs = append(dirs, strings.Fields(l)[0])
			continue
		}
		if len(entries) == 0 {
			t.Fatalf("the parts: an indented first line %q", l)
		}
		entries[len(entries)-1] += "\n" + l
	}
	return entries, dirs
}

// TestArchitectureNamesExist fails when a file, directory, function or
// name docs/architecture.md gives no longer exists: the parts tree, the
// tick's table (each stop's function in its file, and called from a stop
// above it), the "where to put what you add" table and the prose.
func TestArchitectureNamesExist(t *testing.T) {
	s := repo(t)
	md := architecture(t)

	// The parts: each entry's directory, and every file it names in it
	// (or in a directory the entry names).
	entries, dirs := treeEntries(t, md)
	for i, e := range entries {
		dir := strings.TrimSuffix(dirs[i], "/")
		if !isDir(dir) {
			t.Errorf("the parts: no directory %s", dir)
			continue
		}
		ctx := append([]string{dir}, contextDirs(e)...)
		for _, w := range treeWord.FindAllString(e, -1) {
			w = strings.TrimRight(w, ".,;:")
			if !goFile.MatchString(w) {
				continue
			}
			found := strings.Contains(w, "/") && exists(w)
			for _, d := range ctx {
				found = found || exists(d+"/"+w)
			}
			if !found {
				t.Errorf("the parts, %s: %s is in none of %v", dir, w, ctx)
			}
		}
	}

	// One tick: each stop's file, its function in it, and a caller above.
	rows := tableRows(section(t, md, "One tick"))
	if len(rows) == 0 {
		t.Fatal("one tick: no table")
	}
	var above []*ast.FuncDecl
	for _, r := range rows {
		if len(r) < 4 {
			t.Errorf("one tick: a row of %d cells: %q", len(r), r)
			continue
		}
		file := strings.TrimSpace(strings.TrimSuffix(r[1], "↩"))
		if !exists(file) {
			t.Errorf("one tick, stop %s: no file %s", r[0], file)
			continue
		}
		fn := strings.Trim(r[2], "`")
		if fn == r[2] {
			continue // not a function's name: a rule's compiled closure
		}
		if f := s.files[file]; f != nil {
			fn = strings.TrimPrefix(fn, f.Name.Name+".") // alert.Step
		}
		fd := s.funcs(file)[fn]
		if fd == nil {
			t.Errorf("one tick, stop %s: %s declares no %s", r[0], file, fn)
			continue
		}
		if len(above) > 0 {
			name := fd.Name.Name
			called := false
			for _, a := range above {
				called = called || refers(a, name)
			}
			if !called {
				t.Errorf("one tick, stop %s: %s is called by no stop above it", r[0], fn)
			}
		}
		above = append(above, fd)
	}

	// Where to put what you add: every row, its identifiers too.
	for _, r := range tableRows(section(t, md, "Where to put what you add")) {
		checkNames(t, s, "where to put "+r[0], strings.Join(r[1:], " | "), true)
	}

	// The prose: every paragraph's paths, files, packages' names and tests.
	for i, p := range strings.Split(md, "\n\n") {
		if strings.HasPrefix(p, "```") || strings.HasPrefix(p, "|") {
			continue
		}
		checkNames(t, s, fmt.Sprintf("paragraph %d", i+1), p, false)
	}
}

// engineShape measures Engine: its fields, its methods and the files they
// are in (tests aside).
func engineShape(t *testing.T, s *source) (fields, methods int, files []string) {
	t.Helper()
	in := map[string]bool{}
	for _, p := range s.pkgFiles("engine") {
		if isTest(p) {
			continue
		}
		for _, d := range s.files[p].Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, sp := range d.Specs {
					ts, ok := sp.(*ast.TypeSpec)
					if !ok || ts.Name.Name != "Engine" {
						continue
					}
					st, ok := ts.Type.(*ast.StructType)
					if !ok {
						t.Fatal("engine.Engine is not a struct")
					}
					for _, f := range st.Fields.List {
						fields += max(1, len(f.Names))
					}
				}
			case *ast.FuncDecl:
				if recvName(d) == "Engine" {
					methods++
					in[strings.TrimPrefix(p, "engine/")] = true
				}
			}
		}
	}
	for f := range in {
		files = append(files, f)
	}
	sort.Strings(files)
	return fields, methods, files
}

// TestArchitectureFigures fails when a figure docs/architecture.md states
// is not the one measured on the tree: Engine's fields, methods and the
// files they are in; the tick's stops and returns (the rows and ↩ of its
// table). Line counts, which every change moves, are logged with -v, not
// compared.
func TestArchitectureFigures(t *testing.T) {
	s := repo(t)
	md := architecture(t)

	fields, methods, files := engineShape(t, s)
	t.Logf("Engine: %d fields and %d methods, in %s", fields, methods, strings.Join(files, ", "))
	m := regexp.MustCompile(`(\d+) fields and (\d+) methods, in ([^\n]+(?:\n[^\n]+)*?)\.\n`).FindStringSubmatch(md)
	if m == nil {
		t.Fatal("docs/architecture.md says nowhere \"N fields and M methods, in FILES.\"")
	}
	var said []string
	for _, f := range regexp.MustCompile(`[a-z0-9_]+\.go`).FindAllString(m[3], -1) {
		said = append(said, f)
	}
	sort.Strings(said)
	if m[1] != strconv.Itoa(fields) || m[2] != strconv.Itoa(methods) || strings.Join(said, ",") != strings.Join(files, ",") {
		t.Errorf("docs/architecture.md says Engine has %s fields and %s methods, in %v; the source: %d fields and %d methods, in %v",
			m[1], m[2], said, fields, methods, files)
	}

	rows := tableRows(section(t, md, "One tick"))
	returns := 0
	for _, r := range rows {
		if len(r) > 1 && strings.Contains(r[1], "↩") {
			returns++
		}
	}
	t.Logf("the tick's table: %d stops, %d returns to a file already left", len(rows), returns)
	c := regexp.MustCompile(`\*\*(\d+) stops, (\d+) returns`).FindStringSubmatch(md)
	if c == nil {
		t.Fatal("docs/architecture.md says nowhere \"**N stops, M returns\"")
	}
	if c[1] != strconv.Itoa(len(rows)) || c[2] != strconv.Itoa(returns) {
		t.Errorf("docs/architecture.md says %s stops and %s returns; its table has %d and %d", c[1], c[2], len(rows), returns)
	}

	// The line counts, for the record (go test ./internal/docscheck -v).
	_, dirs := treeEntries(t, md)
	for _, d := range dirs {
		n, nf := 0, 0
		for _, p := range s.pkgFiles(strings.TrimSuffix(d, "/")) {
			if !isTest(p) {
				n += s.fset.File(s.files[p].Pos()).LineCount()
				nf++
			}
		}
		t.Logf("%-16s %6d lines in %2d files (tests aside)", d, n, nf)
	}
}
