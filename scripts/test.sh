#!/usr/bin/env bash
# The one test command: installs what the tests need, then runs every check CI runs.
#
#   ./scripts/test.sh            everything (format, vet, then every unit and end-to-end test
#                                with -race, and the few tests that only run without it)
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
#     e2e tests run on it too: one throwaway server for the whole run, on which each test binary
#     creates its own databases (internal/pgtest, HOOKROOM_PGTEST_SERVER)
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local

step() { printf '\n==> %s (at %d s)\n' "$*" "$SECONDS" >&2; }

# longest_first CACHE FALLBACK DEFAULT LIST: the names in file LIST as "seconds name" lines, longest
# first, by the durations of the last run on this machine (file CACHE: "name seconds" lines), else
# by those in the committed file FALLBACK; DEFAULT seconds for a name in neither.
longest_first() {
  awk -v dflt="$3" '
    FILENAME == ARGV[1] { secs[$1] = $2; next }
    { print (($1 in secs) ? secs[$1] : dflt), $1 }' "$(test -r "$1" && echo "$1" || echo "$2")" "$4" |
    sort -k1,1nr -k2,2
}

# Dendrite builds (a few minutes cold, nothing when cached), and the test clients, Chromium and
# PostgreSQL install (apt and npm: mostly downloads), while the checks run and the tests compile; the
# end-to-end tests wait for both.
work=$(mktemp -d)
dendrite_pid=
# On an early exit the Dendrite build stops; an install under way finishes on its own (a killed
# apt-get would leave dpkg half-configured).
pgdir=
trap 'kill "$dendrite_pid" "${bot_build_pid:-}" 2>/dev/null || true
  [[ -z "$pgdir" ]] || { ./scripts/postgres.sh stop "$pgdir" || true; rm -rf "$pgdir"; }
  rm -rf "$work"' EXIT
./scripts/dendrite.sh build >"$work/dendrite.log" 2>&1 &
dendrite_pid=$!
# python3-matrix-nio + python3-olm, chromium, espeak-ng + opus-tools (one apt-get run),
# matrix-js-sdk (npm ci in matrixio/hstest/jsclient), the MCP filesystem server (npm ci in
# mcp/mcptest/filesystem), and PostgreSQL.
{ ./scripts/test-clients.sh install && ./scripts/postgres.sh install; } >"$work/deps.log" 2>&1 &
deps_pid=$!

# Everything below is built once, in one mode: with the race detector (vet type-checks the same
# packages, so it shares their compilation). On a fresh machine compiling is a third of the run:
#  - modernc.org/... (the pure-Go SQLite, C translated to Go: the largest package of the build)
#    is compiled without race instrumentation. Instrumented, every one of its memory accesses is
#    checked, which makes each database call several times slower and its compile slower too;
#    a race inside the driver is not hookroom's to find (database/sql, which hands a connection
#    to one goroutine at a time, stays instrumented, like all of hookroom).
#  - so is Curve25519's arithmetic (crypto/ecdh, crypto/internal/fips140/edwards25519/...,
#    filippo.io/edwards25519/...): every account start generates dozens of keys, and the race
#    checks on that arithmetic cost ~5 % of the end-to-end tests' CPU. Only packages that
#    synchronise nothing with other packages may be left out: the race detector learns that one
#    goroutine's write happens before another's read from the synchronisation it sees, and an
#    uninstrumented package's atomics (even those inlined from sync or shared generic code such
#    as sync.Map) are invisible to it. Leaving out all of crypto/... made it report races that do
#    not exist, inside encoding/json's type cache.
#  - C code is compiled without optimisation (-O0). The only C in the build is cgo's runtime glue
#    and mattn/go-sqlite3, which mautrix's cryptohelper registers as a driver and hookroom never
#    opens; with -O2 its amalgamation alone takes ~80 s of CPU.
#  - test binaries are linked without DWARF (-w): panics and race reports still name files and
#    lines (from the symbol table); only a debugger would miss it. It saves ~40 % of each link.
#  - -trimpath: compiled packages do not record the checkout's directory, so Go's build cache
#    serves them to any clone of the same code (CI tests a fresh clone every time: without it,
#    every hookroom package was compiled again: ~3 CPU-minutes). Panics and race reports name
#    files by module path (github.com/hookroom/hookroom/bot/turn.go); tests find the repository
#    from their working directory (internal/testkit.RepoFile), never from a source file's path.
# The flags go into GOFLAGS, so what the tests build themselves (the demo's hookroom, example and
# test plugins, a test MCP server) is built the same way and reuses the same compiled packages
# instead of compiling everything a second time without the race detector.
# (Dendrite's build started above, before these variables, and scripts/dendrite.sh builds it with
# GOFLAGS cleared: it is unaffected.)
export CGO_CFLAGS="${CGO_CFLAGS:--O0}"
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-tags=goolm -race -trimpath -ldflags=-w -gcflags=modernc.org/...=-race=false -gcflags=crypto/ecdh=-race=false -gcflags=crypto/internal/fips140/edwards25519/...=-race=false -gcflags=filippo.io/edwards25519/...=-race=false"

step "go vet -race"
go vet -tags goolm ./...

# The bot package's test binary (the longest build of the suite) compiles while the tests that
# only run without the race detector run and the test dependencies install.
go test -tags goolm -c -o "$work/bot.test" ./bot >"$work/bot-build.log" 2>&1 &
bot_build_pid=$!

