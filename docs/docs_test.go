// Package docs holds the repository's documentation; its tests check that the README
// stays short, that no link leaves the repository except to public URLs, and that no
// reference in the code or the documents points outside the repository or at a missing
// file or section.
package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

func TestTheREADMEStaysShort(t *testing.T) {
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), "\n"); n >= 300 {
		t.Fatalf("README.md has %d lines, want under 300 (move the detail to docs/)", n)
	}
}

func TestNoDocumentLinksOutsideTheRepository(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../README.md")
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(raw)
		if strings.Contains(text, "../shared/") {
			t.Errorf("%s points at the development workspace (../shared/)", f)
		}
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			switch {
			case strings.HasPrefix(target, "https://"), strings.HasPrefix(target, "http://"), strings.HasPrefix(target, "#"):
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			abs, err := filepath.Abs(filepath.Join(filepath.Dir(f), target))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(abs, root+string(filepath.Separator)) {
				t.Errorf("%s links outside the repository: %s", f, m[1])
				continue
			}
			if _, err := os.Stat(abs); err != nil {
				t.Errorf("%s links to a missing file: %s", f, m[1])
			}
		}
	}
}
