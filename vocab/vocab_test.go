package vocab_test

import (
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// checkedDirs are the packages that must take their vocabulary from package vocab. The
// iLink client and the simulator mirror the wire protocol on purpose (their words are
// iLink's, which ours repeat), and generated code is sqlc's.
var checkedDirs = []string{"activities", "internal/activity", "agent", "internal/gateway", "internal/handoff",
	"internal/metrics", "internal/operator", "internal/replyapi", "starter", "internal/store", "internal/webui", "wfapi",
	"workflows", "worker"}

// allowed are literals equal to a vocabulary word or limit that mean something else where
// they stand (file:literal → what it means there).
var allowed = map[string]string{
	"internal/activity/lease.go:released":   "why a poll lease was lost, not a send's fail type",
	"wfapi/wfapi.go:retired":                "the name of a signal to a window workflow",
	"internal/replyapi/replyapi.go:unknown": "an unknown endpoint, in request metrics",
	"internal/activity/windows.go:unknown":  "a workflow status the server did not name",
	"internal/activity/convert.go:2048":     "the bound of a quoted message's text, not of a reason",
	"internal/gateway/probes.go:starting":   "why /readyz is not ready yet, not an enrollment state",
	"starter/main.go:held":                  "the name of the starter command held",
	"starter/held.go:held":                  "the name of the starter command held",
}

// A literal that the vocabulary package defines, written again in another package,
// is a second place for one rule: this test fails on each (strings equal to a word of
// vocab.go, and the text and reason limits as numbers).
func TestNoVocabularyLiteralIsWrittenOutsideTheVocabulary(t *testing.T) {
	words, limits := vocabulary(t)
	fset := token.NewFileSet()
	for _, dir := range checkedDirs {
		err := filepath.WalkDir(filepath.Join("..", dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			rel := filepath.ToSlash(strings.TrimPrefix(path, "../"))
			tags := map[*ast.BasicLit]bool{}
			ast.Inspect(f, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.Field:
					if n.Tag != nil {
						tags[n.Tag] = true
					}
				case *ast.BasicLit:
					if tags[n] {
						return true
					}
					switch n.Kind {
					case token.STRING:
						v, err := strconv.Unquote(n.Value)
						if err == nil && words[v] != "" {
							if _, ok := allowed[rel+":"+v]; !ok {
								t.Errorf("%s: %q is vocab.%s; use the constant", fset.Position(n.Pos()), v, words[v])
							}
						}
					case token.INT:
						if name := limits[n.Value]; name != "" && allowed[rel+":"+n.Value] == "" {
							t.Errorf("%s: %s is vocab.%s; use the constant", fset.Position(n.Pos()), n.Value, name)
						}
					}
				case *ast.BinaryExpr:
					if v, ok := constValue(n); ok {
						if name := limits[v]; name != "" && allowed[rel+":"+v] == "" {
							t.Errorf("%s: %s is vocab.%s; use the constant", fset.Position(n.Pos()), v, name)
						}
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// vocabulary reads vocab.go: its string constants (value → name) and the byte limits
// whose number must not appear elsewhere (value → name).
func vocabulary(t *testing.T) (words, limits map[string]string) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "vocab.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	words, limits = map[string]string{}, map[string]string{}
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				switch v := vs.Values[i].(type) {
				case *ast.BasicLit:
					if s, err := strconv.Unquote(v.Value); err == nil && v.Kind == token.STRING {
						words[s] = name.Name
					}
				case *ast.BinaryExpr:
					if n, ok := constValue(v); ok && strings.HasSuffix(name.Name, "Bytes") {
						limits[n] = name.Name
					}
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.INT && strings.HasSuffix(name.Name, "Bytes") {
					limits[lit.Value] = name.Name
				}
			}
		}
	}
	if len(words) < 40 || limits["16384"] == "" || limits["2048"] == "" {
		t.Fatalf("vocab.go read wrong: %d words, limits %v", len(words), limits)
	}
	return words, limits
}

// constValue evaluates a binary expression of two integer literals (16 << 10).
func constValue(e *ast.BinaryExpr) (string, bool) {
	x, ok1 := e.X.(*ast.BasicLit)
	y, ok2 := e.Y.(*ast.BasicLit)
	if !ok1 || !ok2 || x.Kind != token.INT || y.Kind != token.INT {
		return "", false
	}
	a, b := constant.MakeFromLiteral(x.Value, token.INT, 0), constant.MakeFromLiteral(y.Value, token.INT, 0)
	var v constant.Value
	switch e.Op {
	case token.SHL:
		s, _ := constant.Uint64Val(b)
		v = constant.Shift(a, token.SHL, uint(s))
	case token.MUL:
		v = constant.BinaryOp(a, token.MUL, b)
	default:
		return "", false
	}
	return v.ExactString(), true
}
