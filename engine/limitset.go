package engine

// Limits at run time (docs/operations.md, "A downstream asks us to slow
// down"). The concurrency and rate limits on worker calls (permits.go) in
// force are the rows of the store's limit table: listed, set, changed and
// removed through the API (ListLimits, SetLimit, DeleteLimit), audited
// there, and read by every node.
//
// The server's flags (Config.Limits) are the starting set: a start stores
// each flag's limit whose key has no row in the table, and leaves alone a
// key that has one — set through the API, stored from a flag by an earlier
// start, or removed (a removed limit keeps its row, so that a flag does not
// bring it back). So the table decides: a limit changed at run time stays
// as it was set across restarts, whatever the flags say, and a flag only
// fills a key the table never held. The start-up log says which flags were
// stored and which the table overrides (LimitsAtStart).
//
// Each node keeps the limits in force in memory (limiter.cur) and reads the
// table again: at start, after a change it made, when the store's change
// feed says another node changed it (PostgreSQL), and every LimitRefresh as
// the safety net for a lost announcement. A limit that rises (or is
// removed) wakes the calls waiting for it; one that falls lets the calls in
// flight finish, and the next calls wait.

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// LimitKind is what a limit bounds.
type LimitKind string

// The kinds of limits.
const (
	// LimitWorkerConcurrency bounds the waitUntil and execute calls in
	// flight to one worker host (HOST:PORT), across all nodes.
	LimitWorkerConcurrency LimitKind = "WORKER_CONCURRENCY"
	// LimitWorkerRate bounds the waitUntil and execute calls started per
	// second to one worker host, across all nodes.
	LimitWorkerRate LimitKind = "WORKER_RATE"
	// LimitTypeConcurrency bounds the state executions of one workflow
	// type in waitUntil or execute, across all nodes.
	LimitTypeConcurrency LimitKind = "TYPE_CONCURRENCY"
)

// LimitKinds lists the kinds of limits.
var LimitKinds = []LimitKind{LimitWorkerConcurrency, LimitWorkerRate, LimitTypeConcurrency}

// The sources of a stored limit.
const (
	// LimitSourceFlag: a start stored the limit from the server's flags.
	LimitSourceFlag = "flag"
	// LimitSourceAPI: the limit was set or removed through the API.
	LimitSourceAPI = "api"
)

// DefaultLimitRefresh is how often a node that shares its store with
// others reads the limit table when no announcement came.
const DefaultLimitRefresh = 5 * time.Second

// MaxLimits bounds the rows of the limit table, limits set or removed: a
// limit on a new key is refused beyond it.
const MaxLimits = 1000

// MaxLimitValue bounds a limit's value (calls in flight, calls per
// second).
const MaxLimitValue = 1_000_000

// LimitSetting is a row of the store's limit table.
type LimitSetting struct {
	// Key names the limit as permits, metrics and describe do:
	// "worker:HOST:PORT", "rate:HOST:PORT" or "type:TYPE".
	Key string
	// Value is the limit: calls in flight or calls per second; 0 pauses
	// the calls it applies to.
	Value float64
	// Removed: the limit was removed; its row stays so that a flag does
	// not bring it back at the next start.
	Removed bool
	// Source is LimitSourceFlag or LimitSourceAPI.
	Source string
	// UpdatedBy is the actor who set or removed it through the API (""
	// for a flag).
	UpdatedBy string
	UpdatedAt time.Time
}

// limitReadTx reads the limit table (part of ReadTx).
type limitReadTx interface {
	// LimitSettingList returns up to limit rows of the limit table,
	// removed limits too, by key.
	LimitSettingList(ctx context.Context, limit int) ([]*LimitSetting, error)
}

// limitTx writes the limit table (part of Tx).
type limitTx interface {
	// LimitSettingPut writes s over the row of its key, if any.
	LimitSettingPut(ctx context.Context, s *LimitSetting) error
	// LimitSettingSeed writes s unless its key has a row (a limit set or
	// removed), and reports whether it wrote.
	LimitSettingSeed(ctx context.Context, s *LimitSetting) (bool, error)
}

