package main

import (
	"fmt"
	"strings"
)

// reportLimits prints the limits on worker calls in force and what the
// start did with the limit flags: the store's limits decide, and a flag
// only fills a key the store never held (engine/limitset.go).
func (m *Main) reportLimits() {
	at := m.srv.Engine.LimitsAtStart()
	if sum := at.InForce.Summary(); sum != "" {
		fmt.Fprintf(m.Stdout, "limits on worker calls (waitUntil/execute, across all nodes; stored limits override the flags, `iwf limit` changes them):\n  %s\n", strings.ReplaceAll(sum, "\n", "\n  "))
	} else {
		fmt.Fprintln(m.Stdout, "limits on worker calls: none (`iwf limit set` sets one at run time)")
	}
	if s := at.String(); s != "" {
		fmt.Fprintf(m.Stdout, "limit flags:\n  %s\n", strings.ReplaceAll(s, "\n", "\n  "))
	}
}
