-- migrate: no transaction
--
-- Fewer index entries per search attribute. A search attribute row sets one
-- typed column of five; the index of each other column held an entry for
-- its NULL too: five index entries per row, written when the attribute is
-- (and vacuumed after its run is deleted), where one is read. Each index
-- now holds only the rows whose column is set. Every search that reads
-- these indexes compares the column (=, <, >, IN, ...) with a strict
-- operator or asks for IS NOT NULL, which implies the index's condition, so
-- each keeps its index (internal/store/searchsql, TestSearchPlans).
--
-- The console's list page and a search ordered by StartTime read
-- ORDER BY started_at DESC, run_id DESC. With started_at alone in the index,
-- runs that started in the same millisecond came out of it unordered and
-- the planner sorted all of them (docs/benchmarks.md, "A large store"); the
-- index read backwards now gives the page's order whole. It replaces the
-- index on started_at, its prefix.
--
-- The indexes are built and dropped CONCURRENTLY, outside a transaction
-- (the first line above): a plain DROP INDEX or CREATE INDEX holds a lock
-- that stops every write to the table (and, for DROP, every read) for as
-- long as the build takes, which on a large store is minutes. Each index
-- is built under a temporary name, the old one dropped, and the new one
-- renamed to the old name, so that searches have an index all along and
-- the schema ends as the one this migration first made in a transaction.
-- A run stopped anywhere (a crash, a cancelled build, which leaves an
-- invalid index behind) is run again from the top: the first statement of
-- each group drops what a previous run left under the temporary name.
DROP INDEX CONCURRENTLY IF EXISTS search_attributes_string_0010;
CREATE INDEX CONCURRENTLY search_attributes_string_0010 ON search_attributes (key, string_value) WHERE string_value IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS search_attributes_string;
ALTER INDEX search_attributes_string_0010 RENAME TO search_attributes_string;

DROP INDEX CONCURRENTLY IF EXISTS search_attributes_int_0010;
CREATE INDEX CONCURRENTLY search_attributes_int_0010 ON search_attributes (key, int_value) WHERE int_value IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS search_attributes_int;
ALTER INDEX search_attributes_int_0010 RENAME TO search_attributes_int;

DROP INDEX CONCURRENTLY IF EXISTS search_attributes_double_0010;
CREATE INDEX CONCURRENTLY search_attributes_double_0010 ON search_attributes (key, double_value) WHERE double_value IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS search_attributes_double;
ALTER INDEX search_attributes_double_0010 RENAME TO search_attributes_double;

DROP INDEX CONCURRENTLY IF EXISTS search_attributes_bool_0010;
CREATE INDEX CONCURRENTLY search_attributes_bool_0010 ON search_attributes (key, bool_value) WHERE bool_value IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS search_attributes_bool;
ALTER INDEX search_attributes_bool_0010 RENAME TO search_attributes_bool;

DROP INDEX CONCURRENTLY IF EXISTS search_attributes_time_0010;
CREATE INDEX CONCURRENTLY search_attributes_time_0010 ON search_attributes (key, time_value) WHERE time_value IS NOT NULL;
DROP INDEX CONCURRENTLY IF EXISTS search_attributes_time;
ALTER INDEX search_attributes_time_0010 RENAME TO search_attributes_time;

DROP INDEX CONCURRENTLY IF EXISTS runs_started_at_0010;
CREATE INDEX CONCURRENTLY runs_started_at_0010 ON runs (started_at, run_id);
DROP INDEX CONCURRENTLY IF EXISTS runs_started_at;
ALTER INDEX runs_started_at_0010 RENAME TO runs_started_at;
