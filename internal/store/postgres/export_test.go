package postgres

// FlushChanges waits until the change announcements s published so far
// were sent (or given up), so that a test can order them.
func FlushChanges(s *Store) { s.feed.flush() }

// ChannelName is the notification channel of s's change feed.
func ChannelName(s *Store) string { return s.feed.channel }
