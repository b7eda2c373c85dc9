// Package docstest runs the newcomer's first steps as the documentation
// writes them: the README's "Try it" and the Go SDK tutorial, against a
// real server. Only the ports change (the documents use the fixed ports
// 8801 and 8803, a test takes free ones). It also checks that the metrics
// table of docs/configuration.md names every metric the engine writes. It
// has tests only, and the process helpers they need.
package docstest
