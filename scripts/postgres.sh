#!/usr/bin/env bash
# postgres.sh — a throwaway PostgreSQL server for hookroom's tests (never for production data).
#
#   scripts/postgres.sh install           install Debian's postgresql package when no server binaries
#                                         are found (apt-get update only when apt does not know it yet)
#   scripts/postgres.sh start DIR [PORT]  create a cluster in DIR/data (first time), start it on DIR's
#                                         unix socket and 127.0.0.1 (a free port unless PORT is given),
#                                         wait until it answers, print its URL on stdout
#   scripts/postgres.sh stop DIR          stop the server started in DIR (fast shutdown, then SIGKILL)
#   scripts/postgres.sh env DIR           print URL, PORT, PID, SOCKET_DIR of DIR's server;
#                                         exits 1 when it is not running
#
# The cluster trusts every local connection (user postgres, no password) and runs with fsync off:
# it is for tests only. Put DIR on tmpfs (/dev/shm). DIR keeps data/, postgres.log, env.
# PostgreSQL refuses to run as root: as root, initdb and postgres run as the postgres system user
# (created by the Debian package), which then owns DIR; otherwise as the calling user.
#
# Environment:
#   POSTGRES_BIN            directory holding initdb, pg_ctl, postgres (default: the newest
#                           /usr/lib/postgresql/*/bin)
#   POSTGRES_READY_TIMEOUT  seconds to wait for the server to answer (default 60)
#   POSTGRES_MAX_CONNECTIONS  max_connections of a server started now (default 200; scripts/test.sh
#                           raises it for the one server all test binaries share)
set -euo pipefail
umask 077

READY_TIMEOUT="${POSTGRES_READY_TIMEOUT:-60}"
MAX_CONNECTIONS="${POSTGRES_MAX_CONNECTIONS:-200}"
[[ "$MAX_CONNECTIONS" =~ ^[1-9][0-9]*$ ]] || { echo "postgres.sh: POSTGRES_MAX_CONNECTIONS must be a number, not \"$MAX_CONNECTIONS\"" >&2; exit 2; }
export CI="${CI:-true}" DEBIAN_FRONTEND=noninteractive

# free_port
. "$(dirname "${BASH_SOURCE[0]}")/free-port.sh"

say() { printf 'postgres.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

# pg_bin: the directory of the server binaries, or nothing.
pg_bin() {
  if [[ -n "${POSTGRES_BIN:-}" ]]; then
    [[ -x "$POSTGRES_BIN/initdb" ]] && echo "$POSTGRES_BIN"
    return 0
  fi
  local d
  d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
  [[ -n "$d" && -x "$d/initdb" && -x "$d/pg_ctl" ]] && echo "$d"
  return 0
}

install() {
  [[ -n "$(pg_bin)" ]] && return 0
  [[ $(id -u) -eq 0 ]] || die "failed to find PostgreSQL server binaries: run as root (or: apt-get install postgresql)"
  command -v apt-get >/dev/null || die "failed to install PostgreSQL: no apt-get (set POSTGRES_BIN)"
  if ! apt-cache policy postgresql 2>/dev/null | grep -q 'Candidate: [0-9]'; then
    say "apt does not know postgresql yet: apt-get update"
    apt-get update -q >&2
  fi
  say "installing postgresql (apt)"
  apt-get install -y -q --no-install-recommends postgresql >&2
  [[ -n "$(pg_bin)" ]] || die "failed to install PostgreSQL: no server binaries after apt-get install"
}

# as_owner CMD...: run CMD as the cluster's owner.
run_user() { if [[ $(id -u) -eq 0 ]]; then echo postgres; else id -un; fi; }
as_owner() {
  if [[ $(id -u) -eq 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# running DIR: the postmaster's pid when DIR's server runs.
running() {
  local pidfile="$1/data/postmaster.pid" pid
  [[ -r "$pidfile" ]] || return 1
  pid="$(head -n 1 "$pidfile")"
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  echo "$pid"
}

env_cmd() {
  local dir="$1" pid
  [[ -r "$dir/env" ]] && pid="$(running "$dir")" || return 1
  grep -v '^PID=' "$dir/env"
  echo "PID=$pid"
}

start() {
  local dir="$1" want_port="${2:-}" bin owner port try
  [[ -n "$dir" ]] || die "usage: postgres.sh start DIR [PORT]"
  install
  bin="$(pg_bin)"
  owner="$(run_user)"
  id "$owner" >/dev/null 2>&1 || die "failed to start PostgreSQL: no user $owner (the postgresql package creates it)"
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  chown "$owner" "$dir"
  chmod 0700 "$dir"
  if running "$dir" >/dev/null && [[ -r "$dir/env" ]]; then
    sed -n 's/^URL=//p' "$dir/env"
    return 0
  fi
  if [[ ! -s "$dir/data/PG_VERSION" ]]; then
    rm -rf "$dir/data"
    as_owner "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C --no-sync \
      >"$dir/initdb.log" 2>&1 || { tail -n 25 "$dir/initdb.log" >&2; die "failed to initdb $dir/data"; }
  fi
  for try in 1 2 3 4 5; do
    port="${want_port:-$(free_port)}"
    : >"$dir/postgres.log"
    chown "$owner" "$dir/postgres.log"
    if as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t "$READY_TIMEOUT" \
      -o "-p $port -k $dir -h 127.0.0.1 -F -c fsync=off -c full_page_writes=off -c max_connections=$MAX_CONNECTIONS" \
      start >/dev/null 2>&1; then
      local url="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
      printf 'URL=%s\nPORT=%s\nSOCKET_DIR=%s\n' "$url" "$port" "$dir" >"$dir/env"
      echo "$url"
      return 0
    fi
    [[ -z "$want_port" ]] && grep -q 'could not bind\|Address already in use' "$dir/postgres.log" && continue
    break
  done
  tail -n 25 "$dir/postgres.log" >&2
  die "failed to start PostgreSQL in $dir"
}

stop() {
  local dir="$1" bin pid
  [[ -n "$dir" ]] || die "usage: postgres.sh stop DIR"
  pid="$(running "$dir")" || return 0
  bin="$(pg_bin)"
  if ! as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 10 stop >/dev/null 2>&1; then
    kill -KILL "$pid" 2>/dev/null || true
  fi
}

case "${1:-}" in
  install) install ;;
  start) start "${2:-}" "${3:-}" ;;
  stop) stop "${2:-}" ;;
  env) env_cmd "${2:-}" ;;
  *) die "usage: postgres.sh install | start DIR [PORT] | stop DIR | env DIR" ;;
esac
