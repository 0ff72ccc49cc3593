package wfclient_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ilinkflow/ilinkflow/internal/testkit"
)

// TestAReplyWindowIsStartedFromOnePlace holds the module's non-test code to one start of
// a ReplyWindow workflow: startWindow is called from LaunchWindow only, no other code
// starts the workflow type itself, and LaunchWindow alone makes a first offer before the
// start (firstOffer), so that a poll, a sync and a reconcile start a window the same way.
func TestAReplyWindowIsStartedFromOnePlace(t *testing.T) {
	calls := callSites(t, testkit.ModuleRoot(t))
	if got := calls["startWindow"]; len(got) != 1 || got[0].fn != "LaunchWindow" || got[0].dir != "internal/wfclient" {
		t.Errorf("startWindow is called from %v, want once, from wfclient.LaunchWindow (every caller uses LaunchWindow)", got)
	}
	if got := calls["firstOffer"]; len(got) != 1 || got[0].fn != "LaunchWindow" || got[0].dir != "internal/wfclient" {
		t.Errorf("firstOffer is called from %v, want once, from wfclient.LaunchWindow", got)
	}
	if got := calls["wfapi.ReplyWindowWorkflow"]; len(got) != 1 || got[0].fn != "startWindow" || got[0].dir != "internal/wfclient" {
		t.Errorf("a ReplyWindow workflow is started from %v, want only wfclient.startWindow", got)
	}
}

// site is one call: the directory (relative to the module root) and the function it is in.
type site struct{ dir, file, fn string }

func (s site) String() string { return s.dir + "/" + s.file + ":" + s.fn }

// callSites parses every non-test Go file under root and returns, by name, the calls of
// functions named startWindow or firstOffer (bare or package-qualified), and the calls
// that pass wfapi.ReplyWindowWorkflow (the workflow type) as an argument.
func callSites(t *testing.T, root string) map[string][]site {
	t.Helper()
	calls := map[string][]site{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			at := site{dir: filepath.ToSlash(rel), file: filepath.Base(path), fn: fd.Name.Name}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if name := calledName(call.Fun); name == "startWindow" || name == "firstOffer" {
					calls[name] = append(calls[name], at)
				}
				for _, arg := range call.Args {
					if sel, ok := arg.(*ast.SelectorExpr); ok && sel.Sel.Name == "ReplyWindowWorkflow" {
						if x, ok := sel.X.(*ast.Ident); ok && x.Name == "wfapi" {
							calls["wfapi.ReplyWindowWorkflow"] = append(calls["wfapi.ReplyWindowWorkflow"], at)
						}
					}
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return calls
}

// calledName is the name of a called function: f for f(...) and pkg.f(...).
func calledName(fun ast.Expr) string {
	switch f := fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		if x, ok := f.X.(*ast.Ident); ok && x.Name == "wfclient" {
			return f.Sel.Name
		}
	}
	return ""
}
