// Package record defines the engine's stored format: the JSON documents the
// engine keeps in the opaque Data columns of runs, state executions, tasks
// and history events, and the stored form of channel messages, data
// attributes and search attributes.
//
// These types belong to the engine and change only on purpose. They are
// deliberately independent of the generated wire types of api/iwfapi (this
// package must not import it; a test checks): regenerating the API never
// changes a stored row. The engine maps between wire and record types at its
// edge (engine/wire.go).
//
// The field names are the stored JSON names and are frozen. Format version 1
// is the layout that the first releases wrote, which mirrored the wire
// shapes; every document written today carries "v":1 in its run and
// execution records, and a document without "v" is version 1. A change that
// old code could misread bumps FormatVersion and adds an upgrade step to
// DecodeRun / DecodeExecution; see "Upgrades" in docs/architecture.md.
package record
