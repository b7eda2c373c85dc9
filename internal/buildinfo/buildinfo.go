// Package buildinfo owns the identity of a build of iwf-server and iwf: the
// release, read from the file VERSION beside this one (embedded, so that
// `go build`, `go run` and `go test` all see it; it is the only place the
// release is written), and the commit, build date and Go version of the
// binary.
//
// The commit and date come from the version control stamp Go puts in every
// binary built inside a git checkout (vcs.revision, vcs.time: the commit's
// time, vcs.modified); a build outside git sets them with
//
//	-ldflags "-X github.com/iwf-server/iwf-server/internal/buildinfo.commit=SHA
//	          -X github.com/iwf-server/iwf-server/internal/buildinfo.buildDate=2026-12-06T10:00:00Z"
//
// which `make release` and the Dockerfile do (the date is then the build's).
// What neither gives is "unknown".
//
// The package imports only the standard library's runtime, embed and
// strings packages: the command line links it too.
package buildinfo

import (
	_ "embed"
	"runtime"
	"runtime/debug"
	"strings"
)

// Unknown is the value of a field that the build did not record.
const Unknown = "unknown"

//go:embed VERSION
var versionFile string

// Set with -ldflags -X; they win over the version control stamp.
var (
	commit    string
	buildDate string
)

// Info is the identity of a build.
type Info struct {
	// Release is the release number (semantic versioning, no leading v).
	Release string
	// Commit is the git commit the binary was built from, with "-dirty"
	// when the tree had uncommitted changes; Unknown when not recorded.
	Commit string
	// BuildDate is when the binary was built (RFC 3339, UTC) when the
	// build said so, otherwise the commit's time; Unknown when neither
	// was recorded.
	BuildDate string
	// GoVersion is the Go release that compiled the binary.
	GoVersion string
}

// Release is the release number of this build, from the file VERSION.
func Release() string { return strings.TrimSpace(versionFile) }

// Get returns the identity of the running binary.
func Get() Info {
	var vcs map[string]string
	if bi, ok := debug.ReadBuildInfo(); ok {
		vcs = make(map[string]string)
		for _, s := range bi.Settings {
			vcs[s.Key] = s.Value
		}
	}
	return resolve(Release(), commit, buildDate, runtime.Version(), vcs)
}

// resolve combines the linker's values (win when set) with the version
// control settings of the build.
func resolve(release, commit, date, goVersion string, vcs map[string]string) Info {
	info := Info{Release: release, Commit: commit, BuildDate: date, GoVersion: goVersion}
	if info.Commit == "" {
		if info.Commit = vcs["vcs.revision"]; info.Commit != "" && vcs["vcs.modified"] == "true" {
			info.Commit += "-dirty"
		}
	}
	if info.BuildDate == "" {
		info.BuildDate = vcs["vcs.time"]
	}
	for _, f := range []*string{&info.Release, &info.Commit, &info.BuildDate, &info.GoVersion} {
		if *f == "" {
			*f = Unknown
		}
	}
	return info
}

// String is the one line a person reads, e.g. "1.0.0 (commit 0d68cf9c1b2a,
// built 2026-12-06T10:00:00Z, go1.26.8)".
func (i Info) String() string {
	return i.Release + " (commit " + i.ShortCommit() + ", built " + i.BuildDate + ", " + i.GoVersion + ")"
}

// ShortCommit is the commit's first 12 characters (and "-dirty").
func (i Info) ShortCommit() string {
	c, dirty := strings.CutSuffix(i.Commit, "-dirty")
	if len(c) > 12 {
		c = c[:12]
	}
	if dirty {
		c += "-dirty"
	}
	return c
}

// Lines is the identity as the version commands print it, one field a line:
//
//	release:    1.0.0
//	commit:     0d68cf9c1b2a...
//	build date: 2026-12-06T10:00:00Z
//	go version: go1.26.8
func (i Info) Lines() string {
	return "release:    " + i.Release + "\n" +
		"commit:     " + i.Commit + "\n" +
		"build date: " + i.BuildDate + "\n" +
		"go version: " + i.GoVersion + "\n"
}
