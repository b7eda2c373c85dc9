// Package docstest runs the newcomer's first steps as the documentation
// writes them: the README's "Try it" and the Go SDK tutorial, against a
// real server. Only the ports change (the documents use the fixed ports
// 8801 and 8803, a test takes free ones). It has tests only, and the
// process helpers they need.
package docstest
