package storesql

// ExternalObjects are the statements of the external object records
// (engine.PayloadRef, table external_objects: migration 0013 on
// PostgreSQL, 0009 on SQLite), rendered for one dialect. A record is one
// run's claim on one object of an external store; its state is
// ObjectPending (written for a transaction that has not committed),
// ObjectKept (a run refers to it) or ObjectUnreferenced (the run was
// deleted, or the transaction never committed). Pending records have the
// run id "".
type ExternalObjects struct {
	// Add records pending objects: on a dialect with ArrayParameters $1
	// the paths, $2 the store ids (two arrays) and $3 now (ms);
	// otherwise $1 one JSON array of [path, storeId] and $2 now.
	Add string
	// Keep gives run $1 the pending objects at the paths $2 (List). On a
	// dialect that WritesInOneStatement it checks that it changed $3
	// records and otherwise fails with SQLSTATE IW003 (iwf_kept), in the
	// database, so that a blind transaction's commit does not run; on
	// the others the caller compares the count of changed rows.
	Keep string
	// Link gives run $1, kept from $3 (ms), the objects at the paths $2
	// (List) that some run keeps.
	Link string
	// Copy gives run $2, kept from $3 (ms), every object run $1 keeps.
	Copy string
	// Expire marks unreferenced at most $2 pending records made before
	// $1 (ms).
	Expire string
	// Orphans reads at most $2 objects, of the stores $1 (List), whose
	// records are all unreferenced: store_id, path.
	Orphans string
	// Forget removes the unreferenced records of the objects at the
	// paths $1 (List).
	Forget string
	// List reads the objects run $1 keeps, by path: store_id, path.
	List string
}

// The states of an external object record.
const (
	ObjectPending      = 0
	ObjectKept         = 1
	ObjectUnreferenced = 2
)

// ExternalObjectStatements returns the statements of the external
// object records for d. The queries on pending and unreferenced records
// repeat the condition of the partial index external_objects_loose
// (state <> 1) for the planner.
func ExternalObjectStatements(d Dialect) ExternalObjects {
	add := `INSERT INTO external_objects (path, run_id, store_id, created_at, state)
		SELECT value ->> 0, '', value ->> 1, $2, 0 FROM json_each($1)`
	keep := `UPDATE external_objects SET run_id = $1, state = 1
		WHERE path` + d.In(2, "text") + ` AND run_id = '' AND state = 0 AND state <> 1`
	if d.ArrayParameters() {
		add = `INSERT INTO external_objects (path, run_id, store_id, created_at, state)
		SELECT p, '', s, $3, 0 FROM unnest($1::text[], $2::text[]) AS u(p, s)`
	}
	if d.WritesInOneStatement() {
		keep = `WITH u AS (` + keep + ` RETURNING 1)
		SELECT iwf_kept((SELECT count(*) FROM u) = $3)`
	}
	r := d.Render
	return ExternalObjects{
		Add:  r(add),
		Keep: r(keep),
		Link: r(`INSERT INTO external_objects (path, run_id, store_id, created_at, state)
		SELECT DISTINCT path, CAST($1 AS text), store_id, CAST($3 AS bigint), 1 FROM external_objects WHERE path` + d.In(2, "text") + ` AND state = 1
		ON CONFLICT (path, run_id) DO NOTHING`),
		Copy: r(`INSERT INTO external_objects (path, run_id, store_id, created_at, state)
		SELECT path, CAST($2 AS text), store_id, CAST($3 AS bigint), 1 FROM external_objects WHERE run_id = $1 AND state = 1
		ON CONFLICT (path, run_id) DO NOTHING`),
		Expire: r(`UPDATE external_objects SET state = 2
		WHERE run_id = '' AND state = 0 AND path IN (
			SELECT path FROM external_objects WHERE state <> 1 AND state = 0 AND created_at < $1 AND run_id = '' LIMIT $2)`),
		Orphans: r(`SELECT DISTINCT g.store_id, g.path FROM external_objects g
		WHERE g.state <> 1 AND g.state = 2 AND g.store_id` + d.In(1, "text") + `
		AND NOT EXISTS (SELECT 1 FROM external_objects o WHERE o.path = g.path AND o.state <> 2)
		LIMIT $2`),
		Forget: r(`DELETE FROM external_objects WHERE path` + d.In(1, "text") + ` AND state <> 1 AND state = 2`),
		List:   r(`SELECT store_id, path FROM external_objects WHERE run_id = $1 AND state = 1 ORDER BY path`),
	}
}
