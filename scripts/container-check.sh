#!/usr/bin/env bash
# container-check.sh — build hookroom's container image from the Dockerfile with podman and check
# it from the outside, on a machine without Docker or access to a container registry.
#
#   scripts/container-check.sh [VERSION]      (as root; VERSION defaults to 0.0.0-check)
#
# NOT part of scripts/test.sh: it needs root, podman and debootstrap (apt-get install podman
# debootstrap runc uidmap fuse-overlayfs slirp4netns) and takes several minutes the first time
# (debootstrap, the image build). Unattended and idempotent: run it again and it reuses the base
# images and the build cache (each new commit compiles afresh and leaves a ~1.5 GB build-stage
# layer in podman's cache: `podman image prune` drops those).
#
# 1. Stand-ins for the Dockerfile's base images, under their real names, made once (kept in
#    podman's storage; HOOKROOM_CONTAINER_REBASE=1 makes them again):
#      docker.io/library/debian:bookworm-slim   `debootstrap --variant=minbase bookworm` from this
#                                               machine's Debian mirror, slimmed like the real one
#                                               (no docs, man pages or locales; deb822 sources)
#      docker.io/library/golang:1.26-bookworm   that plus git, ca-certificates (and this
#                                               machine's local CAs) and its Go toolchain in
#                                               /usr/local/go (GOPATH=/go, PATH and
#                                               GOTOOLCHAIN=local as in the real image)
#    so the Dockerfile builds unchanged, with --pull=never (nothing is pulled from a registry).
#    Images of those names that are already there (pulled from a registry) are used as they are.
# 2. The image, HOOKROOM_CONTAINER_IMAGE (default localhost/hookroom:check), built like a
#    release (scripts/release.sh): from the commit (HOOKROOM_CONTAINER_REF, default HEAD) as
#    git archive exports it, never the work tree, with VERSION, REVISION (the commit) and DATE
#    (the commit's time) as build args, in Docker format (the OCI format has no HEALTHCHECK).
#    The build stage's `go mod download` uses the Go module proxy (proxy.golang.org) over the
#    build's network, as a registry build does.
# 3. Checks, each printed as "ok: …" (the first failure ends the script with status 1):
#    - `hookroom version` in the image prints VERSION, the commit and its date;
#    - the image's user is 10001:10001, /var/lib/hookroom is a volume, and a new named volume
#      there starts as uid 10001, mode 0700; the healthcheck is in the image;
#    - `hookroom hooks` in the container, on a config that enables examples/tool-guard (Python,
#      `import hookroom_plugin` from the image's SDK) mounted into it, starts the plugin and
#      lists its gate hook;
#    - `hookroom run` in the container (--network host) against a Dendrite started on this
#      machine with scripts/dendrite.sh (echo model, the Python plugin enabled): /readyz answers
#      200, `podman healthcheck run` says healthy, the server's process runs as uid 10001, and
#      `podman stop` (SIGTERM) ends it with exit status 0 within 10 s, its log saying it ran,
#      caught up, stopped the plugin and stopped.
#    It prints the stand-ins' and the build's times and the image's size.
#
# Where cgroups are mounted in hybrid mode (v1 controllers plus cgroup2 at /sys/fs/cgroup/unified)
# crun, podman's default runtime on Debian, cannot run containers: the script then uses runc.
# Every container gets the caller's hard rlimits (nofile; nproc at most 32768): podman's defaults
# (1048576) need CAP_SYS_RESOURCE, which a sandboxed root may lack.
#
# Environment:
#   HOOKROOM_CACHE             cache root (default ~/.cache/hookroom), for scripts/dendrite.sh
#   HOOKROOM_CONTAINER_IMAGE   the image to build (default localhost/hookroom:check)
#   HOOKROOM_CONTAINER_REF     the commit to build (default HEAD)
#   HOOKROOM_CONTAINER_REBASE  1: make the base image stand-ins again
#   HOOKROOM_DEBIAN_MIRROR     the Debian mirror for debootstrap (default: this machine's, from
#                              /etc/apt/sources.list*, else http://deb.debian.org/debian)
#   HOOKROOM_CONTAINER_RUNTIME the OCI runtime (default: podman's, runc in hybrid cgroup mode)
#   HOOKROOM_KEEP              1: keep the temporary directory (configs, logs) for a look
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
IMAGE="${HOOKROOM_CONTAINER_IMAGE:-localhost/hookroom:check}"
REF="${HOOKROOM_CONTAINER_REF:-HEAD}"
VERSION="${1:-0.0.0-check}"
VERSION="${VERSION#v}"
readonly DEBIAN_IMAGE=docker.io/library/debian:bookworm-slim
readonly GOLANG_IMAGE=docker.io/library/golang:1.26-bookworm
readonly UID_WANT=10001
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

