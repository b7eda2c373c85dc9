package storesql

import (
	"github.com/iwf-server/iwf-server/engine"
	"github.com/iwf-server/iwf-server/internal/store/rowfmt"
)

// Permits are the statements of engine.PermitStore on the tables
// limit_permits and limit_buckets, rendered for one dialect.
//
// An acquisition (engine.PermitStore.PermitAcquire) runs in one
// transaction: Lock, Expire, Queue and Count, in this order, read what
// the rule needs; PermitDecision applies the rule (engine.PermitRequest's
// Decide) to what they found and returns the writes to make. Lock takes
// the row lock of the key's bucket, which serialises the acquisitions of
// the key across nodes; every statement after it reads the key's rows as
// they are once it is held (each is a statement of its own, READ
// COMMITTED on PostgreSQL). None of the reads depends on an earlier one's
// answer, so a store may send the four at once.
type Permits struct {
	// Lock creates the key's bucket row unless there is one, locks it and
	// returns its tokens and updated_at: $1 key, $2 initial tokens (the
	// burst), $3 now (ms).
	Lock string
	// Expire deletes the key's expired rows but the waiter's own: $1 key,
	// $2 now, $3 waiter.
	Expire string
	// Queue records the waiter in the key's queue when absent, keeping
	// its first waiting_since, and returns waiting_since and whether it
	// holds the permit still; no row when another owner's live row of the
	// waiter is there (it is left alone): $1 key, $2 waiter, $3 owner, $4
	// now, $5 waiting since, $6 lease (ms).
	Queue string
	// Count returns the held permits of the key and the waiters queued
	// ahead of the waiter (by waiting_since, then waiter), among the
	// key's live rows but the waiter's: $1 key, $2 waiter, $3 now.
	Count string
	// Hold marks the waiter's permit held: $1 key, $2 waiter.
	Hold string
	// Leave deletes the waiter's row (a rate token consumed): $1 key, $2
	// waiter.
	Leave string
	// Refill stores the key's bucket: $1 key, $2 tokens, $3 updated_at.
	Refill string

	// Renew extends owner $1's live rows of waiters $2 (List) to $3 now
	// + $4 lease (ms); returns waiter and held of each.
	Renew string
	// Release deletes owner $1's rows of waiters $2 (List; NULL: all of
	// owner's); returns the limit_key of each.
	Release string
	// ReleaseOthers deletes the rows not owned by $1.
	ReleaseOthers string
	// Waiting returns waiter, limit_key and waiting_since of the rows of
	// waiters $1 (List) that wait, by waiter and key.
	Waiting string
}

// PermitStatements returns the statements of the permits for d.
func PermitStatements(d Dialect) Permits {
	r := d.Render
	return Permits{
		Lock: r(`INSERT INTO limit_buckets (limit_key, tokens, updated_at) VALUES ($1, $2, $3)
			ON CONFLICT (limit_key) DO UPDATE SET limit_key = excluded.limit_key
			RETURNING tokens, updated_at`),
		Expire: r(`DELETE FROM limit_permits WHERE limit_key = $1 AND expires_at <= $2 AND waiter <> $3`),
		Queue: r(`INSERT INTO limit_permits AS p (limit_key, waiter, owner, waiting_since, held, expires_at)
			VALUES ($1, $2, $3, $5, false, CAST($4 AS bigint) + CAST($6 AS bigint))
			ON CONFLICT (limit_key, waiter) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at,
				held = p.held AND p.owner = excluded.owner AND p.expires_at > $4
				WHERE p.owner = excluded.owner OR p.expires_at <= $4
			RETURNING waiting_since, held`),
		Count: r(`SELECT count(CASE WHEN q.held THEN 1 END),
				count(CASE WHEN NOT q.held AND (q.waiting_since < m.waiting_since
					OR (q.waiting_since = m.waiting_since AND q.waiter < $2)) THEN 1 END)
			FROM limit_permits q, (SELECT waiting_since FROM limit_permits WHERE limit_key = $1 AND waiter = $2) m
			WHERE q.limit_key = $1 AND q.waiter <> $2 AND q.expires_at > $3`),
		Hold:   r(`UPDATE limit_permits SET held = true WHERE limit_key = $1 AND waiter = $2`),
		Leave:  r(`DELETE FROM limit_permits WHERE limit_key = $1 AND waiter = $2`),
		Refill: r(`UPDATE limit_buckets SET tokens = $2, updated_at = $3 WHERE limit_key = $1`),

		Renew: r(`UPDATE limit_permits SET expires_at = CAST($3 AS bigint) + CAST($4 AS bigint)
			WHERE owner = $1 AND waiter` + d.In(2, "bigint") + ` AND expires_at > $3
			RETURNING waiter, held`),
		Release:       r(`DELETE FROM limit_permits WHERE owner = $1 AND ` + d.NullOrIn("waiter", 2, "bigint") + ` RETURNING limit_key`),
		ReleaseOthers: r(`DELETE FROM limit_permits WHERE owner <> $1`),
		Waiting: r(`SELECT waiter, limit_key, waiting_since FROM limit_permits
			WHERE waiter` + d.In(1, "bigint") + ` AND NOT held ORDER BY waiter, limit_key`),
	}
}

