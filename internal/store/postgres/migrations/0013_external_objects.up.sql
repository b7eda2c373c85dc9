-- The objects of external stores (iWF's external storage: big payloads
-- kept out of the rows) and the runs that refer to them: one record per
-- run and object (engine.PayloadRef). state is 0 while the object is
-- written for a transaction that has not committed (run_id ''), 1 once a
-- run keeps it, 2 once unreferenced: its run was deleted, or its
-- transaction never committed. The engine's payload sweep deletes an
-- object whose records are all unreferenced, then the records.
CREATE TABLE external_objects (
    path       TEXT COLLATE "C" NOT NULL,
    run_id     TEXT COLLATE "C" NOT NULL,
    store_id   TEXT COLLATE "C" NOT NULL,
    created_at BIGINT           NOT NULL,
    state      SMALLINT         NOT NULL,
    PRIMARY KEY (path, run_id)
);
CREATE INDEX external_objects_run ON external_objects (run_id);
-- The records the payload sweep looks for: pending and unreferenced.
CREATE INDEX external_objects_loose ON external_objects (state, created_at) WHERE state <> 1;

-- A run's records become unreferenced in the statement that deletes the
-- run (retention): the objects go once no other run keeps them. One
-- UPDATE per deleting statement, over the runs it deleted.
CREATE FUNCTION external_objects_runs_deleted() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE external_objects SET state = 2
        WHERE run_id IN (SELECT run_id FROM deleted_runs) AND state = 1;
    RETURN NULL;
END
$$;
CREATE TRIGGER external_objects_runs_deleted AFTER DELETE ON runs
    REFERENCING OLD TABLE AS deleted_runs
    FOR EACH STATEMENT EXECUTE FUNCTION external_objects_runs_deleted();

-- iwf_kept fails the statement, and with it the transaction, when ok is
-- not true: a transaction that stores references to external objects
-- checks with it, in the database, that the payload sweep has not given
-- them up (Tx.PayloadKeep). The store reports SQLSTATE IW003 as
-- engine.ErrPayloadGone.
CREATE FUNCTION iwf_kept(ok boolean) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF ok IS NOT TRUE THEN
        RAISE EXCEPTION 'external objects were swept before their transaction committed' USING ERRCODE = 'IW003';
    END IF;
    RETURN true;
END
$$;