# free_port
. "$ROOT/scripts/free-port.sh"

say() { printf 'container-check.sh: %s\n' "$*" >&2; }
ok() { printf 'ok: %s\n' "$*"; }
die() { say "FAIL: $*"; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

[[ $(id -u) == 0 ]] || die "run as root (debootstrap and rootful podman)"
for cmd in podman debootstrap go git tar curl; do
  command -v "$cmd" >/dev/null || die "needs $cmd on PATH (apt-get install -y podman debootstrap)"
done
# The runtime and rlimits (see the header).
RUNTIME="${HOOKROOM_CONTAINER_RUNTIME:-}"
if [[ -z "$RUNTIME" && "$(stat -f -c %T /sys/fs/cgroup/unified 2>/dev/null)" == cgroup2fs ]]; then
  command -v runc >/dev/null || die "cgroups are in hybrid mode here, which crun does not support: apt-get install -y runc"
  RUNTIME=runc
fi
PM_FLAGS=()
[[ -n "$RUNTIME" ]] && PM_FLAGS+=(--runtime "$RUNTIME")
nofile="$(ulimit -Hn)" nproc="$(ulimit -Hu)"
[[ "$nofile" == unlimited || "$nofile" -gt 1048576 ]] && nofile=1048576
[[ "$nproc" == unlimited || "$nproc" -gt 32768 ]] && nproc=32768
ULIMITS=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
pm() { podman "${PM_FLAGS[@]}" "$@"; }

[[ "$VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || die "VERSION must be semver, not \"$VERSION\""

WORK="$(mktemp -d /tmp/hookroom-container-check.XXXXXX)"
chmod 0755 "$WORK"
CONTAINER="hookroom-check-$$"
VOLUME="hookroom-check-$$"
HS=""
cleanup() {
  local status=$?
  pm rm -f -t 0 "$CONTAINER" >/dev/null 2>&1 || true
  pm volume rm -f "$VOLUME" >/dev/null 2>&1 || true
  [[ -n "$HS" ]] && { "$ROOT/scripts/dendrite.sh" stop "$HS" >/dev/null 2>&1 || true; rm -rf "$HS"; }
  if [[ "${HOOKROOM_KEEP:-}" == 1 || $status != 0 ]]; then
    say "kept $WORK (configs, logs)"
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT

# ---------------------------------------------------------------------------------------------
# 1. Base image stand-ins.

debian_mirror() {
  if [[ -n "${HOOKROOM_DEBIAN_MIRROR:-}" ]]; then echo "$HOOKROOM_DEBIAN_MIRROR"; return; fi
  local m
  m="$(grep -hsE '^URIs:.*/debian/?$' /etc/apt/sources.list.d/*.sources | head -n1 | awk '{print $2}')"
  [[ -n "$m" ]] || m="$(grep -hsE '^deb .*/debian/? bookworm' /etc/apt/sources.list /etc/apt/sources.list.d/*.list |
    head -n1 | awk '{ for (i = 2; i <= NF; i++) if ($i ~ /^https?:/) { print $i; exit } }')"
  echo "${m:-http://deb.debian.org/debian}"
}

make_debian() {
  local mirror rootfs start
  mirror="$(debian_mirror)"
  rootfs="$WORK/rootfs"
  start="$(now)"
  say "debootstrap --variant=minbase bookworm from $mirror (a few minutes)"
  debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$WORK/debootstrap.log" 2>&1 ||
    { tail -n 20 "$WORK/debootstrap.log" >&2; die "debootstrap failed"; }
  # What the real debian:bookworm-slim has: dpkg leaves out docs, man pages and locales (and the
  # files already there go), apt keeps no package cache, deb822 sources with updates and security.
  cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
  cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
  rm -f "$rootfs/etc/apt/sources.list"
  cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${mirror%/debian}/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$rootfs"/usr/share/{man,groff,info,lintian,linda}/* "$rootfs"/var/lib/apt/lists/* \
    "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/log/*.log \
    "$rootfs"/etc/hostname "$rootfs"/etc/resolv.conf
  find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
  pm rmi -f "$DEBIAN_IMAGE" >/dev/null 2>&1 || true
  tar --numeric-owner --xattrs -C "$rootfs" -c . |
    pm import --quiet \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'CMD ["bash"]' \
      --change 'LABEL org.hookroom.stand-in=debootstrap' \
      - "$DEBIAN_IMAGE" >/dev/null
  rm -rf "$rootfs"
  say "made $DEBIAN_IMAGE in $(since "$start") s"
}

# golang_recipe writes the golang stand-in's Containerfile and its local CAs into $WORK and prints
# a key for them: this machine's Go version, a hash of the Containerfile, the CAs and the debian
# stand-in's id. A stand-in with another key (labelled) is made again.
golang_recipe() {
  local gover
  gover="$(go env GOVERSION)"
  [[ "$gover" == go1.26* ]] || die "this machine's Go is $gover, the stand-in for $GOLANG_IMAGE needs go1.26"
  # The context is GOROOT itself (COPY . /usr/local/go); the Containerfile lives outside it.
  # The local CAs this machine trusts (/usr/local/share/ca-certificates: a TLS-inspecting egress
  # proxy, a company CA) are trusted in the build stage too, or `go mod download` cannot reach
  # the module proxy through them; the runtime base image gets none.
  cat >"$WORK/golang.Containerfile" <<EOF
FROM $DEBIAN_IMAGE
RUN apt-get update \\
 && apt-get install -y --no-install-recommends git ca-certificates netbase \\
 && rm -rf /var/lib/apt/lists/* \\
 && { cp /run/host-ca/*.crt /usr/local/share/ca-certificates/ 2>/dev/null || true; } \\
 && update-ca-certificates
ENV GOLANG_VERSION=${gover#go} GOTOOLCHAIN=local GOPATH=/go
ENV PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
COPY . /usr/local/go
RUN mkdir -p /go/src /go/bin && chmod -R 1777 /go && go version
WORKDIR /go
EOF
  rm -rf "$WORK/host-ca"
  mkdir -p "$WORK/host-ca"
  cp /usr/local/share/ca-certificates/*.crt "$WORK/host-ca/" 2>/dev/null || true
  printf '%s-%s\n' "$gover" "$({ cat "$WORK/golang.Containerfile" "$WORK"/host-ca/* 2>/dev/null
    pm image inspect --format '{{.Id}}' "$DEBIAN_IMAGE"; } | sha256sum | cut -c1-16)"
}

make_golang() { # KEY
  local start
  start="$(now)"
  pm rmi -f "$GOLANG_IMAGE" >/dev/null 2>&1 || true
  pm build "${ULIMITS[@]}" --pull=never --format docker -q -f "$WORK/golang.Containerfile" \
    --label "org.hookroom.stand-in=$1" -v "$WORK/host-ca:/run/host-ca:ro" -t "$GOLANG_IMAGE" \
    "$(go env GOROOT)" >"$WORK/golang-build.log" 2>&1 ||
    { tail -n 20 "$WORK/golang-build.log" >&2; die "building $GOLANG_IMAGE failed"; }
  say "made $GOLANG_IMAGE ($1) in $(since "$start") s"
}

if [[ "${HOOKROOM_CONTAINER_REBASE:-}" == 1 ]] || ! pm image exists "$DEBIAN_IMAGE"; then
  make_debian
else
  say "using $DEBIAN_IMAGE from podman's storage (HOOKROOM_CONTAINER_REBASE=1 makes it again)"
fi
key="$(golang_recipe)"
have="$(pm image inspect --format '{{index .Labels "org.hookroom.stand-in"}}' "$GOLANG_IMAGE" 2>/dev/null || echo none)"
if [[ "${HOOKROOM_CONTAINER_REBASE:-}" == 1 || "$have" == none ]] ||
  [[ -n "$have" && "$have" != "<no value>" && "$have" != "$key" ]]; then
  make_golang "$key"
elif [[ -z "$have" || "$have" == "<no value>" ]]; then
  say "using $GOLANG_IMAGE from podman's storage (not a stand-in: a pulled image is used as it is)"
else
  say "using $GOLANG_IMAGE ($key) from podman's storage"
fi

# ---------------------------------------------------------------------------------------------
# 2. The image, from the commit, stamped like a release.

REVISION="$(git -C "$ROOT" rev-parse --verify "$REF^{commit}")" || die "\"$REF\" names no commit"
DATE="$(date -u -d "@$(git -C "$ROOT" log -1 --format=%ct "$REVISION")" +%Y-%m-%dT%H:%M:%SZ)"
if [[ "$REF" == HEAD && -n "$(git -C "$ROOT" status --porcelain --untracked-files=no)" ]]; then
  say "the work tree has uncommitted changes; building the commit ${REVISION:0:12} without them"
fi
SRC="$WORK/src"
mkdir "$SRC"
git -C "$ROOT" archive --format=tar "$REVISION" | tar -x -C "$SRC"
say "building $IMAGE: version $VERSION, revision ${REVISION:0:12}, date $DATE"
old_id="$(pm image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)"
start="$(now)"
pm build "${ULIMITS[@]}" --pull=never --format docker -t "$IMAGE" \
  --build-arg TARGETOS="$(go env GOOS)" --build-arg TARGETARCH="$(go env GOARCH)" \
  --build-arg VERSION="$VERSION" --build-arg REVISION="$REVISION" --build-arg DATE="$DATE" \
  "$SRC" >"$WORK/build.log" 2>&1 || { tail -n 30 "$WORK/build.log" >&2; die "podman build failed"; }
BUILD_SECONDS="$(since "$start")"
# The image this build replaced goes; the build cache stays (see the header).
if [[ -n "$old_id" && "$old_id" != "$(pm image inspect --format '{{.Id}}' "$IMAGE")" ]]; then
  pm rmi "$old_id" >/dev/null 2>&1 || true
fi
SIZE="$(pm image inspect --format '{{.Size}}' "$IMAGE")"
ok "built $IMAGE in $BUILD_SECONDS s, $((SIZE / 1000000)) MB"

# ---------------------------------------------------------------------------------------------
# 3. Checks.

out="$(pm run "${ULIMITS[@]}" --rm --no-healthcheck "$IMAGE" version)"
[[ "$out" == "hookroom $VERSION (revision ${REVISION:0:12}, $DATE)"* ]] ||
  die "hookroom version printed \"$out\", want hookroom $VERSION (revision ${REVISION:0:12}, $DATE) …"
ok "podman run --rm IMAGE version: $out"

user="$(pm image inspect --format '{{.Config.User}}' "$IMAGE")"
[[ "$user" == "$UID_WANT:$UID_WANT" ]] || die "the image's user is \"$user\", want $UID_WANT:$UID_WANT"
volumes="$(pm image inspect --format '{{json .Config.Volumes}}' "$IMAGE")"
[[ "$volumes" == *'"/var/lib/hookroom"'* ]] || die "the image's volumes are $volumes, want /var/lib/hookroom"
health="$(pm image inspect --format '{{json .HealthCheck}}' "$IMAGE")"
[[ "$health" == *python3* ]] || die "the image has no HEALTHCHECK ($health)"
pm volume create "$VOLUME" >/dev/null
owner="$(pm run "${ULIMITS[@]}" --rm --no-healthcheck -v "$VOLUME:/var/lib/hookroom" --entrypoint stat "$IMAGE" -c '%u:%g %a' /var/lib/hookroom)"
[[ "$owner" == "$UID_WANT:$UID_WANT 700" ]] || die "a new volume at /var/lib/hookroom is $owner, want $UID_WANT:$UID_WANT 700"
ok "user $user, volume /var/lib/hookroom (a new named volume: $owner), healthcheck $health"

# The configuration: readable by uid 10001, no secrets in it (the shared secret comes from the
# environment). Dendrite's URL and server name are filled in below.
ETC="$WORK/etc"
mkdir -m 0755 "$ETC"
write_config() { # HOMESERVER SERVER_NAME LISTEN
  cat >"$ETC/config.yaml" <<EOF
# Written by scripts/container-check.sh.
data_dir: /var/lib/hookroom
log:
  level: info
  format: json
matrix:
  homeserver: $1
  server_name: $2
  registration:
    shared_secret: \${HOOKROOM_SHARED_SECRET}
http:
  listen: $3
models:
  default:
    provider: echo
rooms:
  lobby:
    alias: lobby
    name: hookroom container check
agents:
  assistant:
    display_name: Assistant
    role: A friendly general helper.
    rooms: [lobby]
plugins:
  - path: /opt/hookroom/plugins/tool-guard
    settings:
      deny:
        - {tool: shell, reason: "No shell for agents."}
EOF
  chmod 0644 "$ETC/config.yaml"
}
PLUGIN_MOUNT="$SRC/examples/tool-guard:/opt/hookroom/plugins/tool-guard:ro"

write_config http://127.0.0.1:8008 localhost 127.0.0.1:8080
sdk="$(pm run "${ULIMITS[@]}" --rm --no-healthcheck --entrypoint python3 "$IMAGE" -c 'import hookroom_plugin; print(hookroom_plugin.__file__)')"
[[ "$sdk" == /usr/lib/python3/dist-packages/hookroom_plugin.py ]] || die "python3 in the image imports hookroom_plugin from \"$sdk\""
# The plugin's directory alone is mounted: its fallback (the SDK in a hookroom checkout, two
# levels up) is not there, so `import hookroom_plugin` must find the image's copy.
out="$(pm run "${ULIMITS[@]}" --rm --no-healthcheck -e HOOKROOM_SHARED_SECRET=unused -v "$ETC:/etc/hookroom:ro" -v "$PLUGIN_MOUNT" \
  "$IMAGE" hooks --config /etc/hookroom/config.yaml 2>"$WORK/hooks.err")" ||
  { cat "$WORK/hooks.err" >&2; die "hookroom hooks failed in the container"; }
grep -q '"message":"process plugin started"' "$WORK/hooks.err" &&
  grep -Eq '^tool:before_call +gate +[0-9]+ +tool-guard +guard ' <<<"$out" ||
  { printf '%s\n' "$out" >&2; cat "$WORK/hooks.err" >&2; die "hookroom hooks did not start tool-guard and list its gate hook"; }
ok "python3 imports the SDK from $sdk; hookroom hooks in the container started the Python plugin tool-guard: $(grep -m1 '^tool:before_call' <<<"$out" | tr -s ' ')"

# The server against a real Dendrite on this machine.
"$ROOT/scripts/dendrite.sh" build >/dev/null
HS="$(mktemp -d /dev/shm/hookroom-container-check-hs.XXXXXX)"
"$ROOT/scripts/dendrite.sh" start "$HS" >/dev/null
# shellcheck disable=SC1091
. "$HS/env" # URL, SECRET, SERVER_NAME, PID
PORT="$(free_port)"
write_config "$URL" "$SERVER_NAME" "127.0.0.1:$PORT"
# The short runs above go without the healthcheck (--no-healthcheck), this one has the image's.
# Without systemd (this VM, most CI containers) podman cannot add the healthcheck's timer and
# says so on stderr ("unable to get systemd connection to add healthchecks"): kept in
# $WORK/podman-run.err; `podman healthcheck run` below runs the check instead.
pm run "${ULIMITS[@]}" -d --name "$CONTAINER" --network host \
  -e HOOKROOM_SHARED_SECRET="$SECRET" -e HOOKROOM_HEALTHCHECK_URL="http://127.0.0.1:$PORT/healthz" \
  -v "$ETC:/etc/hookroom:ro" -v "$VOLUME:/var/lib/hookroom" -v "$PLUGIN_MOUNT" "$IMAGE" \
  >/dev/null 2>"$WORK/podman-run.err" || { cat "$WORK/podman-run.err" >&2; die "podman run failed"; }
start="$(now)"
ready=""
for _ in $(seq 1 240); do
  if [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/readyz")" == 200 ]]; then ready=1; break; fi
  [[ "$(pm inspect --format '{{.State.Running}}' "$CONTAINER")" == true ]] ||
    { pm logs "$CONTAINER" 2>&1 | tail -n 30 >&2; die "hookroom exited in the container"; }
  sleep 0.5
done
[[ -n "$ready" ]] || { pm logs "$CONTAINER" 2>&1 | tail -n 30 >&2; die "/readyz did not answer 200 within 120 s"; }
ok "hookroom run in the container against Dendrite $URL: /readyz 200 after $(since "$start") s"

pm healthcheck run "$CONTAINER" >"$WORK/healthcheck.out" 2>&1 ||
  { cat "$WORK/healthcheck.out" >&2; die "podman healthcheck run: unhealthy"; }
status="$(pm inspect --format '{{.State.Health.Status}}' "$CONTAINER" 2>/dev/null ||
  pm inspect --format '{{.State.Healthcheck.Status}}' "$CONTAINER")"
[[ "$status" == healthy ]] || die "the container's health is \"$status\", want healthy"
ok "podman healthcheck run: status $status"

pid="$(pm inspect --format '{{.State.Pid}}' "$CONTAINER")"
puid="$(stat -c %u "/proc/$pid")"
[[ "$puid" == "$UID_WANT" ]] || die "the server's process $pid runs as uid $puid, want $UID_WANT"
ok "the server's process ($(tr '\0' ' ' <"/proc/$pid/cmdline")) runs as uid $puid"
pm exec "$CONTAINER" sh -c 'ls -A /var/lib/hookroom | grep -q .' ||
  die "the server wrote nothing into /var/lib/hookroom"

start="$(now)"
pm stop -t 30 "$CONTAINER" >/dev/null 2>>"$WORK/podman-run.err"
stop_seconds="$(since "$start")"
code="$(pm inspect --format '{{.State.ExitCode}}' "$CONTAINER")"
pm logs "$CONTAINER" >"$WORK/hookroom.log" 2>&1 || true
[[ "$code" == 0 ]] || { tail -n 20 "$WORK/hookroom.log" >&2; die "hookroom exited with status $code on SIGTERM, want 0"; }
awk -v s="$stop_seconds" 'BEGIN { exit !(s < 10) }' || die "hookroom took $stop_seconds s to stop on SIGTERM, want < 10"
for line in 'hookroom is running' 'account caught up' 'process plugin stopped' 'hookroom stopped'; do
  grep -q "\"message\":\"$line\"" "$WORK/hookroom.log" ||
    { tail -n 20 "$WORK/hookroom.log" >&2; die "hookroom's log in the container lacks \"$line\""; }
done
ok "podman stop (SIGTERM): exit status 0 after $stop_seconds s; the log says: hookroom is running, account caught up, process plugin stopped, hookroom stopped"

printf 'image %s: %s MB, built in %s s\n' "$IMAGE" "$((SIZE / 1000000))" "$BUILD_SECONDS"
