#!/usr/bin/env bash
# bench-hooks.sh — side-by-side benchmark of hookroom's hook engine and OpenClaw's compiled plugin
# hook runner: the same five modes (observer, transformer, gate, claim, collector) with 1, 10 and 50
# registered no-op hooks, mean nanoseconds per emission, and the hookroom/OpenClaw ratio for
# hookroom's ordinary hooks and for Inline hooks (below 1: hookroom is faster).
#
#   scripts/bench-hooks.sh            RUNS (default 3) rounds, one table per round
#
# Optional and not part of scripts/test.sh. It installs the pinned npm package openclaw (Node 20 is
# below its declared engines, so --engine-strict=false; install scripts are not run) into
# $HOOKROOM_CACHE (default ~/.cache/hookroom)/openclaw-VERSION once, and calls the runner that
# package ships directly (scripts/bench-hooks/openclaw-driver.mjs finds it in its dist/); nothing
# of OpenClaw is copied into this repository. hookroom's side is `go test -bench` of
# hooks/bench_test.go. Environment: RUNS, BENCHTIME (go, default 1s), OPENCLAW_MS (node, minimum
# time per case, default 1000), OPENCLAW_VERSION.
#
# The two runners do different work: hookroom gives every hook its own copy of the context, a
# deadline and abandonment; OpenClaw's hooks share the event (except before_tool_call, which it
# clones per handler) and only some hook names have a timeout. Numbers from a shared or loaded
# machine are noisy: compare the rounds, not one figure.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OPENCLAW_VERSION="${OPENCLAW_VERSION:-2026.9.6}"
CACHE="${HOOKROOM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hookroom}"
PKGDIR="$CACHE/openclaw-$OPENCLAW_VERSION"
RUNS="${RUNS:-3}"
BENCHTIME="${BENCHTIME:-1s}"
OPENCLAW_MS="${OPENCLAW_MS:-1000}"

say() { printf 'bench-hooks.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

command -v node >/dev/null || die "node is not installed (needed to run OpenClaw's hook runner)"
command -v npm >/dev/null || die "npm is not installed (needed to install openclaw@$OPENCLAW_VERSION)"
command -v go >/dev/null || die "go is not installed"

if [[ ! -f "$PKGDIR/node_modules/openclaw/package.json" ]]; then
  say "installing openclaw@$OPENCLAW_VERSION into $PKGDIR"
  mkdir -p "$PKGDIR"
  [[ -f "$PKGDIR/package.json" ]] || echo '{"private": true}' >"$PKGDIR/package.json"
  npm install --prefix "$PKGDIR" --engine-strict=false --ignore-scripts --no-audit --no-fund \
    --loglevel=error "openclaw@$OPENCLAW_VERSION" >&2 || die "npm install openclaw@$OPENCLAW_VERSION failed"
fi

export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

say "building the hooks benchmark"
(cd "$ROOT" && go test -tags goolm -c -o "$TMP/hooks.test" ./hooks) || die "go test -c ./hooks failed"

for run in $(seq 1 "$RUNS"); do
  say "round $run/$RUNS: hookroom"
  "$TMP/hooks.test" -test.run '^$' -test.bench 'Benchmark(Observer|Transformer|Gate|Claim|Collector)$' \
    -test.benchtime "$BENCHTIME" >"$TMP/go.txt" || { cat "$TMP/go.txt" >&2; die "go benchmark failed"; }
  say "round $run/$RUNS: openclaw"
  node "$ROOT/scripts/bench-hooks/openclaw-driver.mjs" "$PKGDIR/node_modules/openclaw" 1,10,50 "$OPENCLAW_MS" \
    >"$TMP/oc.txt" || die "openclaw driver failed"
  echo
  echo "round $run/$RUNS — mean ns per emission (ratio = hookroom / OpenClaw; below 1 is faster)"
  awk '
    FNR == NR { oc[$1 " " $2] = $3; next }
    /^Benchmark/ {
      # BenchmarkObserver/ordinary/hooks=1-2   N   123 ns/op ...
      split($1, p, "/"); mode = tolower(substr(p[1], 10)); path = p[2]
      n = p[3]; sub(/^hooks=/, "", n); sub(/-[0-9]+$/, "", n)
      hr[mode " " n " " path] = $3
    }
    END {
      printf "%-12s %6s %12s %12s %8s %12s %8s\n", "mode", "hooks", "openclaw", "ordinary", "ratio", "inline", "ratio"
      split("observer transformer gate claim collector", modes, " ")
      split("1 10 50", sizes, " ")
      for (i = 1; i <= 5; i++) for (k = 1; k <= 3; k++) {
        key = modes[i] " " sizes[k]
        o = oc[key]; a = hr[key " ordinary"]; b = hr[key " inline"]
        printf "%-12s %6s %12.0f %12.0f %8.2f %12.0f %8.2f\n", modes[i], sizes[k], o, a, (o > 0 ? a / o : 0), b, (o > 0 ? b / o : 0)
      }
    }' "$TMP/oc.txt" "$TMP/go.txt"
done
