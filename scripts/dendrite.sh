#!/usr/bin/env bash
# dendrite.sh — the pinned Dendrite homeserver that hookroom's end-to-end tests, demos and CI run.
#
#   scripts/dendrite.sh build             build the four binaries once into the cache (no-op if present)
#   scripts/dendrite.sh bin               print the directory holding the binaries (built or not)
#   scripts/dendrite.sh start DIR [PORT]  configure DIR, start a server on 127.0.0.1 (a free port unless
#                                         PORT is given), wait until it answers, print its URL on stdout
#   scripts/dendrite.sh stop DIR          stop the server started in DIR (SIGTERM, then SIGKILL after 5 s)
#   scripts/dendrite.sh env DIR           print URL, PID, SERVER_NAME of DIR's server (never the secret);
#                                         exits 1 when it is not running
#   scripts/dendrite.sh prepare DIR PORT  only write keys, config and DIR/env (used by matrixio/hstest,
#                                         which runs the binary as its own child process)
#
# DIR keeps everything: dendrite.yaml, matrix_key.pem, one SQLite file per component, media/,
# dendrite.out (the process's stdout/stderr), log/ (Dendrite's info log), dendrite.pid and env
# (URL, SECRET, SERVER_NAME, PID; mode 0600). Put DIR on tmpfs (/dev/shm): SQLite's fsyncs make a
# disk 1.5-3x slower. Restarting on the same DIR keeps users, rooms and history, and the secret.
# `. DIR/env` gives a shell the shared secret for /_synapse/admin/v1/register.
#
# Environment:
#   HOOKROOM_CACHE          cache root (default ~/.cache/hookroom); binaries in $HOOKROOM_CACHE/dendrite-v0.15.2/bin
#   HOOKROOM_DENDRITE_BIN   use this directory of binaries instead (build installs into it)
#   DENDRITE_SECRET         registration shared secret ([A-Za-z0-9._~-]+); default: random, kept per DIR
#   DENDRITE_RATE_LIMITING  "on" keeps Dendrite's client rate limiting (5 requests, 500 ms cool-off),
#                           to test 429 handling; off otherwise
#   DENDRITE_READY_TIMEOUT  seconds to wait for the server to answer (default 60)
#
# Dendrite is AGPL-3.0. It is built from the nested module tools/dendrite (which pins v0.15.2 and its
# checksums) into a cache outside the work tree and only ever run as a separate process.
set -euo pipefail
umask 077

readonly VERSION=v0.15.2
readonly BINARIES=(dendrite generate-config generate-keys create-account)
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${HOOKROOM_CACHE:-$HOME/.cache/hookroom}"
BIN="${HOOKROOM_DENDRITE_BIN:-$CACHE/dendrite-$VERSION/bin}"
READY_TIMEOUT="${DENDRITE_READY_TIMEOUT:-60}"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

# free_port
. "$ROOT/scripts/free-port.sh"

