-- Fewer index entries per search attribute. A search attribute row sets one
-- typed column of five; the index of each other column held an entry for
-- its NULL too: five index entries per row, written when the attribute is
-- (and vacuumed after its run is deleted), where one is read. Each index
-- now holds only the rows whose column is set. Every search that reads
-- these indexes compares the column (=, <, >, IN, ...) with a strict
-- operator or asks for IS NOT NULL, which implies the index's condition, so
-- each keeps its index (internal/store/searchsql, TestSearchPlans).
DROP INDEX search_attributes_string;
DROP INDEX search_attributes_int;
DROP INDEX search_attributes_double;
DROP INDEX search_attributes_bool;
DROP INDEX search_attributes_time;
CREATE INDEX search_attributes_string ON search_attributes (key, string_value) WHERE string_value IS NOT NULL;
CREATE INDEX search_attributes_int ON search_attributes (key, int_value) WHERE int_value IS NOT NULL;
CREATE INDEX search_attributes_double ON search_attributes (key, double_value) WHERE double_value IS NOT NULL;
CREATE INDEX search_attributes_bool ON search_attributes (key, bool_value) WHERE bool_value IS NOT NULL;
CREATE INDEX search_attributes_time ON search_attributes (key, time_value) WHERE time_value IS NOT NULL;

-- The console's list page and a search ordered by StartTime read
-- ORDER BY started_at DESC, run_id DESC. With started_at alone in the index,
-- runs that started in the same millisecond came out of it unordered and
-- the planner sorted all of them (docs/benchmarks.md, "A large store"); the
-- index read backwards now gives the page's order whole. It replaces the
-- index on started_at, its prefix.
DROP INDEX runs_started_at;
CREATE INDEX runs_started_at ON runs (started_at, run_id);
