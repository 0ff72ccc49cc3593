package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// A public package is what an agent or an integrator imports: everything it exports must be
// usable from outside the module. A type of an internal package in an exported signature,
// field or type is not (nobody outside can name or build it), so such an API belongs under
// internal/ itself. Public packages may use internal packages in their unexported code.
func TestPublicPackagesExposeNoInternalType(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	pkgs := publicPackages(t, root)
	if len(pkgs) == 0 {
		t.Fatal("no public package found")
	}
	for _, dir := range pkgs {
		for _, leak := range internalTypesExposed(t, filepath.Join(root, dir)) {
			t.Errorf("%s: %s", dir, leak)
		}
	}
}

// The README's table names every public package, so that the public surface is a decision
// and not an accident of where a file was put.
func TestEveryPublicPackageIsNamedInTheREADME(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range publicPackages(t, root) {
		if !strings.Contains(string(readme), "`"+dir+"/`") {
			t.Errorf("public package %s/ is not in the README's table of packages", dir)
		}
	}
}

// publicPackages lists the directories (relative to root, slash-separated) that hold a
// non-main Go package outside internal/ and testdata/.
func publicPackages(t *testing.T, root string) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		name := d.Name()
		if path != root && (strings.HasPrefix(name, ".") || name == "internal" || name == "testdata" || name == "node_modules") {
			return filepath.SkipDir
		}
		files := goFiles(t, path)
		if len(files) == 0 {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), files[0], nil, parser.PackageClauseOnly)
		if err != nil {
			return err
		}
		if f.Name.Name != "main" && path != root {
			rel, _ := filepath.Rel(root, path)
			dirs = append(dirs, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(dirs)
	return dirs
}

// goFiles lists a directory's non-test Go files.
func goFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".go") && !strings.HasSuffix(e.Name(), "_test.go") {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	return files
}

// internalTypesExposed returns, for a package directory, each exported declaration that
// names a type of an internal package.
func internalTypesExposed(t *testing.T, dir string) []string {
	t.Helper()
	var leaks []string
	for _, path := range goFiles(t, dir) {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		internal := map[string]string{} // import name → path, for internal imports
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !strings.Contains(p, "/internal/") && !strings.HasSuffix(p, "/internal") {
				continue
			}
			name := p[strings.LastIndex(p, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			internal[name] = p
		}
		if len(internal) == 0 {
			continue
		}
		report := func(what string, n ast.Node) {
			ast.Inspect(n, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok {
					if p, ok := internal[x.Name]; ok {
						leaks = append(leaks, what+" names "+p+"."+sel.Sel.Name+" ("+filepath.Base(path)+":"+strconv.Itoa(fset.Position(sel.Pos()).Line)+")")
					}
				}
				return true
			})
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() || (d.Recv != nil && !exportedReceiver(d.Recv)) {
					continue
				}
				report(d.Name.Name, d.Type)
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							report(s.Name.Name, exportedPart(s.Type))
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() && s.Type != nil {
								report(n.Name, s.Type)
							}
						}
					}
				}
			}
		}
	}
	return leaks
}

// exportedReceiver reports whether a method's receiver type is exported.
func exportedReceiver(recv *ast.FieldList) bool {
	if recv == nil || len(recv.List) == 0 {
		return false
	}
	expr := recv.List[0].Type
	if star, ok := expr.(*ast.StarExpr); ok {
		expr = star.X
	}
	if idx, ok := expr.(*ast.IndexExpr); ok {
		expr = idx.X
	}
	if idx, ok := expr.(*ast.IndexListExpr); ok {
		expr = idx.X
	}
	id, ok := expr.(*ast.Ident)
	return ok && id.IsExported()
}

// exportedPart returns what of a type an importer sees: for a struct, its exported and
// embedded fields only; for anything else, the whole type.
func exportedPart(expr ast.Expr) ast.Node {
	st, ok := expr.(*ast.StructType)
	if !ok {
		return expr
	}
	visible := &ast.FieldList{}
	for _, field := range st.Fields.List {
		if len(field.Names) == 0 {
			visible.List = append(visible.List, field)
			continue
		}
		for _, n := range field.Names {
			if n.IsExported() {
				visible.List = append(visible.List, field)
				break
			}
		}
	}
	return visible
}
