-- Leases are renewed and released by owner a few times a minute; the
-- partial index of leased tasks (tasks_claim_expired) bounds those scans
-- to the tasks in flight, so an index on the owner only costs every task
-- insert and delete a page written to the WAL. PostgreSQL dropped it in
-- its 0004.
DROP INDEX IF EXISTS tasks_lease_owner;
