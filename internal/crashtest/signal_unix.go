//go:build unix

package crashtest

import "syscall"

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
