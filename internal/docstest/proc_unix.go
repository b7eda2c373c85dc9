//go:build unix

package docstest

import (
	"os/exec"
	"syscall"
)

// setProcessGroup runs cmd in its own process group, so that the program
// `go run` starts is stopped with it.
func setProcessGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killProcessGroup kills cmd's process group.
func killProcessGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
