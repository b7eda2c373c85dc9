-- iwf_found fails the statement, and with it the transaction, when ok is
-- not true. A write that must change exactly one row (Tx.RunUpdate,
-- Tx.ExecutionUpdate) checks its count with it, in the database: the check
-- then holds back the COMMIT sent in the same round trip, where a check
-- made by the store after reading the result would come after the COMMIT
-- had run. The store reports SQLSTATE IW002 as engine.ErrNotFound.
CREATE FUNCTION iwf_found(ok boolean, what text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF ok IS NOT TRUE THEN
        RAISE EXCEPTION '% not found', what USING ERRCODE = 'IW002';
    END IF;
    RETURN true;
END
$$;
