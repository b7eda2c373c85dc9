-- iwf_expect fails the statement, and with it the transaction, when ok is
-- not true. A transaction that applies a worker's answer without reading
-- its run first (engine.TaskTakeExpecter) checks with it that the run, the
-- task and the execution are still as they were read before the call; the
-- store reports SQLSTATE IW001 as engine.ErrUnexpected.
CREATE FUNCTION iwf_expect(ok boolean, what text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF ok IS NOT TRUE THEN
        RAISE EXCEPTION '% changed since it was read', what USING ERRCODE = 'IW001';
    END IF;
    RETURN true;
END
$$;
