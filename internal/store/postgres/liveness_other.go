//go:build !linux

package postgres

import (
	"syscall"
	"time"
)

// userTimeoutControl does nothing where TCP_USER_TIMEOUT does not exist;
// TCP keepalive and the liveness probe still apply.
func userTimeoutControl(time.Duration) func(network, address string, c syscall.RawConn) error {
	return nil
}
