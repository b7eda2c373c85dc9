-- A SIGNAL batch keeps its value's external object while it may still
-- signal a run: its record in external_objects has the owner
-- 'batch:' || batch_id (engine.BatchPayloadOwner) in run_id, and each
-- run the batch signals gets a record of its own. When the batch closes
-- (completed or cancelled), in the statement that closes it, the
-- batch's record becomes unreferenced: the object goes once no run keeps
-- it. Batch rows are never deleted. A row trigger whose condition leaves
-- every update but a batch's closing alone (a claim that gives up
-- abandoned starts closes several in one statement).
CREATE FUNCTION external_objects_batch_closed() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    UPDATE external_objects SET state = 2
        WHERE run_id = 'batch:' || NEW.batch_id AND state = 1;
    RETURN NULL;
END
$$;
CREATE TRIGGER external_objects_batch_closed AFTER UPDATE OF state ON batches
    FOR EACH ROW
    WHEN (NEW.state IN ('completed', 'cancelled') AND OLD.state NOT IN ('completed', 'cancelled'))
    EXECUTE FUNCTION external_objects_batch_closed();
