#!/usr/bin/env bash
# The one test command: installs what the tests need, then runs every check CI runs.
#
#   ./scripts/test.sh            everything (format, vet, unit + end-to-end tests with -race)
#
# It is what README.md tells a newcomer to run and exactly what .ci/run calls.
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
go vet ./...

step "go test -race"
go test -race -count=1 -timeout 15m ./...