// Limit is a limit in force, as ListLimits, SetLimit and DeleteLimit
// answer.
type Limit struct {
	Kind LimitKind
	// Target is the worker host (HOST:PORT) or the workflow type.
	Target string
	// Value is the limit; 0 means the calls it applies to are paused.
	Value     float64
	Source    string
	UpdatedBy string
	UpdatedAt time.Time
}

// Key is the limit's key, as permits, metrics and describe name it.
func (l Limit) Key() string { return LimitKey(l.Kind, l.Target) }

// LimitKey returns the key of the limit of kind on target.
func LimitKey(kind LimitKind, target string) string {
	switch kind {
	case LimitWorkerConcurrency:
		return workerLimitKey(target)
	case LimitWorkerRate:
		return rateLimitKey(target)
	case LimitTypeConcurrency:
		return typeLimitKey(target)
	}
	return ""
}

// parseLimitKey is LimitKey's inverse.
func parseLimitKey(key string) (LimitKind, string, bool) {
	prefix, target, ok := strings.Cut(key, ":")
	if !ok || target == "" {
		return "", "", false
	}
	switch prefix {
	case "worker":
		return LimitWorkerConcurrency, target, true
	case "rate":
		return LimitWorkerRate, target, true
	case "type":
		return LimitTypeConcurrency, target, true
	}
	return "", "", false
}

// limitOf is the Limit of a row; false for a removed limit or a key this
// release does not know.
func limitOf(s *LimitSetting) (Limit, bool) {
	kind, target, ok := parseLimitKey(s.Key)
	if !ok || s.Removed {
		return Limit{}, false
	}
	return Limit{Kind: kind, Target: target, Value: s.Value, Source: s.Source, UpdatedBy: s.UpdatedBy, UpdatedAt: s.UpdatedAt}, true
}

// String is the limit's value as people read it: "paused" for 0.
func (l Limit) String() string {
	if l.Value == 0 {
		return "0 (paused)"
	}
	return strconv.FormatFloat(l.Value, 'g', -1, 64)
}

// limitsOf builds the limits in force from the rows of the limit table.
func limitsOf(rows []*LimitSetting) *Limits {
	out := Limits{WorkerConcurrency: map[string]int{}, WorkerRate: map[string]float64{}, TypeConcurrency: map[string]int{}}
	for _, s := range rows {
		l, ok := limitOf(s)
		if !ok {
			continue
		}
		switch l.Kind {
		case LimitWorkerConcurrency:
			out.WorkerConcurrency[l.Target] = int(l.Value)
		case LimitWorkerRate:
			out.WorkerRate[l.Target] = l.Value
		case LimitTypeConcurrency:
			out.TypeConcurrency[l.Target] = int(l.Value)
		}
	}
	return &out
}

