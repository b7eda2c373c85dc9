package engine

// Retention: closed runs are deleted once they are older than their
// workflow type's retention, counted from their close time. One process at
// a time sweeps (Store.RetentionLock); a sweep lists the oldest expired
// runs and deletes them in bounded batches, each its own transaction, with
// a pause between batches so that live work goes on between them. With an
// archive configured, a run is deleted only once it is archived
// (archive.go).

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// The defaults of the retention settings.
const (
	// DefaultRetention is the retention cmd/iwf-server applies when none is
	// configured. The engine's own zero Retention keeps runs forever.
	DefaultRetention = 30 * 24 * time.Hour
	// DefaultSweepInterval is how often a process looks for expired runs.
	DefaultSweepInterval = time.Minute
	// DefaultSweepBatch is how many runs one deletion transaction takes.
	DefaultSweepBatch = 200
	// DefaultSweepPause is the pause between two batches of a sweep.
	DefaultSweepPause = 20 * time.Millisecond
	// firstSweepChunk is the size of a process's first deletion
	// transaction under Config.SweepHold, before any was timed.
	firstSweepChunk = 16
	// backlogCap bounds the count of expired runs a sweep reports.
	backlogCap = 1_000_000
)

// SweepStats is what one retention sweep did.
type SweepStats struct {
	// Skipped reports that another process held the retention lock, or
	// that no retention is set: nothing was looked at.
	Skipped bool
	// Deleted is the number of runs deleted.
	Deleted int
	// Archived is the number of runs written to the archive (Config.Archive).
	Archived int
	// ArchiveFailed is the number of runs whose archive write failed: they
	// were not deleted, and the next sweep tries them again.
	ArchiveFailed int
	// Backlog is the number of expired runs left after the sweep (at most
	// one million are counted).
	Backlog int
	// Duration is how long the sweep took.
	Duration time.Duration
}

// retentionOn reports whether any closed run can expire.
func (c Config) retentionOn() bool {
	if c.Retention > 0 {
		return true
	}
	for _, d := range c.RetentionByType {
		if d > 0 {
			return true
		}
	}
	return false
}

// retentionRule is one retention: the runs it covers (every type but
// ExceptTypes, or Types) and how long they are kept.
type retentionRule struct {
	Types, ExceptTypes []string
	Retention          time.Duration
}

// rules returns the retentions that delete: the default one for every type
// without a retention of its own, and each type's own. A zero retention
// keeps runs forever and has no rule.
func (c Config) rules() []retentionRule {
	var out []retentionRule
	types := make([]string, 0, len(c.RetentionByType))
	for t := range c.RetentionByType {
		types = append(types, t)
	}
	sort.Strings(types)
	if c.Retention > 0 {
		out = append(out, retentionRule{ExceptTypes: types, Retention: c.Retention})
	}
	for _, t := range types {
		if d := c.RetentionByType[t]; d > 0 {
			out = append(out, retentionRule{Types: []string{t}, Retention: d})
		}
	}
	return out
}

// expiries returns what expires at now: the runs of each rule closed more
// than its retention ago. A rule whose retention has not yet run since
// RetentionSince expires nothing: a run closed at c goes at
// max(c, RetentionSince) + retention.
func (c Config) expiries(now time.Time, limit int) []RunExpiry {
	var out []RunExpiry
	for _, r := range c.rules() {
		cutoff := now.Add(-r.Retention)
		if !c.RetentionSince.IsZero() && !cutoff.After(c.RetentionSince) {
			continue
		}
		out = append(out, RunExpiry{ClosedBefore: unixMs(cutoff), Types: r.Types, ExceptTypes: r.ExceptTypes, Limit: limit})
	}
	return out
}

// RetentionStep is what one retention will delete first, as seen at
// start-up (RetentionOutlook).
type RetentionStep struct {
	// Types are the workflow types the retention covers; empty with
	// ExceptTypes (possibly empty too) for the default retention.
	Types, ExceptTypes []string
	// Retention is how long the runs are kept.
	Retention time.Duration
	// At is when the first deletions are due: now, or a whole retention
	// after Config.RetentionSince.
	At time.Time
	// ClosedBefore is the close time of the runs those first deletions
	// take: every run closed before it.
	ClosedBefore time.Time
	// Runs counts those runs (at most one million are counted).
	Runs int
}

