package crashtest

import (
	"os/exec"
	"syscall"
)

// setProcAttr makes the kernel kill the server when the test binary dies,
// so that no server outlives an interrupted test run.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
