// Package sdk is the root of the iwf-server Go SDK module. It holds no API:
// import github.com/iwf-server/iwf-server/sdk-go/iwf instead.
//
// This file regenerates the SDK's wire models (package internal/wire) from
// the server's contract, ../api/openapi.yaml, with the oapi-codegen version
// pinned by the tool line of the parent module's go.mod, so the SDK and the
// server always agree on the wire. Run `go generate .` in sdk-go; the
// generated file is committed and never edited by hand.
package sdk

//go:generate go tool -modfile=../go.mod oapi-codegen -config internal/wire/oapi-codegen.yaml ../api/openapi.yaml
