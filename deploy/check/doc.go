// Package check tests the deployment files of deploy/: the Helm chart
// (helm lint, helm template with several sets of values, each rendered
// object strictly decoded into its Kubernetes API type and checked for what
// the server needs), the compose file (loaded with the compose
// specification's Go library) and the systemd unit (its settings, and
// systemd-analyze and systemd-sysusers: skipped when they are not
// installed, except in CI, where that fails).
//
// It is a module of its own so that Helm, the Kubernetes API types and the
// compose loader stay out of the server's go.mod; `make test` runs it.
package check