say() { printf 'dendrite.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

# tail_logs DIR: the last lines of what the server said, for a failure message.
tail_logs() {
  local f
  for f in "$1/dendrite.out" "$1/log/dendrite.log"; do
    [[ -s "$f" ]] || continue
    printf -- '--- last lines of %s ---\n' "$f" >&2
    tail -n 25 "$f" >&2
  done
}

have_binaries() {
  local b
  for b in "${BINARIES[@]}"; do [[ -x "$BIN/$b" ]] || return 1; done
}

build() {
  have_binaries && return 0
  command -v go >/dev/null || die "failed to build Dendrite: no go on PATH"
  local mod="$ROOT/tools/dendrite"
  grep -q "github.com/element-hq/dendrite $VERSION" "$mod/go.mod" ||
    die "failed to build Dendrite: $mod/go.mod does not pin $VERSION (update VERSION here too)"
  mkdir -p "$(dirname "$BIN")"
  # One builder at a time (several test binaries may ask at once); re-check once we hold the lock.
  exec 9>"$(dirname "$BIN")/.build.lock"
  flock 9
  if have_binaries; then exec 9>&-; return 0; fi
  say "building Dendrite $VERSION into $BIN (first time: ~2-4 min on 2 cores)"
  local tmp t0=$SECONDS
  tmp="$(mktemp -d "$(dirname "$BIN")/.build.XXXXXX")"
  # C at -O1: the SQLite amalgamation compiles in a third of the time -O2 takes (~30 s of CPU
  # instead of ~80 s on a fresh machine), and SQLite is a small part of what Dendrite does.
  # GOFLAGS cleared: the same build whoever calls (scripts/test.sh sets -race for its tests).
  if ! (cd "$mod" && CGO_CFLAGS=-O1 GOFLAGS= go build -trimpath -mod=readonly -o "$tmp/bin/" tool) >"$tmp/build.log" 2>&1; then
    tail -n 40 "$tmp/build.log" >&2
    rm -rf "$tmp"
    die "failed to build Dendrite $VERSION from $mod (output above)"
  fi
  local b
  for b in "${BINARIES[@]}"; do
    [[ -x "$tmp/bin/$b" ]] || { rm -rf "$tmp"; die "failed to build Dendrite: $b missing from the build output"; }
  done
  chmod 755 "$tmp/bin" "$tmp/bin/"*
  # Atomic install: the bin directory appears complete or not at all.
  [[ -e "$BIN" ]] && mv "$BIN" "$tmp/old"
  mv "$tmp/bin" "$BIN"
  rm -rf "$tmp"
  exec 9>&-
  say "built in $((SECONDS - t0)) s"
}

# edit FILE SED-ADDRESS-AND-COMMAND PATTERN: apply a sed edit after checking that PATTERN occurs in
# FILE, so a config format change in a new Dendrite version fails here instead of silently.
edit() {
  grep -qE "$3" "$1" || die "failed to patch $1: /$3/ not found (Dendrite config format changed?)"
  sed -i -E "$2" "$1"
}

secret_for() { # DIR
  local dir="$1" s=""
  if [[ -n "${DENDRITE_SECRET:-}" ]]; then
    [[ "$DENDRITE_SECRET" =~ ^[A-Za-z0-9._~-]+$ ]] || die "DENDRITE_SECRET may only use [A-Za-z0-9._~-]"
    s="$DENDRITE_SECRET"
  elif [[ -f "$dir/env" ]]; then
    s="$(sed -n 's/^SECRET=//p' "$dir/env")"
  fi
  [[ -n "$s" ]] || s="$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')"
  printf '%s' "$s"
}

# write_env DIR URL SECRET [PID]
write_env() {
  local tmp="$1/env.tmp"
  printf 'URL=%s\nSECRET=%s\nSERVER_NAME=localhost\n' "$2" "$3" >"$tmp"
  [[ -z "${4:-}" ]] || printf 'PID=%s\n' "$4" >>"$tmp"
  chmod 600 "$tmp"
  mv "$tmp" "$1/env"
}

# prepare DIR PORT: keys, config and env for a server on 127.0.0.1:PORT with its data in DIR.
prepare() {
  local dir="$1" port="$2"
  [[ "$port" =~ ^[0-9]+$ ]] || die "bad port: $port"
  build
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  chmod 700 "$dir"
  [[ -f "$dir/matrix_key.pem" ]] ||
    "$BIN/generate-keys" --private-key "$dir/matrix_key.pem" >"$dir/generate-keys.out" 2>&1 ||
    { cat "$dir/generate-keys.out" >&2; die "failed to generate the server key"; }
  local secret cfg="$dir/dendrite.yaml"
  secret="$(secret_for "$dir")"
  # The -ci profile starts from: open registration, bcrypt cost 4, in-memory JetStream, no key
  # perspectives, rate limiting off, one SQLite file per component in DIR.
  "$BIN/generate-config" -ci -dir "$dir" -server localhost >"$cfg.tmp"
  edit "$cfg.tmp" 's#^(  server_name:) .*$#\1 localhost#' '^  server_name: '
  # An absolute key path: relative ones resolve against the reader's working directory.
  edit "$cfg.tmp" "s#^(  private_key:) matrix_key.pem\$#\\1 $dir/matrix_key.pem#" '^  private_key: matrix_key.pem$'
  edit "$cfg.tmp" 's#^(  disable_federation:) false$#\1 true#' '^  disable_federation: false$'
  edit "$cfg.tmp" "s#^(  registration_shared_secret:) .*\$#\\1 \"$secret\"#" '^  registration_shared_secret: '
  edit "$cfg.tmp" '/^  rate_limiting:$/,/^    enabled:/ s#^(    enabled:) .*$#\1 false#' '^  rate_limiting:$'
  if [[ "${DENDRITE_RATE_LIMITING:-off}" == on ]]; then
    sed -i -E '/^  rate_limiting:$/,/^    enabled:/ s#^(    enabled:) .*$#\1 true#' "$cfg.tmp"
  fi
  # Full-text search (bleve) costs memory; /search answers 501 without it.
  edit "$cfg.tmp" '/^  search:$/,/^    enabled:/ s#^(    enabled:) .*$#\1 false#' '^  search:$'
  # -ci turns on experimental MSCs (2836 threading, 2444/2753 peeking); tests want vanilla behaviour.
  edit "$cfg.tmp" '/^  - msc[0-9]+$/d; s#^(  mscs:)$#\1 []#' '^  mscs:$'
  # Log at info level into DIR/log instead of trace on stderr.
  edit "$cfg.tmp" '/^logging:$/,$d' '^logging:$'
  printf 'logging:\n- type: file\n  level: info\n  params:\n    path: %s/log\n' "$dir" >>"$cfg.tmp"
  mv "$cfg.tmp" "$cfg"
  write_env "$dir" "http://127.0.0.1:$port" "$secret"
}

pid_of() { # DIR: the pid of DIR's running server, or fail
  local pid
  [[ -f "$1/dendrite.pid" ]] || return 1
  pid="$(cat "$1/dendrite.pid")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  # Only our server: the pid must still run dendrite with DIR's config (pids get reused).
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "--config $1/dendrite.yaml" || return 1
  echo "$pid"
}

# port_listener PORT: the socket inode listening on 127.0.0.1:PORT (or 0.0.0.0:PORT), if any.
port_listener() {
  local hex
  hex="$(printf '%04X' "$1")"
  awk -v hex="$hex" '$4 == "0A" && ($2 == "0100007F:" hex || $2 == "00000000:" hex) { print $10; exit }' /proc/net/tcp
}

# listens PID PORT: true when PID itself holds the listening socket on PORT (not some other server).
listens() {
  local inode
  inode="$(port_listener "$2")"
  [[ -n "$inode" ]] && find "/proc/$1/fd" -lname "socket:\[$inode\]" 2>/dev/null | grep -q .
}

answers() { # URL: true when GET URL/_matrix/client/versions gives 200
  if command -v curl >/dev/null; then
    curl -fsS -m 2 -o /dev/null "$1/_matrix/client/versions" 2>/dev/null
  else
    local hostport="${1#http://}" line
    exec 3<>"/dev/tcp/${hostport%:*}/${hostport##*:}" 2>/dev/null || return 1
    printf 'GET /_matrix/client/versions HTTP/1.0\r\nHost: %s\r\n\r\n' "$hostport" >&3
    IFS= read -r -t 2 line <&3 || true
    exec 3<&-
    [[ "$line" == *" 200 "* ]]
  fi
}

# launch DIR PORT: start the configured server in DIR and wait until it answers. Returns 2 when the
# port was taken (the caller may pick another), 1 on any other failure.
launch() {
  local dir="$1" port="$2" url="http://127.0.0.1:$2" pid t0 deadline
  rm -f "$dir/dendrite.pid"
  [[ -z "$(port_listener "$port")" ]] || return 2
  # setsid: its own session, so the caller's Ctrl-C does not reach it; bash records its own pid
  # and then execs the server under that pid.
  # Every descriptor is redirected, so a caller reading our stdout sees EOF when this script ends.
  (cd "$dir" && exec setsid bash -c 'echo $$ >"$1/dendrite.pid"; shift; exec "$@"' _ "$dir" \
    "$BIN/dendrite" --config "$dir/dendrite.yaml" \
    --http-bind-address "127.0.0.1:$port" --https-bind-address 127.0.0.1:0 \
    --really-enable-open-registration) >"$dir/dendrite.out" 2>&1 </dev/null 9>&- &
  t0=$(date +%s%N)
  deadline=$((SECONDS + READY_TIMEOUT))
  until [[ -s "$dir/dendrite.pid" ]]; do
    ((SECONDS <= deadline)) || { say "dendrite did not start"; return 1; }
    sleep 0.01
  done
  pid="$(cat "$dir/dendrite.pid")"
  until listens "$pid" "$port" && answers "$url"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      grep -qi 'address already in use' "$dir/dendrite.out" 2>/dev/null && return 2
      say "failed to start Dendrite in $dir: it exited during start-up"
      tail_logs "$dir"
      return 1
    fi
    if ((SECONDS > deadline)); then
      say "failed to start Dendrite in $dir: no answer from $url after ${READY_TIMEOUT}s"
      tail_logs "$dir"
      kill -KILL "$pid" 2>/dev/null || true
      return 1
    fi
    sleep 0.02
  done
  say "ready at $url in $((($(date +%s%N) - t0) / 1000000)) ms (pid $pid, dir $dir)"
}

start() {
  local dir="$1" port="${2:-}" tries=1 rc
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  if pid="$(pid_of "$dir")"; then die "already running in $dir (pid $pid)"; fi
  [[ -n "$port" ]] || { port="$(free_port)"; tries=3; }
  while :; do
    prepare "$dir" "$port"
    rc=0
    launch "$dir" "$port" || rc=$?
    ((rc == 0)) && break
    if ((rc == 2 && --tries > 0)); then
      say "port $port was taken, trying another"
      port="$(free_port)"
      continue
    fi
    ((rc == 2)) && { say "failed to start Dendrite: port $port is in use"; tail_logs "$dir"; }
    exit 1
  done
  write_env "$dir" "http://127.0.0.1:$port" "$(secret_for "$dir")" "$(cat "$dir/dendrite.pid")"
  echo "http://127.0.0.1:$port"
}

stop() {
  local dir="$1" pid i
  [[ -d "$dir" ]] || { say "no such directory: $dir"; return 0; }
  dir="$(cd "$dir" && pwd)"
  if pid="$(pid_of "$dir")"; then
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    if kill -0 "$pid" 2>/dev/null; then
      say "pid $pid ignored SIGTERM for 5 s; sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  else
    say "no server running in $dir"
  fi
  rm -f "$dir/dendrite.pid"
}

env_of() {
  local dir="$1" pid
  [[ -f "$dir/env" ]] || die "no env file in $dir"
  dir="$(cd "$dir" && pwd)"
  pid="$(pid_of "$dir")" || die "no server running in $dir"
  sed -n -e '/^URL=/p' -e '/^SERVER_NAME=/p' "$dir/env"
  printf 'PID=%s\nENV_FILE=%s/env\n' "$pid" "$dir"
}

usage() { echo "usage: $0 build | bin | start DIR [PORT] | stop DIR | env DIR | prepare DIR PORT" >&2; exit 2; }

case "${1:-}" in
build) [[ $# -eq 1 ]] || usage; build ;;
bin) [[ $# -eq 1 ]] || usage; echo "$BIN" ;;
start) [[ $# -eq 2 || $# -eq 3 ]] || usage; start "$2" "${3:-}" ;;
stop) [[ $# -eq 2 ]] || usage; stop "$2" ;;
env) [[ $# -eq 2 ]] || usage; env_of "$2" ;;
prepare) [[ $# -eq 3 ]] || usage; prepare "$2" "$3" ;;
*) usage ;;
esac
