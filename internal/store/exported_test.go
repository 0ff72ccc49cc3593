package store_test

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

	"github.com/ilinkflow/ilinkflow/internal/testkit"
)

// storeImportPath is the import path of the package whose exported API the test checks.
const storeImportPath = "github.com/ilinkflow/ilinkflow/internal/store"

// interfaceMethods are method names the standard library calls through an interface
// (error, errors.Is/As/Unwrap, fmt, slog, encoding/json): such a method has callers
// without a selector naming it.
var interfaceMethods = map[string]bool{
	"Error": true, "Unwrap": true, "Is": true, "As": true, "String": true, "GoString": true,
	"Format": true, "LogValue": true, "MarshalJSON": true, "UnmarshalJSON": true,
	"MarshalText": true, "UnmarshalText": true,
}

// TestEveryExportedStoreMethodHasAProductionCaller: the store's API is what production
// calls. An exported function, or an exported method of an exported type, of package
// store that no non-test file of the module refers to is a rule kept alive by tests alone
// (a twin of the production path, or a leftover): tests must go through the methods
// production calls. Generated code and the test-support packages (…test, testkit) are
// no production callers. The references are found by syntax: outside package store, a
// selector naming the method in a package that imports the store, or a method of that
// name in an interface (a consumer's interface the store satisfies); inside it, a call
// through a receiver, parameter or field of the method's type.
func TestEveryExportedStoreMethodHasAProductionCaller(t *testing.T) {
	root := testkit.ModuleRoot(t)
	storeDir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	if rel, err := filepath.Rel(root, storeDir); err != nil || filepath.ToSlash(rel) != "internal/store" {
		t.Fatalf("the test runs in %s, want the store's directory under the module root %s", storeDir, root)
	}
	files := parseModule(t, root)

	// The exported API: functions, and methods of exported types.
	type api struct{ recv, name string }
	declared := map[api]token.Position{}
	fieldTypes := map[string]string{} // store struct fields by name, of an exported store type
	for _, f := range files {
		if f.dir != storeDir {
			continue
		}
		for _, d := range f.ast.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				recv := ""
				if d.Recv != nil {
					recv = typeName(d.Recv.List[0].Type)
					if !ast.IsExported(recv) || interfaceMethods[d.Name.Name] {
						continue
					}
				}
				declared[api{recv, d.Name.Name}] = f.fset.Position(d.Pos())
			case *ast.GenDecl:
				ast.Inspect(d, func(n ast.Node) bool {
					if st, ok := n.(*ast.StructType); ok {
						for _, fld := range st.Fields.List {
							if tn := typeName(fld.Type); ast.IsExported(tn) {
								for _, name := range fld.Names {
									fieldTypes[name.Name] = tn
								}
							}
						}
					}
					return true
				})
			}
		}
	}
	if len(declared) == 0 {
		t.Fatal("found no exported function or method in package store")
	}

	importsStore := map[string]bool{} // directories with a file importing the store
	for _, f := range files {
		for _, imp := range f.ast.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == storeImportPath {
				importsStore[f.dir] = true
			}
		}
	}

	used := map[api]bool{}
	for _, f := range files {
		if f.dir == storeDir {
			markStoreUses(f.ast, fieldTypes, func(recv, name string) { used[api{recv, name}] = true })
			continue
		}
		storeName := ""
		for _, imp := range f.ast.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == storeImportPath {
				storeName = "store"
				if imp.Name != nil {
					storeName = imp.Name.Name
				}
			}
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && storeName != "" && x.Name == storeName {
					used[api{"", n.Sel.Name}] = true
				}
				if importsStore[f.dir] {
					used[api{"*", n.Sel.Name}] = true
				}
			case *ast.InterfaceType:
				for _, m := range n.Methods.List {
					for _, name := range m.Names {
						used[api{"*", name.Name}] = true
					}
				}
			}
			return true
		})
	}

	var dead []string
	for a, pos := range declared {
		if used[a] || (a.recv != "" && used[api{"*", a.name}]) {
			continue
		}
		name := a.name
		if a.recv != "" {
			name = a.recv + "." + a.name
		}
		dead = append(dead, name+" ("+filepath.Base(pos.Filename)+":"+strconv.Itoa(pos.Line)+")")
	}
	sort.Strings(dead)
	if len(dead) > 0 {
		t.Errorf("exported by package store with no production caller (delete it, or call it from production code; "+
			"tests go through the methods production calls):\n\t%s", strings.Join(dead, "\n\t"))
	}
}

// markStoreUses reports the uses inside package store of its own functions and methods:
// an identifier naming a function, and a selector on a receiver or parameter of the
// method's type, or on a field of that type (r.s.Method). Selectors on anything else (the
// generated queries share many names with the store's methods) are not uses.
func markStoreUses(f *ast.File, fieldTypes map[string]string, use func(recv, name string)) {
	for _, d := range f.Decls {
		typed := map[string]string{} // receiver and parameters by name, of an exported type
		add := func(fl *ast.FieldList) {
			if fl == nil {
				return
			}
			for _, fld := range fl.List {
				if tn := typeName(fld.Type); ast.IsExported(tn) {
					for _, name := range fld.Names {
						typed[name.Name] = tn
					}
				}
			}
		}
		var visit func(n ast.Node) bool
		visit = func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncLit:
				add(n.Type.Params)
			case *ast.SelectorExpr:
				switch x := n.X.(type) {
				case *ast.Ident:
					if tn, ok := typed[x.Name]; ok {
						use(tn, n.Sel.Name)
					}
				case *ast.SelectorExpr:
					if tn, ok := fieldTypes[x.Sel.Name]; ok {
						use(tn, n.Sel.Name)
					}
				}
				ast.Inspect(n.X, visit) // n.Sel names a field or method, not a function
				return false
			case *ast.Ident:
				use("", n.Name)
			}
			return true
		}
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			ast.Inspect(d, visit)
			continue
		}
		add(fd.Recv)
		add(fd.Type.Params)
		if fd.Body != nil {
			ast.Inspect(fd.Body, visit)
		}
	}
}

// typeName is the name of a type expression T or *T ("" for any other).
func typeName(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

type parsedFile struct {
	dir  string
	fset *token.FileSet
	ast  *ast.File
}

// parseModule parses every non-test, non-generated .go file of the module outside the
// test-support packages (a package named …test or testkit).
func parseModule(t *testing.T, root string) []parsedFile {
	t.Helper()
	fset := token.NewFileSet()
	var out []parsedFile
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" ||
				name == "vendor" || name == "node_modules") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); path != root && err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) || strings.HasSuffix(f.Name.Name, "test") || f.Name.Name == "testkit" {
			return nil
		}
		out = append(out, parsedFile{dir: filepath.Dir(path), fset: fset, ast: f})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
