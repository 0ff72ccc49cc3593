# syntax=docker/dockerfile:1
# The ilinkflow image: worker (the entrypoint), starter and ilinksim, static, on distroless
# as a non-root user. Multi-arch: the build stage runs on the builder's platform and
# cross-compiles for the target's.
#
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg VERSION=v1.2.3 --build-arg COMMIT=$(git rev-parse HEAD) \
#     --build-arg DATE=$(date -u +%Y-%m-%dT%H:%M:%SZ) -t ilinkflow:v1.2.3 .
#
# The binaries are built by .ci/build-binaries, the same command CI runs
# (deploy/deploy_test.go checks that this file runs it).

FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS TARGETARCH VERSION COMMIT DATE
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH VERSION=$VERSION COMMIT=$COMMIT DATE=$DATE \
    .ci/build-binaries /out

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION COMMIT
LABEL org.opencontainers.image.title="ilinkflow" \
      org.opencontainers.image.description="Durable gateway for WeChat iLink bots on Temporal and PostgreSQL" \
      org.opencontainers.image.source="https://github.com/ilinkflow/ilinkflow" \
      org.opencontainers.image.version="$VERSION" \
      org.opencontainers.image.revision="$COMMIT"
COPY --from=build /out/worker /out/starter /out/ilinksim /usr/local/bin/
# The reply API and the admin listener (metrics, health, codec, web front end) on every
# interface of the container; the defaults (loopback) suit a process on a host.
ENV ILINKFLOW_HTTP_ADDR=0.0.0.0:8090 \
    ILINKFLOW_ADMIN_ADDR=0.0.0.0:8091
EXPOSE 8090 8091
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/worker"]
