//go:build unix

package sqlite

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ErrInUse is wrapped by the error Open returns when another process owns
// the database file.
var ErrInUse = errors.New("in use by another iwf-server")

// ownerLock is the exclusive lock that makes one process the owner of a
// database file: an flock on "<file>.lock", which holds the owner's pid.
// The operating system releases it when the process exits, however it
// exits, so a crashed owner never blocks its successor.
type ownerLock struct{ f *os.File }

// lockOwner takes the lock of the database at path, or fails at once,
// naming the process that holds it.
func lockOwner(path string) (*ownerLock, error) {
	name := path + ".lock"
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sqlite: lock %s: %w", name, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(name)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			pid := strings.TrimSpace(string(holder))
			if _, perr := strconv.Atoi(pid); perr != nil {
				pid = "unknown"
			}
			return nil, fmt.Errorf("sqlite: %s is %w (pid %s)", path, ErrInUse, pid)
		}
		return nil, fmt.Errorf("sqlite: lock %s: %w", name, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &ownerLock{f: f}, nil
}

// release gives the lock up. The lock file stays: removing it could let a
// second process lock a file that a third one is about to open.
func (l *ownerLock) release() {
	if l != nil && l.f != nil {
		l.f.Close()
		l.f = nil
	}
}
