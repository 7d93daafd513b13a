# hookroom: a static binary in a minimal image.
#
#   docker build --build-arg VERSION=1.2.3 -t hookroom .
#   docker run -v $PWD/hookroom-config:/etc/hookroom -v hookroom-data:/var/lib/hookroom hookroom
#
# Mount the directory that holds config.yaml (hot reload watches the directory:
# editors replace the file), and set `data_dir: /var/lib/hookroom` in it so the
# database and plugin state land on the data volume.
#
# The build stage mirrors what CI does: CGO_ENABLED=0 (SQLite is the pure-Go
# modernc.org/sqlite; encryption is the pure-Go goolm), pinned modules from go.sum,
# trimmed paths.
FROM golang:1.26-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=local
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# VERSION names the release in `hookroom version`; the VCS revision comes from
# the copied .git (the build info), when the context has one.
ARG VERSION=dev
RUN go build -tags goolm -trimpath -buildvcs=auto \
    -ldflags="-s -w -X github.com/hookroom/hookroom/bot.Version=${VERSION}" \
    -o /out/hookroom ./cmd/hookroom

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/hookroom /usr/local/bin/hookroom
VOLUME ["/var/lib/hookroom"]
WORKDIR /var/lib/hookroom
ENTRYPOINT ["/usr/local/bin/hookroom"]
CMD ["run", "--config", "/etc/hookroom/config.yaml"]
