package docs

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxGoFileLines is the most lines a hand-written Go file may have: past it, split the
// file by concern into files of the same package.
const maxGoFileLines = 800

func TestNoHandWrittenGoFileIsOver800Lines(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" || d.Name() == "node_modules" { // npm installs what tests run, not ours
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if isGenerated(raw) {
			return nil
		}
		if n := bytes.Count(raw, []byte("\n")); n > maxGoFileLines {
			rel, _ := filepath.Rel(root, path)
			t.Errorf("%s has %d lines, want at most %d (split it by concern)", filepath.ToSlash(rel), n, maxGoFileLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// isGenerated reports whether a Go file says it is generated: a line before its package
// clause of the form "// Code generated ... DO NOT EDIT.".
func isGenerated(src []byte) bool {
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "package ") {
			return false
		}
		if strings.HasPrefix(line, "//") && strings.Contains(line, "Code generated") && strings.Contains(line, "DO NOT EDIT") {
			return true
		}
	}
	return false
}
