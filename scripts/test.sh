#!/usr/bin/env bash
# The one test command: installs what the tests need, then runs every check CI runs.
#
#   ./scripts/test.sh            everything (format, vet, the unit tier (-short), then unit +
#                                end-to-end tests with -race)
#
# It is what README.md tells a newcomer to run and exactly what .ci/run calls. It works unattended
# (CI=true, no stdin) on a fresh Debian machine and is idempotent: a second run installs nothing.
#   - the independent Matrix clients of the e2e tests, by scripts/test-clients.sh: python3-matrix-nio
#     and python3-olm (apt) for /usr/bin/python3, and matrix-js-sdk with its Rust crypto (npm ci in
#     matrixio/hstest/jsclient; needs Node >= 20 and npm), and the reference MCP filesystem server
#     (npm ci in mcp/mcptest/filesystem) that the MCP tests run, Debian's chromium for the
#     console's browser tests, and Debian's espeak-ng and opus-tools for the voice tests
#   - Dendrite v0.15.2, built once by scripts/dendrite.sh into ~/.cache/hookroom (cold: a few minutes)
#   - PostgreSQL (Debian's postgresql package, by scripts/postgres.sh install): the store, lock and
#     e2e tests run on it too, each test binary starting its own throwaway server (internal/pgtest)
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local

step() { printf '\n==> %s\n' "$*" >&2; }

# Dendrite builds (a few minutes cold, nothing when cached), and the test clients, Chromium and
# PostgreSQL install (apt and npm: mostly downloads), while the checks and the unit tier run; the
# end-to-end tests wait for both.
work=$(mktemp -d)
dendrite_pid=
# On an early exit the Dendrite build stops; an install under way finishes on its own (a killed
# apt-get would leave dpkg half-configured).
trap 'kill "$dendrite_pid" 2>/dev/null || true; rm -rf "$work"' EXIT
./scripts/dendrite.sh build >"$work/dendrite.log" 2>&1 &
dendrite_pid=$!
# python3-matrix-nio + python3-olm, chromium, espeak-ng + opus-tools (one apt-get run),
# matrix-js-sdk (npm ci in matrixio/hstest/jsclient), the MCP filesystem server (npm ci in
# mcp/mcptest/filesystem), and PostgreSQL.
{ ./scripts/test-clients.sh install && ./scripts/postgres.sh install; } >"$work/deps.log" 2>&1 &
deps_pid=$!

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './tools/*'))
if [[ -n "$unformatted" ]]; then
  echo "gofmt wants to change:" >&2; echo "$unformatted" >&2; exit 1
fi

step "go vet"
go vet -tags goolm ./...

# The unit tier first, for fast feedback: no homeserver, npm, Chromium or PostgreSQL (while
# Dendrite builds in the background on a fresh machine). Results Go has cached for unchanged
# packages count here; the race-enabled run below runs every test again (-count=1).
step "go test -tags goolm -short (unit tests)"
go test -tags goolm -short ./...

step "test dependencies"
if ! wait "$deps_pid"; then
  cat "$work/deps.log" >&2
  echo "installing the test dependencies failed (scripts/test-clients.sh install, scripts/postgres.sh install)" >&2
  exit 1
fi
cat "$work/deps.log" >&2
if ! wait "$dendrite_pid"; then
  cat "$work/dendrite.log" >&2
  echo "scripts/dendrite.sh build failed" >&2
  exit 1
fi
cat "$work/dendrite.log" >&2
HOOKROOM_DENDRITE_BIN="$(./scripts/dendrite.sh bin)"
export HOOKROOM_DENDRITE_BIN

step "go test -tags goolm -race"
# Every package, with the race detector. The bot package's end-to-end tests mostly wait on the
# homeserver and would run one after another for minutes; they run in $shards processes at once
# instead (each with its own Dendrite and PostgreSQL, so they share nothing), next to the other
# packages. HOOKROOM_TEST_SHARDS=1 runs them in one process.
shards=${HOOKROOM_TEST_SHARDS:-3}
go test -tags goolm -race -c -o "$work/bot.test" ./bot
mapfile -t tests < <("$work/bot.test" -test.list '^Test' | grep '^Test')
declare -a runs
for i in "${!tests[@]}"; do
  runs[i % shards]+="${runs[i % shards]:+|}${tests[i]}"
done
declare -a pids
for ((s = 0; s < shards; s++)); do
  (
    cd bot
    start=$SECONDS
    rc=0
    "$work/bot.test" -test.run "^(${runs[s]})\$" -test.count 1 -test.timeout 15m >"$work/shard$s.log" 2>&1 || rc=$?
    echo $((SECONDS - start)) >"$work/shard$s.secs"
    exit "$rc"
  ) &
  pids[s]=$!
done
status=0
go test -tags goolm -race -count=1 -timeout 15m \
  $(go list -tags goolm ./... | grep -vx 'github.com/hookroom/hookroom/bot') || status=1
for ((s = 0; s < shards; s++)); do
  if wait "${pids[s]}"; then
    printf 'ok  \tgithub.com/hookroom/hookroom/bot\t%ss (shard %d of %d: %d tests)\n' "$(cat "$work/shard$s.secs")" \
      $((s + 1)) "$shards" "$(tr '|' '\n' <<<"${runs[s]}" | wc -l)"
  else
    status=1
    cat "$work/shard$s.log"
    printf 'FAIL\tgithub.com/hookroom/hookroom/bot (shard %d of %d)\n' $((s + 1)) "$shards"
  fi
done
exit "$status"
