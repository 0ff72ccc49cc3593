package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func buildInfo(mainVersion string, settings ...string) *debug.BuildInfo {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/ilinkflow/ilinkflow", Version: mainVersion}}
	for i := 0; i+1 < len(settings); i += 2 {
		bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
	}
	return bi
}

func TestStampedFieldsWinOverTheBuildInfo(t *testing.T) {
	bi := buildInfo("v0.0.0-20261201000000-aaaaaaaaaaaa", "vcs.revision", "aaaa", "vcs.time", "2026-12-01T00:00:00Z", "vcs.modified", "true")
	got := resolve("v1.2.3", "0de5872", "2026-12-02T10:00:00Z", bi)
	want := Info{Version: "v1.2.3", Commit: "0de5872", Date: "2026-12-02T10:00:00Z", GoVersion: "go1.26.8"}
	if got != want {
		t.Fatalf("resolve = %+v, want %+v", got, want)
	}
}

func TestAnUnstampedBuildFallsBackToTheVCSRevisionAndCommitTime(t *testing.T) {
	bi := buildInfo("(devel)", "vcs", "git", "vcs.revision", "0de5872abc", "vcs.time", "2026-12-01T09:00:00Z", "vcs.modified", "false")
	got := resolve("", "", "", bi)
	want := Info{Version: "devel", Commit: "0de5872abc", Date: "2026-12-01T09:00:00Z", GoVersion: "go1.26.8"}
	if got != want {
		t.Fatalf("resolve = %+v, want %+v", got, want)
	}
}

func TestAModifiedWorkingTreeIsMarkedDirty(t *testing.T) {
	bi := buildInfo("(devel)", "vcs.revision", "0de5872abc", "vcs.modified", "true")
	if got := resolve("", "", "", bi).Commit; got != "0de5872abc-dirty" {
		t.Fatalf("commit = %q, want 0de5872abc-dirty", got)
	}
}

func TestAGoInstallOfATaggedModuleShowsTheModuleVersion(t *testing.T) {
	// go install module@v1.2.3 records the module version and no VCS settings.
	got := resolve("", "", "", buildInfo("v1.2.3"))
	want := Info{Version: "v1.2.3", Commit: Unknown, Date: Unknown, GoVersion: "go1.26.8"}
	if got != want {
		t.Fatalf("resolve = %+v, want %+v", got, want)
	}
}

func TestWithoutStampOrBuildInfoEveryFieldSaysSo(t *testing.T) {
	got := resolve("", "", "", nil)
	if got.Version != "devel" || got.Commit != Unknown || got.Date != Unknown || got.GoVersion == "" {
		t.Fatalf("resolve = %+v, want devel, unknown, unknown and the runtime's Go version", got)
	}
}

func TestTheVersionLineNamesTheProgramVersionCommitAndDate(t *testing.T) {
	i := Info{Version: "v1.2.3", Commit: "0de5872", Date: "2026-12-02T10:00:00Z", GoVersion: "go1.26.8"}
	if got, want := i.String(), "v1.2.3 (commit 0de5872, built 2026-12-02T10:00:00Z, go1.26.8)"; got != want {
		t.Fatalf("String = %q, want %q", got, want)
	}
	if got := Line("worker"); !strings.HasPrefix(got, "worker ") || !strings.Contains(got, "(commit ") {
		t.Fatalf("Line = %q, want \"worker <version> (commit …\"", got)
	}
}
