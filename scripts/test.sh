#!/usr/bin/env bash
# The one test command: installs what the tests need, then runs every check CI runs.
#
#   ./scripts/test.sh            everything (format, vet, unit + end-to-end tests with -race)
#
# It is what README.md tells a newcomer to run and exactly what .ci/run calls. It works unattended
# (CI=true, no stdin) on a fresh Debian machine and is idempotent: a second run installs nothing.
#   - python3-matrix-nio (apt) for /usr/bin/python3: the independent Matrix client in e2e tests
#   - Dendrite v0.15.2, built once by scripts/dendrite.sh into ~/.cache/hookroom (cold: a few minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local

step() { printf '\n==> %s\n' "$*" >&2; }

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './tools/*'))
if [[ -n "$unformatted" ]]; then
  echo "gofmt wants to change:" >&2; echo "$unformatted" >&2; exit 1
fi

step "go vet"
go vet -tags goolm ./...

step "test dependencies"
if ! /usr/bin/python3 -c 'import nio' 2>/dev/null; then
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then sudo=(sudo -n); fi
  apt_get() { "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -q "$@" </dev/null; }
  # Refresh the package lists only when apt does not know the package yet (a fresh machine).
  if ! apt-cache policy python3-matrix-nio 2>/dev/null | grep -q 'Candidate: [0-9]'; then
    apt_get update
  fi
  apt_get install -y python3-matrix-nio
  /usr/bin/python3 -c 'import nio' || { echo "python3-matrix-nio installed but /usr/bin/python3 cannot import nio" >&2; exit 1; }
fi
./scripts/dendrite.sh build
HOOKROOM_DENDRITE_BIN="$(./scripts/dendrite.sh bin)"
export HOOKROOM_DENDRITE_BIN

step "go test -tags goolm -race"
go test -tags goolm -race -count=1 -timeout 15m ./...
