// Package httpapi owns the REST API of iwf-server: iWF's v1 server endpoints
// served by the strict server generated from api/openapi.yaml, request
// validation against the embedded spec, the one table that maps engine
// error codes to HTTP statuses and iWF ErrorResponse bodies, and the
// per-request middleware (request id, access log, panic recovery, body
// limit, and the access table of package auth with the audit log).
//
// It imports package engine (for its error codes and the actor of a
// call), the generated api/iwfapi, internal/auth, internal/audit and
// internal/buildinfo (GET /info/version). The engine is reached through
// Service, an interface declared here, so that the HTTP layer can be
// tested on its own.
package httpapi
