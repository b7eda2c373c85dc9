module github.com/iwf-server/iwf-server/sdk-go

go 1.26.8

require (
	go.opentelemetry.io/otel v1.46.0
	go.opentelemetry.io/otel/trace v1.46.0
)

require github.com/cespare/xxhash/v2 v2.3.0 // indirect
