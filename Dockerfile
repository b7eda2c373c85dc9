# syntax=docker/dockerfile:1
# Build: docker build -t iwf-server .
# Run:   docker run -p 8801:8801 -v iwf-data:/data iwf-server
#        (or -e IWF_DB=postgres://user:pass@host:5432/iwf for PostgreSQL)

FROM golang:1.26 AS build
WORKDIR /src
# Module downloads are cached in their own layer. The SDK's go.mod is needed
# too: the root module replaces the SDK with ./sdk-go (samples and iwftest).
COPY go.mod go.sum ./
COPY sdk-go/go.mod sdk-go/
RUN go mod download
COPY . .
# The build context has no .git: make docker passes the commit and the
# date, which reach package internal/buildinfo (iwf-server version,
# GET /info/version, iwf_build_info); the release is in the sources.
ARG COMMIT=
ARG BUILD_DATE=
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath \
    -ldflags="-s -w -X github.com/iwf-server/iwf-server/internal/buildinfo.commit=${COMMIT} -X github.com/iwf-server/iwf-server/internal/buildinfo.buildDate=${BUILD_DATE}" \
    -o /out/iwf-server ./cmd/iwf-server
# The data directory, owned by the non-root user of the final stage.
RUN mkdir -p /out/data && chown 65532:65532 /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/iwf-server /usr/local/bin/iwf-server
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
ENV IWF_ADDR=:8801 \
    IWF_DB=sqlite:///data/iwf.db \
    IWF_LOG_FORMAT=json
VOLUME ["/data"]
EXPOSE 8801
ENTRYPOINT ["/usr/local/bin/iwf-server"]
