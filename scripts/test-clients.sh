#!/usr/bin/env bash
# test-clients.sh — installs the independent Matrix clients that the end-to-end tests drive
# (matrixio/hstest): nothing on this project wrote them, so they talk to hookroom as people's apps do.
#
#   scripts/test-clients.sh install       all of the below (one apt-get run, npm ci meanwhile)
#   scripts/test-clients.sh install-nio   Debian's python3-matrix-nio and python3-olm (apt) for
#                                         /usr/bin/python3; needs root or password-less sudo
#   scripts/test-clients.sh install-js    `npm ci` in matrixio/hstest/jsclient (matrix-js-sdk with its
#                                         Rust crypto, pinned by the committed package-lock.json)
#   scripts/test-clients.sh install-mcp   `npm ci` in mcp/mcptest/filesystem: the reference MCP
#                                         filesystem server (@modelcontextprotocol/server-filesystem,
#                                         pinned by the committed package-lock.json) that the MCP tests run
#   scripts/test-clients.sh install-browser  Debian's chromium (apt), the headless browser the
#                                         console's tests drive (internal/browsertest); root or sudo
#   scripts/test-clients.sh install-voice Debian's espeak-ng and opus-tools (apt): the voice tests
#                                         record real speech and encode it as Ogg/Opus; root or sudo
#
# Unattended (no stdin) and idempotent: a step that is already done costs a check. install-js and
# install-mcp run npm ci again only when package.json, package-lock.json or the node version changed
# since the last successful install (a stamp in node_modules records them), and hold a lock so that
# several test binaries asking at once install once. Any failure exits non-zero with the tool's output.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JSDIR="$ROOT/matrixio/hstest/jsclient"
MCPDIR="$ROOT/mcp/mcptest/filesystem"
# matrix-js-sdk 37.5.0 is the newest release that supports Node 20.
readonly NODE_MIN_MAJOR=20

say() { printf 'test-clients.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

# apt_install PACKAGE...: installs Debian packages unattended, refreshing the package lists only
# when apt does not know one of them yet (a fresh machine).
apt_install() {
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then sudo=(sudo -n); fi
  apt_get() { "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -q "$@" </dev/null; }
  local p
  for p in "$@"; do
    if ! apt-cache policy "$p" 2>/dev/null | grep -q 'Candidate: [0-9]'; then
      apt_get update
      break
    fi
  done
  apt_get install -y "$@"
}

install_nio() {
  if /usr/bin/python3 -c 'import nio, olm' 2>/dev/null; then return 0; fi
  apt_install python3-matrix-nio python3-olm
  /usr/bin/python3 -c 'import nio, olm' ||
    die "python3-matrix-nio and python3-olm installed but /usr/bin/python3 cannot import nio and olm"
}

install_browser() {
  if command -v chromium >/dev/null; then return 0; fi
  apt_install chromium
  command -v chromium >/dev/null || die "chromium installed but not on PATH"
}

install_voice() {
  if command -v espeak-ng >/dev/null && command -v opusenc >/dev/null; then return 0; fi
  say "installing espeak-ng and opus-tools (apt)"
  local log t0=$SECONDS
  log="$(mktemp)"
  if ! apt_install espeak-ng opus-tools >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    die "apt-get install espeak-ng opus-tools failed (output above)"
  fi
  rm -f "$log"
  command -v espeak-ng >/dev/null && command -v opusenc >/dev/null ||
    die "espeak-ng and opus-tools installed but espeak-ng or opusenc is not on PATH"
  say "installed in $((SECONDS - t0)) s"
}

install_js() {
  command -v node >/dev/null || die "node is not installed (the js test client needs Node >= $NODE_MIN_MAJOR with npm)"
  local major
  major="$(node -p 'process.versions.node.split(".")[0]')"
  ((major >= NODE_MIN_MAJOR)) || die "node $(node --version) is too old: the js test client needs Node >= $NODE_MIN_MAJOR"
  npm_ci_dir "$JSDIR" "the js test client's packages" \
    'import("matrix-js-sdk").then(() => {}, (e) => { console.error(e); process.exit(1); })'
}

# npm_ci_dir DIR WHAT CHECK: npm ci in DIR unless its stamp (node_modules/.hookroom-install-stamp)
# says the same package files and node version are installed; WHAT names the packages in messages,
# CHECK is a node -e script that must succeed afterwards. Holds DIR/.install.lock while installing,
# so that several test binaries asking at once install once.
npm_ci_dir() {
  local dir="$1" what="$2" check="$3" stamp="$1/node_modules/.hookroom-install-stamp"
  command -v node >/dev/null || die "node is not installed (needed for $what in $dir)"
  command -v npm >/dev/null || die "npm is not installed (needed for $what in $dir)"
  [[ -f "$dir/package-lock.json" ]] || die "missing $dir/package-lock.json"
  local want
  want="$({ cat "$dir/package.json" "$dir/package-lock.json"; node --version; } | sha256sum | cut -d' ' -f1)"
  [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && return 0
  exec 8>"$dir/.install.lock"
  flock 8
  if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then exec 8>&-; return 0; fi
  say "installing $what (npm ci in $dir)"
  local log t0=$SECONDS
  log="$(mktemp)"
  if ! (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) </dev/null >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    die "npm ci failed in $dir (output above)"
  fi
  rm -f "$log"
  (cd "$dir" && node -e "$check") || die "npm ci succeeded but node cannot load $what in $dir"
  printf '%s\n' "$want" >"$stamp"
  exec 8>&-
  say "installed in $((SECONDS - t0)) s"
}

install_mcp() {
  npm_ci_dir "$MCPDIR" "the MCP filesystem server" 'require("fs").accessSync("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")'
}

# install_all installs every Debian package the steps below still lack in one apt-get run (one
# download, one round of dpkg triggers: on a fresh machine each run costs ~10 s of man-db alone),
# while npm ci runs for the two Node packages; then each step checks its result.
install_all() {
  local pkgs=()
  /usr/bin/python3 -c 'import nio, olm' 2>/dev/null || pkgs+=(python3-matrix-nio python3-olm)
  command -v chromium >/dev/null || pkgs+=(chromium)
  { command -v espeak-ng && command -v opusenc; } >/dev/null || pkgs+=(espeak-ng opus-tools)
  local npm_pid
  { install_js && install_mcp; } &
  npm_pid=$!
  if ((${#pkgs[@]})); then
    say "installing ${pkgs[*]} (apt)"
    local t0=$SECONDS
    apt_install "${pkgs[@]}" >&2
    say "installed in $((SECONDS - t0)) s"
  fi
  wait "$npm_pid" || die "npm ci failed (output above)"
  install_nio
  install_browser
  install_voice
}

case "${1:-}" in
install) install_all ;;
install-nio) install_nio ;;
install-js) install_js ;;
install-mcp) install_mcp ;;
install-browser) install_browser ;;
install-voice) install_voice ;;
*) echo "usage: $0 install | install-nio | install-js | install-mcp | install-browser | install-voice" >&2; exit 2 ;;
esac
