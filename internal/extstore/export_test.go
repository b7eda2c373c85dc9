package extstore

import "time"

// SetOperationTimeout replaces OperationTimeout for s, for tests that
// cannot wait a minute.
func SetOperationTimeout(s *Store, d time.Duration) { s.opTimeout = d }
