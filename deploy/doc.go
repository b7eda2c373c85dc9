// Package deploy holds the files that run iwf-server as a service and watch
// it: the Grafana dashboard (grafana/iwf-server.json), the Prometheus alerts
// (prometheus/alerts.yml and their unit tests), the Helm chart
// (helm/iwf-server), a compose file (compose.yaml) and a systemd unit
// (systemd/iwf-server.service). See docs/deploy.md and docs/operations.md.
//
// The package has no code. Its tests check the monitoring files: promtool
// accepts the rules and passes their unit tests, and every metric, label
// and label value the dashboard and the rules name is exported by a real
// server after a small workload. The chart, the compose file and the unit
// are checked by the separate module in ./check (heavy dependencies: Helm,
// the Kubernetes API types, the compose specification's loader), which
// `make test` runs too.
package deploy