// settings are the rows a start stores for l (the flags).
func (l Limits) settings(now time.Time) []*LimitSetting {
	var out []*LimitSetting
	add := func(key string, v float64) {
		out = append(out, &LimitSetting{Key: key, Value: v, Source: LimitSourceFlag, UpdatedAt: now})
	}
	for h, n := range l.WorkerConcurrency {
		add(workerLimitKey(h), float64(n))
	}
	for h, r := range l.WorkerRate {
		add(rateLimitKey(h), r)
	}
	for t, n := range l.TypeConcurrency {
		add(typeLimitKey(t), float64(n))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// value returns the value of key in l, and whether l has it.
func (l *Limits) value(key string) (float64, bool) {
	kind, target, ok := parseLimitKey(key)
	if !ok {
		return 0, false
	}
	switch kind {
	case LimitWorkerConcurrency:
		v, ok := l.WorkerConcurrency[target]
		return float64(v), ok
	case LimitWorkerRate:
		v, ok := l.WorkerRate[target]
		return v, ok
	default:
		v, ok := l.TypeConcurrency[target]
		return float64(v), ok
	}
}

// LimitChange asks SetLimit for a limit.
type LimitChange struct {
	Kind LimitKind
	// Target is the worker host (HOST:PORT, matched without regard to
	// case) or the workflow type.
	Target string
	// Value is calls in flight (a whole number) or calls per second; 0
	// pauses the calls the limit applies to.
	Value float64
}

// check validates c and returns its key and its target in the form
// limits are keyed by.
func (c LimitChange) check(withValue bool) (key, target string, err error) {
	target = c.Target
	switch c.Kind {
	case LimitWorkerConcurrency, LimitWorkerRate:
		target = NormalizeHostPort(target)
		if err := checkHostPort(target); err != nil {
			return "", "", Errorf(CodeInvalidArgument, "limit target %q: %v (the worker URL's host and port)", c.Target, err)
		}
	case LimitTypeConcurrency:
		if target == "" {
			return "", "", Errorf(CodeInvalidArgument, "limit target: the workflow type is empty")
		}
	default:
		return "", "", Errorf(CodeInvalidArgument, "limit kind %q: want one of %s", c.Kind, limitKindList())
	}
	if err := CheckName("target", target); err != nil {
		return "", "", err
	}
	if withValue {
		v := c.Value
		switch {
		case math.IsNaN(v) || math.IsInf(v, 0) || v < 0:
			return "", "", Errorf(CodeInvalidArgument, "limit value %g: want 0 (pause) or a positive number", v)
		case v > MaxLimitValue:
			return "", "", Errorf(CodeInvalidArgument, "limit value %g: the largest is %d", v, MaxLimitValue)
		case c.Kind != LimitWorkerRate && v != math.Trunc(v):
			return "", "", Errorf(CodeInvalidArgument, "limit value %g: a concurrency limit is a whole number of calls", v)
		}
	}
	return LimitKey(c.Kind, target), target, nil
}

func limitKindList() string {
	s := make([]string, len(LimitKinds))
	for i, k := range LimitKinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// errNoLimits answers the limit calls of an engine whose store keeps no
// permits.
var errNoLimits = Errorf(CodeUnimplemented, "this server's store keeps no limits")

// ListLimits returns the limits in force, as the store's limit table
// holds them, by kind and target.
func (e *Engine) ListLimits(ctx context.Context) ([]Limit, error) {
	if e.limiter == nil {
		return nil, errNoLimits
	}
	rows, err := e.readLimitRows(ctx)
	if err != nil {
		return nil, err
	}
	return limitList(rows), nil
}

// limitList is the limits in force of rows, by kind and target.
func limitList(rows []*LimitSetting) []Limit {
	out := []Limit{}
	for _, s := range rows {
		if l, ok := limitOf(s); ok {
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Target < out[j].Target
	})
	return out
}

func (e *Engine) readLimitRows(ctx context.Context) ([]*LimitSetting, error) {
	var rows []*LimitSetting
	err := e.storeView(ctx, func(ctx context.Context, tx ReadTx) error {
		var err error
		rows, err = tx.LimitSettingList(ctx, MaxLimits)
		return err
	})
	return rows, err
}

// SetLimit sets (or changes) a limit and returns it as stored. Every node
// applies it within seconds (this one before returning); the calls
// waiting for a limit that rose go ahead, and a limit that fell lets the
// calls in flight finish.
func (e *Engine) SetLimit(ctx context.Context, c LimitChange) (Limit, error) {
	if e.limiter == nil {
		return Limit{}, errNoLimits
	}
	key, _, err := c.check(true)
	if err != nil {
		return Limit{}, err
	}
	s := &LimitSetting{Key: key, Value: c.Value, Source: LimitSourceAPI, UpdatedBy: ActorOf(ctx), UpdatedAt: e.cfg.Clock.Now()}
	err = e.storeUpdate(ctx, func(ctx context.Context, tx Tx) error {
		rows, err := tx.LimitSettingList(ctx, MaxLimits)
		if err != nil {
			return err
		}
		if len(rows) >= MaxLimits && !hasKey(rows, key) {
			return Errorf(CodeInvalidArgument, "the store keeps at most %d limits (set or removed); set one of those instead", MaxLimits)
		}
		return tx.LimitSettingPut(ctx, s)
	})
	if err != nil {
		return Limit{}, err
	}
	e.limitsChanged(ctx)
	l, _ := limitOf(s)
	return l, nil
}

// DeleteLimit removes a limit and returns it as it was. The calls waiting
// for it go ahead, on every node within seconds (on this one before
// returning). A limit that is not set is an invalid argument.
func (e *Engine) DeleteLimit(ctx context.Context, kind LimitKind, target string) (Limit, error) {
	if e.limiter == nil {
		return Limit{}, errNoLimits
	}
	key, target, err := LimitChange{Kind: kind, Target: target}.check(false)
	if err != nil {
		return Limit{}, err
	}
	var was Limit
	s := &LimitSetting{Key: key, Removed: true, Source: LimitSourceAPI, UpdatedBy: ActorOf(ctx), UpdatedAt: e.cfg.Clock.Now()}
	err = e.storeUpdate(ctx, func(ctx context.Context, tx Tx) error {
		rows, err := tx.LimitSettingList(ctx, MaxLimits)
		if err != nil {
			return err
		}
		found := false
		for _, r := range rows {
			if r.Key == key {
				was, found = limitOf(r)
			}
		}
		if !found {
			return Errorf(CodeInvalidArgument, "no %s limit is set for %s", kind, target)
		}
		return tx.LimitSettingPut(ctx, s)
	})
	if err != nil {
		return Limit{}, err
	}
	e.limitsChanged(ctx)
	return was, nil
}

func hasKey(rows []*LimitSetting, key string) bool {
	for _, r := range rows {
		if r.Key == key {
			return true
		}
	}
	return false
}

// limitSettingsHint is the ChangeFeed key that announces a change of the
// limit table.
const limitSettingsHint = "limitsettings"

// limitsChanged applies a change this process committed to the limit
// table, and tells the other nodes.
func (e *Engine) limitsChanged(ctx context.Context) {
	if err := e.limiter.refresh(context.WithoutCancel(ctx)); err != nil {
		// The refresh loop reads the table again.
		e.log.Warn().Err(err).Msg("reading the limits after a change failed; they apply at the next read")
		e.limiter.refreshSoon()
	}
	if e.feed != nil {
		e.feed.PublishChanges(Changes{Keys: []string{limitSettingsHint}})
	}
}

// LimitsAtStart says how a start combined the flags with the stored
// limits.
type LimitsAtStart struct {
	// InForce is the limits in force after the start.
	InForce Limits
	// Stored lists the flags' limits this start stored (their keys had no
	// row).
	Stored []Limit
	// Overridden lists the flags' limits the table overrides, with the
	// stored limit (Removed: it was removed).
	Overridden []LimitOverride
}

// LimitOverride is a flag's limit that the stored limit of its key
// overrides.
type LimitOverride struct {
	Flag    Limit
	Stored  Limit
	Removed bool
}

// String says what a start did with the flags, for the start-up log: one
// line per flag's limit.
func (a LimitsAtStart) String() string {
	var lines []string
	for _, l := range a.Stored {
		lines = append(lines, fmt.Sprintf("flag %s %s=%s: stored (no stored limit had this key)", flagOf(l.Kind), l.Target, l))
	}
	for _, o := range a.Overridden {
		what := fmt.Sprintf("the stored limit %s holds", o.Stored)
		if o.Removed {
			what = "the limit was removed through the API and stays removed"
		}
		by := o.Stored.Source
		if o.Stored.UpdatedBy != "" {
			by = o.Stored.UpdatedBy
		}
		lines = append(lines, fmt.Sprintf("flag %s %s=%s: not applied: %s (%s, %s); `iwf limit set` changes it",
			flagOf(o.Flag.Kind), o.Flag.Target, o.Flag, what, by, o.Stored.UpdatedAt.UTC().Format(time.RFC3339)))
	}
	return strings.Join(lines, "\n")
}

// flagOf names the server flag of a kind of limit.
func flagOf(k LimitKind) string {
	switch k {
	case LimitWorkerConcurrency:
		return "--worker-concurrency"
	case LimitWorkerRate:
		return "--worker-rate"
	}
	return "--type-concurrency"
}

// LimitsAtStart returns what the start did with the flags' limits (zero
// before Start, or when the store keeps no limits).
func (e *Engine) LimitsAtStart() LimitsAtStart {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.limitsAtStart
}

// LimitsInForce returns the limits this node applies now.
func (e *Engine) LimitsInForce() Limits {
	if e.limiter == nil {
		return Limits{}
	}
	return *e.limiter.limits()
}

// seedAndLoad stores the flags' limits whose keys have no row, reads the
// table and puts its limits in force (Start).
func (l *limiter) seedAndLoad(ctx context.Context) (LimitsAtStart, error) {
	var at LimitsAtStart
	seed := l.seed.settings(l.e.cfg.Clock.Now())
	var err error
	if len(seed) > 0 {
		err = l.e.storeUpdate(ctx, func(ctx context.Context, tx Tx) error {
			at = LimitsAtStart{}
			rows, err := tx.LimitSettingList(ctx, MaxLimits)
			if err != nil {
				return err
			}
			byKey := map[string]*LimitSetting{}
			for _, r := range rows {
				byKey[r.Key] = r
			}
			for _, s := range seed {
				flag, _ := limitOf(s)
				if r := byKey[s.Key]; r != nil {
					stored, _ := limitOf(&LimitSetting{Key: r.Key, Value: r.Value, Source: r.Source, UpdatedBy: r.UpdatedBy, UpdatedAt: r.UpdatedAt})
					if r.Removed || r.Value != s.Value {
						at.Overridden = append(at.Overridden, LimitOverride{Flag: flag, Stored: stored, Removed: r.Removed})
					}
					continue
				}
				if len(byKey) >= MaxLimits {
					return fmt.Errorf("engine: the store keeps %d limits already; flag %s %s is not stored", MaxLimits, flagOf(flag.Kind), flag.Target)
				}
				wrote, err := tx.LimitSettingSeed(ctx, s)
				if err != nil {
					return err
				}
				if wrote {
					at.Stored = append(at.Stored, flag)
					byKey[s.Key] = s
				}
			}
			return nil
		})
	}
	if err != nil {
		return LimitsAtStart{}, fmt.Errorf("engine: storing the limits of the flags: %w", err)
	}
	if err := l.refresh(ctx); err != nil {
		return LimitsAtStart{}, fmt.Errorf("engine: reading the limits: %w", err)
	}
	at.InForce = *l.limits()
	return at, nil
}

// refreshSoon asks the refresh loop to read the limit table at once.
func (l *limiter) refreshSoon() { signal(l.refreshNow) }

// refreshLoop reads the limit table when asked (refreshSoon) and every
// Config.LimitRefresh, until ctx ends.
func (l *limiter) refreshLoop(ctx context.Context) {
	for {
		t := l.e.cfg.Clock.NewTimer(l.e.cfg.LimitRefresh)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		case <-l.refreshNow:
			t.Stop()
		}
		if err := l.refresh(ctx); err != nil && ctx.Err() == nil && !l.e.storeUnavailable(err, "reading the limits waits") {
			l.e.log.Error().Err(err).Msg("reading the limits")
		}
	}
}

// refresh reads the limit table and puts its limits in force.
func (l *limiter) refresh(ctx context.Context) error {
	l.refreshMu.Lock()
	defer l.refreshMu.Unlock()
	rows, err := l.e.readLimitRows(ctx)
	if err != nil {
		return err
	}
	l.apply(limitsOf(rows))
	return nil
}

// apply puts next in force: the calls waiting for a limit that rose go
// ahead (the first, which wakes the next while permits are free), those
// waiting for a limit removed all go ahead. Callers hold refreshMu.
func (l *limiter) apply(next *Limits) {
	prev := l.cur.Swap(next)
	var changed []string
	for _, k := range prev.keys() {
		was, _ := prev.value(k)
		now, ok := next.value(k)
		switch {
		case !ok:
			changed = append(changed, fmt.Sprintf("%s removed (was %s)", k, limitText(was)))
			l.wake(k, math.MaxInt)
		case now != was:
			changed = append(changed, fmt.Sprintf("%s %s (was %s)", k, limitText(now), limitText(was)))
			if now > was {
				l.woke(k)
			}
		}
	}
	for _, k := range next.keys() {
		if _, ok := prev.value(k); !ok {
			now, _ := next.value(k)
			changed = append(changed, fmt.Sprintf("%s %s (new)", k, limitText(now)))
		}
	}
	if len(changed) == 0 {
		return
	}
	l.e.log.Info().Strs("changes", changed).Msg("limits on worker calls changed")
	if l.e.cfg.OnLimits != nil {
		l.e.cfg.OnLimits(*next)
	}
}

// limitText is a limit's value in the log.
func limitText(v float64) string {
	if v == 0 {
		return "0 (paused)"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
