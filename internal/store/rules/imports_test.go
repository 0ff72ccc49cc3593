package rules_test

import (
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestTheRulesImportNoDatabaseCode holds the package to values in, values out: its files
// import the standard library and vocab only (no pgx, no sqlc output, no store).
func TestTheRulesImportNoDatabaseCode(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(path, "/")
			if strings.Contains(first, ".") && path != "github.com/ilinkflow/ilinkflow/vocab" {
				t.Errorf("%s imports %s: the rules import only the standard library and vocab", e.Name(), path)
			}
		}
	}
}
