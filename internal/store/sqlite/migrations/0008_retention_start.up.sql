-- When retention began to count on this database: the first start of a
-- server with a retention set records it (Store.RetentionStart), and a run
-- closed before it is kept as if it had closed then. A database upgraded
-- from a release without retention loses none of its old runs until a
-- whole retention after the upgrade. One row at most.
CREATE TABLE retention_start (
	id       INTEGER PRIMARY KEY CHECK (id = 1),
	since_ms INTEGER NOT NULL
);
