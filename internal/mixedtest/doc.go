// Package mixedtest builds the previous release of iwf-server from the
// repository's history, for the mixed-version test (internal/chaos
// TestMixedVersion, run by `make mixed-version`): nodes of the previous
// release and of this tree on one PostgreSQL database, and the previous
// release's store conformance suite on a schema this tree migrated.
//
// The previous release is named in one place, the file PREVIOUS_RELEASE
// beside this one: a tag and the commit it stands for. It moves at each
// release. Checkout resolves it (the tag when the clone has it, else the
// commit), adds a detached git worktree of it in a temporary directory and
// removes it when the test ends; Release.BuildServer builds that tree's
// cmd/iwf-server with its own go.mod (the module and build caches are
// shared, so an unchanged package is not compiled again), and
// Release.Conformance runs its PostgreSQL conformance suite.
//
// The package needs git and the go command, and a clone whose history holds
// the commit (a shallow clone does not: `git fetch --unshallow`). It imports
// only the standard library.
package mixedtest
