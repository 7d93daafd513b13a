#!/usr/bin/env bash
# release.sh — hookroom's release artifacts, built reproducibly from a commit.
#
#   scripts/release.sh VERSION [OUTDIR]
#
# VERSION is semver (1.2.3, 1.2.3-rc.1; a leading "v" is dropped). OUTDIR defaults to ./dist.
# For each architecture (linux/amd64 and linux/arm64) it writes into OUTDIR
#
#   hookroom-VERSION-linux-ARCH   the static binary (CGO_ENABLED=0, -trimpath, -tags goolm)
#   hookroom_DEBVERSION_ARCH.deb  the Debian package: /usr/bin/hookroom, the systemd unit, the
#                                 hookroom system user, /etc/hookroom (with config.example.yaml),
#                                 /var/lib/hookroom (DEBVERSION is VERSION with "-" → "~")
#   SHA256SUMS                    sha256sum's format, covering this run's files
#
# and prints SHA256SUMS on stdout when done; progress goes to stderr.
#
# What is built is the commit (HOOKROOM_RELEASE_REF, default HEAD) as git archive exports it,
# never the work tree: uncommitted changes are not in a release (the script says so when there
# are some). Every build of a commit is byte-identical given the same Go toolchain: the version,
# the commit hash and the commit's time are stamped into internal/buildinfo, and the packages'
# file times are the commit's time (SOURCE_DATE_EPOCH), not the build's.
#
# Environment:
#   HOOKROOM_RELEASE_REF     the commit or tag to build (default HEAD)
#   HOOKROOM_RELEASE_ARCHES  the architectures, space-separated (default "amd64 arm64"); the
#                            packaging test builds amd64 only
#   SOURCE_DATE_EPOCH        the time stamped as the build date (default: the commit's time)
#   HOOKROOM_MAINTAINER      the .deb's Maintainer field
#   HOOKROOM_CACHE           cache root (default ~/.cache/hookroom); nfpm is built once into
#                            $HOOKROOM_CACHE/nfpm-v2.45.2/nfpm from packaging/nfpm (pinned, with
#                            its checksums in packaging/nfpm/go.sum)
#
# Needs go (the version in go.mod's go line or newer), git, sha256sum, flock; the Go module proxy or a
# warm module cache.
set -euo pipefail

readonly NFPM_VERSION=v2.45.2
readonly MODULE=github.com/hookroom/hookroom
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${HOOKROOM_CACHE:-$HOME/.cache/hookroom}"
NFPM="$CACHE/nfpm-$NFPM_VERSION/nfpm"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
# A release is built from the flags below alone, not from the caller's GOFLAGS (scripts/test.sh sets
# -race there, which a static CGO_ENABLED=0 build cannot take).
export GOFLAGS=