// RetentionOutlook says, for each retention, when it first deletes and
// how many of the runs stored now it deletes then, so that a server can
// say at start-up what it is about to delete (a database upgraded from a
// release without retention must not lose its old runs without a word).
func (e *Engine) RetentionOutlook(ctx context.Context) ([]RetentionStep, error) {
	now := e.cfg.Clock.Now()
	var out []RetentionStep
	for _, r := range e.cfg.rules() {
		st := RetentionStep{Types: r.Types, ExceptTypes: r.ExceptTypes, Retention: r.Retention, At: now, ClosedBefore: now.Add(-r.Retention)}
		if since := e.cfg.RetentionSince; !since.IsZero() && !st.ClosedBefore.After(since) {
			st.At, st.ClosedBefore = since.Add(r.Retention), since
		}
		n, err := e.store.RunsExpiredCount(ctx, RunExpiry{ClosedBefore: unixMs(st.ClosedBefore), Types: r.Types, ExceptTypes: r.ExceptTypes, Limit: backlogCap})
		if err != nil {
			return nil, err
		}
		st.Runs = n
		out = append(out, st)
	}
	return out, nil
}

// RetentionSummary describes the effective retention in one line, for the
// start-up log: "30d", "forever", "30d (Order=7d, Audit=forever)".
func (c Config) RetentionSummary() string {
	name := func(d time.Duration) string {
		switch {
		case d <= 0:
			return "forever"
		case d%(24*time.Hour) == 0:
			return fmt.Sprintf("%dd", d/(24*time.Hour))
		}
		return d.String()
	}
	s := name(c.Retention)
	if len(c.RetentionByType) == 0 {
		return s
	}
	types := make([]string, 0, len(c.RetentionByType))
	for t, d := range c.RetentionByType {
		types = append(types, t+"="+name(d))
	}
	sort.Strings(types)
	return s + " (" + strings.Join(types, ", ") + ")"
}

