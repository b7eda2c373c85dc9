//go:build unix

package crashtest

import (
	"syscall"
	"time"
)

// Pause stops the process with SIGSTOP: it keeps its connections and
// leases but does nothing (and renews nothing) until Resume, like a node
// that hangs or is cut off from the network.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused process with SIGCONT.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd == nil {
		s.t.Fatalf("%s: not running", s.opts.Name)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("%s: %s: %v", s.opts.Name, sig, err)
	}
}

// Terminate sends SIGTERM, as a deploy does, and waits until the process
// has exited by itself; it fails the test when that takes longer than
// timeout. It returns the process's end ("exit status 0" for a clean
// exit).
func (s *Server) Terminate(timeout time.Duration) string {
	s.t.Helper()
	s.mu.Lock()
	cmd, exited, log := s.cmd, s.exited, s.log
	s.mu.Unlock()
	if cmd == nil {
		s.t.Fatalf("%s: not running", s.opts.Name)
	}
	log.mu.Lock()
	log.killed = true // an expected end
	log.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		s.t.Fatalf("%s: SIGTERM: %v", s.opts.Name, err)
	}
	select {
	case <-exited:
	case <-time.After(timeout):
		s.t.Fatalf("%s did not exit within %s of SIGTERM", s.opts.Name, timeout)
	}
	s.mu.Lock()
	s.cmd = nil
	s.mu.Unlock()
	log.mu.Lock()
	defer log.mu.Unlock()
	return log.ended
}