// The arguments of the acquisition's reads, in the order of their
// parameters.

// LockArgs are Lock's arguments.
func (Permits) LockArgs(r engine.PermitRequest) []any {
	return []any{r.Key, max(r.Burst, 1), rowfmt.ToMs(r.Now)}
}

// ExpireArgs are Expire's arguments.
func (Permits) ExpireArgs(r engine.PermitRequest) []any {
	return []any{r.Key, rowfmt.ToMs(r.Now), r.Waiter}
}

// QueueArgs are Queue's arguments.
func (Permits) QueueArgs(r engine.PermitRequest) []any {
	return []any{r.Key, r.Waiter, r.Owner, rowfmt.ToMs(r.Now), rowfmt.ToMs(r.WaitingSince), r.LeaseDuration.Milliseconds()}
}

// CountArgs are Count's arguments.
func (Permits) CountArgs(r engine.PermitRequest) []any {
	return []any{r.Key, r.Waiter, rowfmt.ToMs(r.Now)}
}

// PermitFound is what an acquisition's reads found.
type PermitFound struct {
	// Tokens and Updated (ms) are the key's bucket as Lock returned it.
	Tokens  float64
	Updated int64
	// Queued: Queue returned a row (the waiter's row is its own); Held:
	// that row holds the permit already.
	Queued, Held bool
	// HeldCount and Ahead are Count's answer.
	HeldCount, Ahead int
}

// Write is a statement to execute and its arguments.
type Write struct {
	SQL  string
	Args []any
}

// PermitDecision returns the answer of an acquisition, from what its reads
// found, and the writes that make it so, to run in the same transaction
// in order. A waiter whose row another owner holds waits (its permit is
// never counted twice); one that holds its permit has it; the others get
// engine.PermitRequest.Decide's answer.
func (p Permits) PermitDecision(r engine.PermitRequest, f PermitFound) (engine.PermitGrant, []Write) {
	switch {
	case !f.Queued:
		return engine.PermitGrant{}, nil
	case f.Held:
		return engine.PermitGrant{Granted: true}, nil
	}
	g, tokens, updated := r.Decide(f.HeldCount, f.Ahead, f.Tokens, rowfmt.FromMs(f.Updated))
	var w []Write
	if r.Concurrency > 0 {
		if g.Granted {
			w = append(w, Write{p.Hold, []any{r.Key, r.Waiter}})
		}
		return g, w
	}
	if g.Granted {
		w = append(w, Write{p.Leave, []any{r.Key, r.Waiter}})
	}
	if ms := rowfmt.ToMs(updated); tokens != f.Tokens || ms != f.Updated {
		w = append(w, Write{p.Refill, []any{r.Key, tokens, ms}})
	}
	return g, w
}