// sweeper runs retention sweeps every SweepInterval until ctx ends.
func (e *Engine) sweeper(ctx context.Context) {
	for {
		t := e.cfg.Clock.NewTimer(e.cfg.SweepInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		if _, err := e.Sweep(ctx); err != nil && ctx.Err() == nil && !e.storeUnavailable(err, "retention sweep waits") {
			e.log.Error().Err(err).Msg("retention sweep failed")
		}
	}
}

// Sweep deletes the closed runs that have outlived their retention, now,
// unless another process is sweeping: in batches of SweepBatch runs, each
// deleted whole in its own transaction, with SweepPause between batches.
// Running runs are never deleted. With Config.Archive set, each run of a
// batch is first written to the archive and only the runs written are
// deleted: a run whose write failed is kept, counted
// (iwf_retention_archive_failures_total), logged at warn, and written again
// at the next sweep, which takes it up first. It logs one line and updates
// the retention metrics. The engine sweeps by itself every SweepInterval;
// tests and tools call Sweep to sweep at once.
func (e *Engine) Sweep(ctx context.Context) (SweepStats, error) {
	var st SweepStats
	start := time.Now()
	now := e.cfg.Clock.Now()
	expiries := e.cfg.expiries(now, e.cfg.SweepBatch)
	if len(expiries) == 0 {
		st.Skipped = true
		return st, nil
	}
	release, ok, err := e.store.RetentionLock(ctx)
	if err != nil {
		return st, err
	}
	if !ok {
		st.Skipped = true
		e.log.Debug().Msg("retention sweep skipped: another process is sweeping")
		return st, nil
	}
	defer release()
	err = e.sweep(ctx, expiries, &st)
	if err == nil {
		for _, x := range expiries {
			x.Limit = backlogCap - st.Backlog
			if x.Limit <= 0 {
				break
			}
			n, cerr := e.store.RunsExpiredCount(ctx, x)
			if cerr != nil {
				err = cerr
				break
			}
			st.Backlog += n
		}
	}
	st.Duration = time.Since(start)
	e.metrics.sweepSeconds.observe(st.Duration)
	if err == nil {
		e.metrics.retentionBacklog.Store(int64(st.Backlog))
	}
	ev := e.log.Info()
	if err != nil {
		ev = e.log.Warn().Err(err)
	}
	if e.cfg.Archive != nil {
		ev = ev.Int("archived", st.Archived).Int("archiveFailed", st.ArchiveFailed)
		if st.ArchiveFailed > 0 && err == nil {
			ev = e.log.Warn().Int("archived", st.Archived).Int("archiveFailed", st.ArchiveFailed)
		}
	}
	ev.Int("deleted", st.Deleted).Int("backlog", st.Backlog).Dur("duration", st.Duration).
		Str("retention", e.cfg.RetentionSummary()).Msg("retention sweep")
	return st, err
}

// sweep deletes the runs each expiry selects, a batch at a time.
func (e *Engine) sweep(ctx context.Context, expiries []RunExpiry, st *SweepStats) error {
	for _, x := range expiries {
		for {
			listed := time.Now()
			ids, err := e.store.RunsExpired(ctx, x)
			if err != nil {
				return err
			}
			busy := time.Since(listed)
			if len(ids) == 0 {
				break
			}
			full := len(ids) == x.Limit
			if e.cfg.Archive != nil {
				// Only the runs written to the archive are deleted. Those
				// whose write failed would come back first in the next
				// batch: leave them, and this expiry's rest, to the next
				// sweep.
				failed := st.ArchiveFailed
				ids = e.archiveRuns(ctx, ids, st)
				if err := ctx.Err(); err != nil {
					return err
				}
				full = full && st.ArchiveFailed == failed
				if len(ids) == 0 {
					break
				}
			}
			n, held, err := e.deleteBatch(ctx, ids, busy)
			st.Deleted += n
			if err != nil {
				return err
			}
			busy = held
			// A short batch was the last; a batch of runs that other
			// transactions held would come back at once: leave those to
			// the next sweep.
			if !full || n == 0 {
				break
			}
			t := e.cfg.Clock.NewTimer(e.cfg.sweepPause(busy))
			select {
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			case <-t.C():
			}
		}
	}
	return nil
}

// deleteBatch deletes the runs of one batch: in one transaction, or, on a
// store with one writer and SweepHold set, in transactions sized to hold
// the writer about SweepHold each, with the SweepShare pause after each but
// the last. It returns the runs deleted and the store time of the last
// transaction (listed: the batch's listing time, counted with the first),
// which the pause after the batch answers for.
func (e *Engine) deleteBatch(ctx context.Context, ids []string, listed time.Duration) (int, time.Duration, error) {
	timer, timed := e.store.(RunsDeleteTimer)
	if !timed || e.cfg.SweepHold <= 0 {
		deleting := time.Now()
		n, err := e.store.RunsDelete(ctx, ids)
		e.metrics.runsDeleted.add(int64(n))
		return n, listed + time.Since(deleting), err
	}
	deleted, busy := 0, listed
	for len(ids) > 0 {
		chunk := int(e.sweepChunk.Load())
		if chunk <= 0 {
			chunk = min(firstSweepChunk, e.cfg.SweepBatch)
		}
		part := ids[:min(chunk, len(ids))]
		ids = ids[len(part):]
		n, held, err := timer.RunsDeleteTimed(ctx, part)
		deleted += n
		e.metrics.runsDeleted.add(int64(n))
		if err != nil {
			return deleted, busy, err
		}
		busy += held
		e.sweepChunk.Store(int64(e.cfg.sweepChunk(len(part), held)))
		if len(ids) == 0 {
			break
		}
		t := e.cfg.Clock.NewTimer(e.cfg.sharePause(busy))
		select {
		case <-ctx.Done():
			t.Stop()
			return deleted, busy, ctx.Err()
		case <-t.C():
		}
		busy = 0
	}
	return deleted, busy, nil
}

// sweepChunk is the number of runs the next deletion transaction takes,
// after one of n runs held the writer for held: as many as SweepHold
// allows at the same cost per run, between 1 and SweepBatch.
func (c *Config) sweepChunk(n int, held time.Duration) int {
	if held <= 0 {
		return c.SweepBatch
	}
	k := int(int64(c.SweepHold) * int64(n) / int64(held))
	return max(1, min(k, c.SweepBatch))
}

// sharePause is the pause after store work that took busy that keeps the
// sweep's share of the store's time at SweepShare (0 without a share).
func (c *Config) sharePause(busy time.Duration) time.Duration {
	if c.SweepShare > 0 && c.SweepShare < 1 {
		return time.Duration(float64(busy) * (1 - c.SweepShare) / c.SweepShare)
	}
	return 0
}

// sweepPause is the pause after a batch whose store work (listing and
// deleting, not archiving) took busy: SweepPause, or longer so that the
// sweep keeps the store busy at most SweepShare of the time.
func (c *Config) sweepPause(busy time.Duration) time.Duration {
	return max(c.SweepPause, c.sharePause(busy))
}

// validateRetention checks the retention settings and fills in the
// defaults of the sweep's.
func (c *Config) validateRetention() error {
	if c.Retention < 0 {
		return fmt.Errorf("engine: Retention must not be negative, got %s", c.Retention)
	}
	for t, d := range c.RetentionByType {
		if t == "" {
			return errors.New("engine: RetentionByType has an empty workflow type")
		}
		if d < 0 {
			return fmt.Errorf("engine: the retention of %s must not be negative, got %s", t, d)
		}
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = DefaultSweepInterval
	}
	if c.SweepBatch == 0 {
		c.SweepBatch = DefaultSweepBatch
	}
	if c.SweepPause == 0 {
		c.SweepPause = DefaultSweepPause
	}
	if c.SweepInterval < 0 || c.SweepBatch < 0 || c.SweepPause < 0 || c.SweepHold < 0 {
		return errors.New("engine: SweepInterval, SweepBatch, SweepPause and SweepHold must be positive")
	}
	if c.SweepShare < 0 || c.SweepShare > 1 {
		return fmt.Errorf("engine: SweepShare must be between 0 and 1, got %g", c.SweepShare)
	}
	return nil
}