# Tests behind //go:build !race (allocation budgets, which the race detector's own allocations
# would break) run here, without it.
norace=$(git ls-files '*_test.go' 2>/dev/null | xargs grep -l '^//go:build !race' 2>/dev/null |
  xargs -r -n1 dirname | sort -u | sed 's|^|./|')
if [[ -n "$norace" ]]; then
  step "go test -tags goolm (the tests that only run without -race)"
  go test -tags goolm -race=false -count=1 $norace
fi

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
# One PostgreSQL server for every test binary (each creates its own databases on it, named by
# its pid; internal/pgtest): starting and stopping one per test binary cost ~20 of them.
pgdir="$(mktemp -d "$( [[ -d /dev/shm && -w /dev/shm ]] && echo /dev/shm || echo "${TMPDIR:-/tmp}")/hookroom-test-postgres-XXXXXX")"
HOOKROOM_PGTEST_SERVER="$(POSTGRES_MAX_CONNECTIONS=1000 ./scripts/postgres.sh start "$pgdir")"
export HOOKROOM_PGTEST_SERVER

step "go test -tags goolm -race"
# Every package, every test (unit and end-to-end), with the race detector. The bot package's end-to-end tests mostly wait on the
# homeserver and would run one after another for minutes; they run in $shards processes at once
# instead (each with its own Dendrite, and its own databases on the shared PostgreSQL), next to the other
# packages. Tests go to the shard with the least work so far, longest first, by the durations of
# the last run on this machine (kept in $times; on a machine that has not run them yet, those of
# a run on a 2-core machine kept in scripts/bot-test-seconds; 5 s for a test in neither).
# HOOKROOM_TEST_SHARDS=1 runs them in one process.
shards=${HOOKROOM_TEST_SHARDS:-3}
times="${XDG_CACHE_HOME:-$HOME/.cache}/hookroom/bot-test-seconds"
if ! wait "$bot_build_pid"; then
  cat "$work/bot-build.log" >&2
  echo "go test -race -c ./bot failed (GOFLAGS=$GOFLAGS)" >&2
  exit 1
fi
"$work/bot.test" -test.list '^Test' | grep '^Test' >"$work/tests"
declare -a runs counts
while read -r s name; do
  runs[s]+="${runs[s]:+|}$name"
  counts[s]=$((${counts[s]:-0} + 1))
done < <(longest_first "$times" scripts/bot-test-seconds 5 "$work/tests" |
  awk -v shards="$shards" '{
    best = 0
    for (s = 1; s < shards; s++) if (load[s] < load[best]) best = s
    load[best] += $1
    print best, $2
  }')
declare -a pids
for ((s = 0; s < shards; s++)); do
  (
    cd bot
    start=$SECONDS
    rc=0
    "$work/bot.test" -test.run "^(${runs[s]:-NONE})\$" -test.count 1 -test.timeout 15m -test.v >"$work/shard$s.log" 2>&1 || rc=$?
    echo $((SECONDS - start)) >"$work/shard$s.secs"
    exit "$rc"
  ) &
  pids[s]=$!
done
# The other packages: three test binaries at a time (most of the long ones mostly wait on a
# homeserver or a child process), longest first by the last run's durations (kept in $pkgtimes;
# else those in scripts/package-test-seconds), so none of them starts last and runs alone.
pkgtimes="${XDG_CACHE_HOME:-$HOME/.cache}/hookroom/package-test-seconds"
go list -tags goolm ./... | grep -vx 'github.com/hookroom/hookroom/bot' >"$work/packages"
mapfile -t packages < <(longest_first "$pkgtimes" scripts/package-test-seconds 0 "$work/packages" | cut -d' ' -f2)
status=0
go test -tags goolm -count=1 -timeout 15m -p 3 "${packages[@]}" | tee "$work/packages.log" || status=1
for ((s = 0; s < shards; s++)); do
  if wait "${pids[s]}"; then
    printf 'ok  \tgithub.com/hookroom/hookroom/bot\t%ss (shard %d of %d: %d tests)\n' "$(cat "$work/shard$s.secs")" \
      $((s + 1)) "$shards" "${counts[s]:-0}"
  else
    status=1
    # The output of the tests that failed (and whatever followed the last test: a panic, a
    # timeout, the homeserver's log), as go test prints it without -v.
    awk '/^=== RUN   Test[^\/]*$/ { buf = "" }
         { buf = buf $0 "\n" }
         /^--- FAIL: Test/ { printf "%s", buf; buf = "" }
         /^--- PASS: Test/ { buf = "" }
         END { printf "%s", buf }' "$work/shard$s.log"
    printf 'FAIL\tgithub.com/hookroom/hookroom/bot (shard %d of %d)\n' $((s + 1)) "$shards"
  fi
done
# The durations of this run's tests and packages, for the next run's order.
if mkdir -p "$(dirname "$times")" 2>/dev/null; then
  sed -nE 's/^--- (PASS|FAIL): (Test[^ ]*) \(([0-9.]+)s\)$/\2 \3/p' "$work"/shard*.log >"$times.tmp" &&
    mv "$times.tmp" "$times" || true
  sed -nE 's/^(ok  |FAIL)\t([^ \t]+)\t([0-9.]+)s.*$/\2 \3/p' "$work/packages.log" >"$pkgtimes.tmp" &&
    mv "$pkgtimes.tmp" "$pkgtimes" || true
fi
step "done: $( ((status == 0)) && echo passed || echo FAILED )"
exit "$status"
