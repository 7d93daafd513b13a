# hookroom: the static binary on Debian slim with python3, so process plugins written in
# Python (plugins/sdk/python, standard library only) run in the image.
#
#   docker build -t hookroom \
#     --build-arg VERSION=1.2.3 \
#     --build-arg REVISION="$(git rev-parse HEAD)" \
#     --build-arg DATE="$(date -u -d @"$(git log -1 --format=%ct)" +%Y-%m-%dT%H:%M:%SZ)" .
#   docker run -d -v /srv/hookroom/etc:/etc/hookroom -v hookroom-data:/var/lib/hookroom \
#     -p 127.0.0.1:8080:8080 hookroom
#
# VERSION, REVISION (the commit) and DATE (the commit's time, RFC 3339 UTC) are stamped into
# internal/buildinfo: `hookroom version`, the console and hookroom_build_info report them.
# Without them the image says "dev", like any unstamped source build. compose.yaml passes them
# through.
#
# Mount the directory that holds config.yaml at /etc/hookroom (hot reload watches the
# directory: editors replace the file; the console's config editor writes it), readable by uid
# 10001, and set in it
#   data_dir: /var/lib/hookroom      the database and plugin state, on the volume
#   http:
#     listen: 0.0.0.0:8080           the healthcheck asks /healthz there (HOOKROOM_HEALTHCHECK_URL)
#
# The build mirrors scripts/release.sh: CGO_ENABLED=0 (SQLite is the pure-Go
# modernc.org/sqlite; encryption the pure-Go goolm), modules pinned by go.sum, trimmed paths.
# The build stage runs on the builder's platform and cross-compiles for the target's
# (docker buildx build --platform linux/amd64,linux/arm64 …).
FROM --platform=$BUILDPLATFORM golang:1.26-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=local
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG TARGETOS TARGETARCH
ARG VERSION=""
ARG REVISION=""
ARG DATE=""
RUN GOOS=$TARGETOS GOARCH=$TARGETARCH go build -tags goolm -trimpath -buildvcs=false -mod=readonly \
    -ldflags="-s -w \
      -X github.com/hookroom/hookroom/internal/buildinfo.Version=${VERSION} \
      -X github.com/hookroom/hookroom/internal/buildinfo.Revision=${REVISION} \
      -X github.com/hookroom/hookroom/internal/buildinfo.Date=${DATE}" \
    -o /out/hookroom ./cmd/hookroom

FROM debian:bookworm-slim
# python3 (3.11) for Python process plugins, CA certificates for the homeserver and model
# APIs over TLS, tzdata for schedules and plugin time zones. No pip: the SDK is stdlib-only.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 ca-certificates tzdata \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 hookroom \
 && useradd --system --uid 10001 --gid hookroom --home-dir /var/lib/hookroom \
      --no-create-home --shell /usr/sbin/nologin hookroom \
 && install -d -m 0750 -o root -g hookroom /etc/hookroom \
 && install -d -m 0700 -o hookroom -g hookroom /var/lib/hookroom
COPY --from=build /out/hookroom /usr/bin/hookroom
# `import hookroom_plugin` works for every Python plugin (plugins get no PYTHONPATH from
# hookroom's environment, so the SDK goes where python3 looks by itself).
COPY --from=build --chmod=0644 /src/plugins/sdk/python/hookroom_plugin.py /usr/lib/python3/dist-packages/hookroom_plugin.py
COPY --from=build --chmod=0644 /src/config.example.yaml /usr/share/hookroom/config.example.yaml
# Declared after the directory got its owner: a new named volume starts as hookroom's, 0700.
VOLUME ["/var/lib/hookroom"]
WORKDIR /var/lib/hookroom
USER 10001:10001
EXPOSE 8080
ENV HOOKROOM_HEALTHCHECK_URL=http://127.0.0.1:8080/healthz
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python3", "-c", "import os, urllib.request; urllib.request.urlopen(os.environ['HOOKROOM_HEALTHCHECK_URL'], timeout=4)"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/hookroom"]
CMD ["run", "--config", "/etc/hookroom/config.yaml"]
