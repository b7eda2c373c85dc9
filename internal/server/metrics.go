package server

import (
	"fmt"
	"io"
	"strings"

	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/buildinfo"
)

// metricsWriter writes what GET /metrics serves: the engine's metrics and
// iwf_build_info, the build of this process (package buildinfo) as labels
// of a gauge that is always 1, so that a dashboard can tell which release
// each node runs.
func metricsWriter(eng *engine.Engine) func(io.Writer) error {
	info := buildinfo.Get()
	line := fmt.Sprintf("# HELP iwf_build_info The build of this process: its release, commit and Go version (always 1).\n"+
		"# TYPE iwf_build_info gauge\n"+
		"iwf_build_info{release=\"%s\",commit=\"%s\",goversion=\"%s\"} 1\n",
		labelValue(info.Release), labelValue(info.Commit), labelValue(info.GoVersion))
	return func(w io.Writer) error {
		if err := eng.WriteMetrics(w); err != nil {
			return err
		}
		_, err := io.WriteString(w, line)
		return err
	}
}

// labelValue escapes a Prometheus label value: a backslash, a double quote
// and a line feed.
var labelValue = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace
