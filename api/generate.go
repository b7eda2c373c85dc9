// Package api holds the wire contract of iwf-server.
//
// openapi.yaml describes the iWF v1 REST API: the endpoints iwf-server hosts
// for SDK clients (tag "server") and the worker endpoints iwf-server calls
// (tag "worker"). The Go code in package iwfapi is generated from it with
// oapi-codegen; edit openapi.yaml (or the oapi-codegen.*.yaml
// configurations) and run `go generate ./api/...` (or `make generate`)
// instead of editing the generated files.
package api

//go:generate go tool oapi-codegen -config oapi-codegen.client.yaml openapi.yaml
//go:generate go tool oapi-codegen -config oapi-codegen.server.yaml openapi.yaml
