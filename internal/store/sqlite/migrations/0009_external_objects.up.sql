-- The objects of external stores (iWF's external storage: big payloads
-- kept out of the rows) and the runs that refer to them: one record per
-- run and object (engine.PayloadRef). state is 0 while the object is
-- written for a transaction that has not committed (run_id ''), 1 once a
-- run keeps it, 2 once unreferenced: its run was deleted, or its
-- transaction never committed. The engine's payload sweep deletes an
-- object whose records are all unreferenced, then the records.
CREATE TABLE external_objects (
    path       TEXT    NOT NULL,
    run_id     TEXT    NOT NULL,
    store_id   TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    state      INTEGER NOT NULL,
    PRIMARY KEY (path, run_id)
) WITHOUT ROWID;
CREATE INDEX external_objects_run ON external_objects (run_id);
-- The records the payload sweep looks for: pending and unreferenced.
CREATE INDEX external_objects_loose ON external_objects (state, created_at) WHERE state <> 1;

-- A run's records become unreferenced in the transaction that deletes the
-- run (retention): the objects go once no other run keeps them.
CREATE TRIGGER external_objects_run_deleted AFTER DELETE ON runs
BEGIN
    UPDATE external_objects SET state = 2 WHERE run_id = OLD.run_id AND state = 1;
END;
