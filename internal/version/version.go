// Package version is the build's identity: the release version, the commit and the build
// date, stamped by the linker at build time (.ci/build-binaries, the Dockerfile and
// .goreleaser.yaml pass the same -ldflags):
//
//	-X github.com/ilinkflow/ilinkflow/internal/version.version=v1.2.3
//	-X github.com/ilinkflow/ilinkflow/internal/version.commit=<full hash>
//	-X github.com/ilinkflow/ilinkflow/internal/version.date=<RFC 3339 UTC>
//
// A binary built without them (go build, go install, go run) falls back to what the Go
// toolchain records in it: the module version (go install …@v1.2.3), and the VCS revision
// and commit time of a build inside the repository.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Stamped by the linker (-X); empty in a build without -ldflags.
var (
	version string
	commit  string
	date    string
)

// Unknown is shown for a field that neither the linker nor the build info gives.
const Unknown = "unknown"

// Info is the identity of a build.
type Info struct {
	// Version is the release version (v1.2.3), the module version of a go install, or
	// "devel" for a build of a working tree.
	Version string
	// Commit is the VCS revision, with "-dirty" when the tree had local changes (build
	// info only), or Unknown.
	Commit string
	// Date is the build date (stamped), else the commit time (build info), or Unknown.
	Date string
	// GoVersion is the Go toolchain the binary was built with.
	GoVersion string
}

// Get returns the identity of the running binary: the stamped fields, each falling back
// to the build info the Go toolchain recorded.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return resolve(version, commit, date, bi)
}

// resolve merges stamped fields with the build info (nil: none recorded).
func resolve(stampedVersion, stampedCommit, stampedDate string, bi *debug.BuildInfo) Info {
	info := Info{Version: stampedVersion, Commit: stampedCommit, Date: stampedDate, GoVersion: runtime.Version()}
	if bi == nil {
		return fill(info)
	}
	if bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		info.Version = bi.Main.Version
	}
	var revision, vcsTime string
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.time":
			vcsTime = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if info.Commit == "" && revision != "" {
		info.Commit = revision
		if modified {
			info.Commit += "-dirty"
		}
	}
	if info.Date == "" {
		info.Date = vcsTime
	}
	return fill(info)
}

func fill(info Info) Info {
	if info.Version == "" {
		info.Version = "devel"
	}
	if info.Commit == "" {
		info.Commit = Unknown
	}
	if info.Date == "" {
		info.Date = Unknown
	}
	return info
}

// String is the one line `--version` prints, without the program's name:
// "v1.2.3 (commit 0de5872…, built 2026-12-02T10:00:00Z, go1.26.8)".
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, built %s, %s)", i.Version, i.Commit, i.Date, i.GoVersion)
}

// Line is what `<program> --version` prints: the program's name, then [Info.String].
func Line(program string) string {
	return strings.TrimSpace(program) + " " + Get().String()
}
