//go:build !linux

package crashtest

import "os/exec"

// setProcAttr does nothing where the parent-death signal does not exist;
// the test's cleanup kills the server.
func setProcAttr(*exec.Cmd) {}
