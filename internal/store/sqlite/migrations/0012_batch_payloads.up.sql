-- A SIGNAL batch keeps its value's external object while it may still
-- signal a run: its record in external_objects has the owner
-- 'batch:' || batch_id (engine.BatchPayloadOwner) in run_id, and each
-- run the batch signals gets a record of its own. When the batch closes
-- (completed or cancelled), in the statement that closes it, the
-- batch's record becomes unreferenced: the object goes once no run keeps
-- it. Batch rows are never deleted.
CREATE TRIGGER external_objects_batch_closed AFTER UPDATE OF state ON batches
WHEN NEW.state IN ('completed', 'cancelled') AND OLD.state NOT IN ('completed', 'cancelled')
BEGIN
    UPDATE external_objects SET state = 2 WHERE run_id = 'batch:' || NEW.batch_id AND state = 1;
END;
