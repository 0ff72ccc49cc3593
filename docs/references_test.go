package docs

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// outsideNames are documents that exist only outside the repository: a reference to one
// of them resolves nowhere for a reader of the repository, unless a file of that name is
// part of it.
var outsideNames = []string{"design.md", "ilink-protocol.md", "temporal-notes.md"}

// outsidePaths are path fragments that point outside the repository.
var outsidePaths = []string{"../shared", "../seeds/", "/work/"}

// guards are the files that spell out the references they look for.
var guards = map[string]bool{"docs/docs_test.go": true, "docs/references_test.go": true}

// docRef is a reference to a document of the repository by its path from the root, with
// an optional section anchor: docs/architecture.md#data-model.
var docRef = regexp.MustCompile(`(?:^|[^\w./-])(docs/[\w.-]+\.md)(#[\w-]+)?`)

// TestNoReferenceLeavesTheRepo reads every text file of the repository (Go, SQL,
// markdown, YAML, shell, the Dockerfile and the CI scripts) and fails on a reference to
// a file outside it: a document that is not in the repository, the development
// workspace, an absolute path of the machine it was written on. It also checks that
// every reference to a document by its path (docs/x.md, docs/x.md#section) and every
// relative link of a markdown file names a file that exists and, when it names a
// section, a heading of that file.
func TestNoReferenceLeavesTheRepo(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files, names := textFiles(t, root)
	var outside []string
	for _, n := range outsideNames {
		if !names[n] {
			outside = append(outside, n)
		}
	}
	outside = append(outside, outsidePaths...)
	anchors := map[string]map[string]bool{} // file (from the root) → its heading anchors
	for _, rel := range files {
		raw, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		if guards[rel] {
			continue
		}
		for i, line := range strings.Split(string(raw), "\n") {
			for _, o := range outside {
				if strings.Contains(line, o) {
					t.Errorf("%s:%d refers to %q, which is outside the repository: cite the repository's own document or state the rule", rel, i+1, o)
				}
			}
		}
		for _, m := range docRef.FindAllStringSubmatch(string(raw), -1) {
			checkTarget(t, root, anchors, rel, m[1], strings.TrimPrefix(m[2], "#"), m[1]+m[2])
		}
		if strings.HasSuffix(rel, ".md") {
			for _, m := range mdLink.FindAllStringSubmatch(withoutCode(string(raw)), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				if path == "" {
					path = rel
				} else {
					path = filepath.ToSlash(filepath.Join(filepath.Dir(rel), path))
				}
				checkTarget(t, root, anchors, rel, path, anchor, "link "+target)
			}
		}
	}
}

// checkTarget reports a reference from file from to path (from the root) that names no
// file of the repository, or a section (anchor, "" for none) that the markdown file at
// path has no heading for.
func checkTarget(t *testing.T, root string, anchors map[string]map[string]bool, from, path, anchor, ref string) {
	t.Helper()
	if path == ".." || strings.HasPrefix(path, "../") {
		t.Errorf("%s: %s points outside the repository", from, ref)
		return
	}
	if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(path))); err != nil {
		t.Errorf("%s: %s names a file that does not exist (%s)", from, ref, path)
		return
	}
	if anchor == "" || !strings.HasSuffix(path, ".md") {
		return
	}
	if anchors[path] == nil {
		raw, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
		if err != nil {
			t.Fatal(err)
		}
		anchors[path] = headingAnchors(string(raw))
	}
	if !anchors[path][anchor] {
		t.Errorf("%s: %s names a section that %s has no heading for (#%s)", from, ref, path, anchor)
	}
}

// textFiles lists the repository's text files (from the root, with slashes) and the set
// of every file name in it.
func textFiles(t *testing.T, root string) (files []string, names map[string]bool) {
	t.Helper()
	names = map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, root+string(filepath.Separator)))
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") && rel != ".ci" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		names[d.Name()] = true
		switch ext := filepath.Ext(rel); {
		case ext == ".go", ext == ".md", ext == ".sql", ext == ".yaml", ext == ".yml", ext == ".sh",
			d.Name() == "Dockerfile", strings.HasPrefix(rel, ".ci/"):
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 100 || !names["go.mod"] {
		t.Fatalf("found %d text files under %s: not the repository's root", len(files), root)
	}
	return files, names
}

// headingAnchors returns the anchors a markdown renderer gives the headings of a
// document (outside code blocks): lower case, punctuation dropped, spaces as hyphens,
// a repeated one numbered.
func headingAnchors(doc string) map[string]bool {
	anchors, seen := map[string]bool{}, map[string]int{}
	sc := bufio.NewScanner(strings.NewReader(withoutCode(doc)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		text := strings.TrimLeft(line, "#")
		if len(text) == len(line) || len(line)-len(text) > 6 || !strings.HasPrefix(text, " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(text)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			seen[a]++
			a += "-" + strconv.Itoa(n)
		} else {
			seen[a] = 1
		}
		anchors[a] = true
	}
	return anchors
}

// withoutCode blanks the fenced code blocks of a markdown document (keeping its lines),
// whose "#" lines are comments, not headings, and whose brackets are not links.
func withoutCode(doc string) string {
	lines := bytes.Split([]byte(doc), []byte("\n"))
	in := false
	for i, l := range lines {
		if bytes.HasPrefix(bytes.TrimSpace(l), []byte("```")) {
			in = !in
			lines[i] = nil
			continue
		}
		if in {
			lines[i] = nil
		}
	}
	return string(bytes.Join(lines, []byte("\n")))
}