say() { printf 'release.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

usage() { sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }

[[ $# -ge 1 && $# -le 2 ]] || usage
VERSION="${1#v}"
[[ "$VERSION" =~ ^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$ ]] ||
  die "VERSION must be semver like 1.2.3 or 1.2.3-rc.1, not \"$1\""
OUTDIR="${2:-$ROOT/dist}"
read -r -a ARCHES <<<"${HOOKROOM_RELEASE_ARCHES:-amd64 arm64}"
[[ ${#ARCHES[@]} -gt 0 ]] || die "HOOKROOM_RELEASE_ARCHES is empty"
for arch in "${ARCHES[@]}"; do
  [[ "$arch" == amd64 || "$arch" == arm64 ]] || die "unsupported architecture \"$arch\" (amd64 | arm64)"
done
for cmd in go git sha256sum tar flock; do
  command -v "$cmd" >/dev/null || die "needs $cmd on PATH"
done

REF="${HOOKROOM_RELEASE_REF:-HEAD}"
REVISION="$(git -C "$ROOT" rev-parse --verify "$REF^{commit}" 2>/dev/null)" ||
  die "$ROOT: \"$REF\" names no commit (releases are built from a git checkout)"
if [[ "$REF" == HEAD && -n "$(git -C "$ROOT" status --porcelain --untracked-files=no)" ]]; then
  say "the work tree has uncommitted changes; building the commit ${REVISION:0:12} without them"
fi
SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git -C "$ROOT" log -1 --format=%ct "$REVISION")}"
[[ "$SOURCE_DATE_EPOCH" =~ ^[0-9]+$ ]] || die "SOURCE_DATE_EPOCH must be seconds since 1970, not \"$SOURCE_DATE_EPOCH\""
export SOURCE_DATE_EPOCH
DATE="$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)"

mkdir -p "$OUTDIR"
OUTDIR="$(cd "$OUTDIR" && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
SRC="$WORK/src"
mkdir "$SRC"
git -C "$ROOT" archive --format=tar "$REVISION" | tar -x -C "$SRC"

say "hookroom $VERSION from ${REVISION:0:12} ($DATE), $(go env GOVERSION), linux/{${ARCHES[*]}} → $OUTDIR"

# nfpm, built once from the pinned nested module (one builder at a time).
build_nfpm() {
  [[ -x "$NFPM" ]] && return 0
  mkdir -p "$(dirname "$NFPM")"
  exec 9>"$(dirname "$NFPM")/.build.lock"
  flock 9
  if [[ ! -x "$NFPM" ]]; then
    say "building nfpm $NFPM_VERSION into $NFPM (once)"
    grep -q "github.com/goreleaser/nfpm/v2 $NFPM_VERSION" "$SRC/packaging/nfpm/go.mod" ||
      die "packaging/nfpm/go.mod does not pin nfpm $NFPM_VERSION (update NFPM_VERSION here too)"
    (cd "$SRC/packaging/nfpm" && CGO_ENABLED=0 go build -trimpath -mod=readonly -buildvcs=false \
      -o "$NFPM.tmp" github.com/goreleaser/nfpm/v2/cmd/nfpm) >&2 || die "failed to build nfpm $NFPM_VERSION"
    mv "$NFPM.tmp" "$NFPM"
  fi
  exec 9>&-
}
build_nfpm

ARTIFACTS=()
pkg=$MODULE/internal/buildinfo
for arch in "${ARCHES[@]}"; do
  bin="hookroom-$VERSION-linux-$arch"
  say "building $bin"
  (cd "$SRC" && CGO_ENABLED=0 GOOS=linux GOARCH="$arch" go build -tags goolm -trimpath \
    -buildvcs=false -mod=readonly \
    -ldflags "-s -w -X $pkg.Version=$VERSION -X $pkg.Revision=$REVISION -X $pkg.Date=$DATE" \
    -o "$OUTDIR/$bin" ./cmd/hookroom) || die "failed to build $bin"
  ARTIFACTS+=("$bin")

  # The package's files, under the names packaging/nfpm.yaml gives them.
  stage="$WORK/deb-$arch"
  mkdir -p "$stage"
  cp "$OUTDIR/$bin" "$stage/hookroom"
  cp "$SRC/packaging/nfpm.yaml" "$SRC/packaging/deb/postinst" "$SRC/packaging/deb/prerm" \
    "$SRC/packaging/deb/postrm" "$stage/"
  cp "$SRC/LICENSE" "$stage/copyright"
  sed 's|^ExecStart=/usr/local/bin/hookroom |ExecStart=/usr/bin/hookroom |' \
    "$SRC/packaging/hookroom.service" >"$stage/hookroom.service"
  grep -q '^ExecStart=/usr/bin/hookroom run --config /etc/hookroom/config.yaml$' "$stage/hookroom.service" ||
    die "packaging/hookroom.service: no ExecStart=/usr/local/bin/hookroom run … line to point at /usr/bin"
  sed 's|^data_dir: \./data$|data_dir: /var/lib/hookroom|' "$SRC/config.example.yaml" >"$stage/config.example.yaml"
  grep -q '^data_dir: /var/lib/hookroom$' "$stage/config.example.yaml" ||
    die "config.example.yaml: no \"data_dir: ./data\" line to point at /var/lib/hookroom"
  chmod 0755 "$stage/hookroom" "$stage/postinst" "$stage/prerm" "$stage/postrm"
  chmod 0644 "$stage/hookroom.service" "$stage/config.example.yaml" "$stage/copyright"

  debversion="${VERSION/-/\~}"
  deb="hookroom_${debversion}_$arch.deb"
  say "packaging $deb"
  (cd "$stage" && HOOKROOM_VERSION="$VERSION" HOOKROOM_ARCH="$arch" \
    HOOKROOM_MAINTAINER="${HOOKROOM_MAINTAINER:-hookroom maintainers <maintainers@hookroom.invalid>}" \
    "$NFPM" package --config nfpm.yaml --packager deb --target "$OUTDIR/$deb") >"$WORK/nfpm.log" 2>&1 ||
    { cat "$WORK/nfpm.log" >&2; die "nfpm failed to package $deb"; }
  ARTIFACTS+=("$deb")
done

(cd "$OUTDIR" && sha256sum "${ARTIFACTS[@]}" >SHA256SUMS)
say "done: ${#ARTIFACTS[@]} files and SHA256SUMS in $OUTDIR"
cat "$OUTDIR/SHA256SUMS"
