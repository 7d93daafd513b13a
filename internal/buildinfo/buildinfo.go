package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Set at link time with -ldflags "-X github.com/hookroom/hookroom/internal/buildinfo.NAME=value".
// Empty means not stamped; Read then falls back to the toolchain's build
// information.
var (
	// Version is the release, "1.2.3" (a leading "v" is dropped).
	Version string
	// Revision is the full commit hash the binary was built from.
	Revision string
	// Date is the commit time (not the build time: release builds are
	// reproducible), RFC 3339 in UTC, e.g. 2026-11-29T04:00:00Z.
	Date string
	// Modified is "true" when the tree had uncommitted changes.
	Modified string
)

// Dev is the version of a build that was neither stamped nor installed by
// module version.
const Dev = "dev"

// Info describes one build. The zero value is an unknown build; Read
// returns the running binary's.
type Info struct {
	// Version is the release ("1.2.3", or a Go pseudo-version such as
	// "0.0.0-20261129040000-abcdef123456" for go install …@commit), or Dev.
	// Never empty.
	Version string
	// Revision is the full commit hash, or "" when unknown.
	Revision string
	// Date is the commit time, RFC 3339, or "" when unknown.
	Date string
	// Modified reports a build from a tree with uncommitted changes.
	Modified bool
	// GoVersion is the toolchain that built the binary, e.g. "go1.26.8".
	GoVersion string
	// Platform is GOOS/GOARCH, e.g. "linux/amd64".
	Platform string
}

// Read returns the running binary's build: the stamped variables, each one
// missing filled from runtime/debug.ReadBuildInfo. It is cheap and may be
// called at any time from any goroutine.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	return merge(stamp{Version, Revision, Date, Modified}, bi)
}

// stamp is what the linker set.
type stamp struct{ version, revision, date, modified string }

// merge fills what s leaves empty from bi (nil when the binary carries no
// build information).
func merge(s stamp, bi *debug.BuildInfo) Info {
	in := Info{
		Version:   normalize(s.version),
		Revision:  s.revision,
		Date:      s.date,
		Modified:  s.modified == "true",
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
	if bi != nil {
		if bi.GoVersion != "" {
			in.GoVersion = bi.GoVersion
		}
		if in.Version == "" && bi.Main.Version != "(devel)" {
			in.Version = normalize(bi.Main.Version)
		}
		// The VCS settings describe one checkout: take them together, and
		// only when the revision was not stamped (a stamped revision with
		// another checkout's time would name no build).
		if in.Revision == "" {
			for _, kv := range bi.Settings {
				switch kv.Key {
				case "vcs.revision":
					in.Revision = kv.Value
				case "vcs.time":
					if in.Date == "" {
						in.Date = kv.Value
					}
				case "vcs.modified":
					in.Modified = kv.Value == "true"
				}
			}
		}
	}
	if in.Version == "" {
		in.Version = Dev
	}
	return in
}

// normalize drops the "v" of a Go module version ("v1.2.3" → "1.2.3"), so
// a release reads the same whether it was built by scripts/release.sh or
// installed with go install …@v1.2.3.
func normalize(v string) string {
	v = strings.TrimSpace(v)
	if len(v) > 1 && v[0] == 'v' && v[1] >= '0' && v[1] <= '9' {
		return v[1:]
	}
	return v
}

// ShortRevision is the first 12 characters of the revision, as git log
// --abbrev=12 prints it; "" when unknown.
func (in Info) ShortRevision() string {
	return in.Revision[:min(len(in.Revision), 12)]
}

// String is the line `hookroom version` prints, e.g.
//
//	hookroom 1.2.3 (revision abcdef123456, 2026-11-29T04:00:00Z) go1.26.8 linux/amd64
//	hookroom dev go1.26.8 linux/amd64
//
// The second word is always Version, the label hookroom_build_info carries.
func (in Info) String() string {
	var b strings.Builder
	b.WriteString("hookroom ")
	version := in.Version
	if version == "" {
		version = Dev
	}
	b.WriteString(version)
	var details []string
	if in.Revision != "" {
		details = append(details, "revision "+in.ShortRevision())
	}
	if in.Date != "" {
		details = append(details, in.Date)
	}
	if in.Modified {
		details = append(details, "modified")
	}
	if len(details) > 0 {
		b.WriteString(" (" + strings.Join(details, ", ") + ")")
	}
	for _, s := range []string{in.GoVersion, in.Platform} {
		if s != "" {
			b.WriteString(" " + s)
		}
	}
	return b.String()
}
