// Package buildinfo names the running hookroom binary: its version, the
// commit it was built from, when that commit was made, whether the tree had
// local changes, the Go version and the platform.
//
// Release builds stamp the version, revision and date with the linker
// (scripts/release.sh and the Dockerfile do this):
//
//	go build -tags goolm -ldflags "\
//	  -X github.com/hookroom/hookroom/internal/buildinfo.Version=1.2.3 \
//	  -X github.com/hookroom/hookroom/internal/buildinfo.Revision=$(git rev-parse HEAD) \
//	  -X github.com/hookroom/hookroom/internal/buildinfo.Date=2026-11-29T04:00:00Z" ./cmd/hookroom
//
// What is not stamped comes from the build information the Go toolchain
// embeds (runtime/debug.ReadBuildInfo): the module version of a
// `go install github.com/hookroom/hookroom/cmd/hookroom@v1.2.3` build, and
// vcs.revision, vcs.time and vcs.modified of a build in a git checkout.
// A source build with neither is version "dev". Read is the only place that
// decides this, so `hookroom version`, the console and the
// hookroom_build_info metric always agree.
package buildinfo
