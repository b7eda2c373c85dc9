-- Search (engine.ReadTx.RunSearch, SearchAttributeTypeOf).
--
-- search_attribute_types holds, per search attribute key, the value type last
-- written under it in any run; a search uses it to type an attribute that the
-- server configuration does not declare. Two triggers keep it up to date on
-- every write of search_attributes (an upsert that updates fires the UPDATE
-- trigger); they write only when the type changes. Keys written before this
-- migration get one of their types.
CREATE TABLE search_attribute_types (
    key        TEXT NOT NULL PRIMARY KEY,
    value_type TEXT NOT NULL
) WITHOUT ROWID;

INSERT INTO search_attribute_types (key, value_type)
    SELECT key, max(value_type) FROM search_attributes GROUP BY key;

CREATE TRIGGER search_attribute_types_insert AFTER INSERT ON search_attributes
    WHEN NOT EXISTS (SELECT 1 FROM search_attribute_types WHERE key = NEW.key AND value_type = NEW.value_type)
BEGIN
    INSERT INTO search_attribute_types (key, value_type) VALUES (NEW.key, NEW.value_type)
        ON CONFLICT (key) DO UPDATE SET value_type = excluded.value_type;
END;

CREATE TRIGGER search_attribute_types_update AFTER UPDATE ON search_attributes
    WHEN NOT EXISTS (SELECT 1 FROM search_attribute_types WHERE key = NEW.key AND value_type = NEW.value_type)
BEGIN
    INSERT INTO search_attribute_types (key, value_type) VALUES (NEW.key, NEW.value_type)
        ON CONFLICT (key) DO UPDATE SET value_type = excluded.value_type;
END;

-- search_attribute_words holds the words of every TEXT value (one row per
-- distinct word), which a TEXT condition (engine.SearchMatch) reads through
-- its index. A word is a maximal run of characters other than the ASCII
-- characters that are not letters, digits or '_' (NUL aside), with ASCII
-- letters in lower case: engine.SearchWords. The view splits the values;
-- triggers keep the table up to date on every write of a TEXT value.
CREATE TABLE search_attribute_words (
    run_id TEXT NOT NULL,
    key    TEXT NOT NULL,
    word   TEXT NOT NULL,
    PRIMARY KEY (run_id, key, word)
) WITHOUT ROWID;
CREATE INDEX search_attribute_words_word ON search_attribute_words (key, word);

-- The words of the TEXT values. Each separator (char(1) ... char(127)
-- without letters, digits, '_' and the space itself) becomes a space, in four
-- views of 16 replacements each: SQLite before 3.46 (such as an older sqlite3
-- shell opening this file) cannot parse much deeper nesting. Then the
-- JSON-quoted lower-case value is cut at the spaces into a JSON array; the
-- separators include '"' and '\', so every piece is a valid JSON string.

CREATE VIEW search_attribute_text_1 AS
    SELECT run_id, key, replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(string_value,
        char(1), ' '), char(2), ' '), char(3), ' '), char(4), ' '), char(5), ' '), char(6), ' '), char(7), ' '), char(8), ' '),
        char(9), ' '), char(10), ' '), char(11), ' '), char(12), ' '), char(13), ' '), char(14), ' '), char(15), ' '), char(16), ' ') AS v
    FROM search_attributes
    WHERE value_type = 'TEXT' AND string_value IS NOT NULL;

CREATE VIEW search_attribute_text_2 AS
    SELECT run_id, key, replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(v,
        char(17), ' '), char(18), ' '), char(19), ' '), char(20), ' '), char(21), ' '), char(22), ' '), char(23), ' '), char(24), ' '),
        char(25), ' '), char(26), ' '), char(27), ' '), char(28), ' '), char(29), ' '), char(30), ' '), char(31), ' '), char(33), ' ') AS v
    FROM search_attribute_text_1;

CREATE VIEW search_attribute_text_3 AS
    SELECT run_id, key, replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(v,
        char(34), ' '), char(35), ' '), char(36), ' '), char(37), ' '), char(38), ' '), char(39), ' '), char(40), ' '), char(41), ' '),
        char(42), ' '), char(43), ' '), char(44), ' '), char(45), ' '), char(46), ' '), char(47), ' '), char(58), ' '), char(59), ' ') AS v
    FROM search_attribute_text_2;

CREATE VIEW search_attribute_text_4 AS
    SELECT run_id, key, replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(v,
        char(60), ' '), char(61), ' '), char(62), ' '), char(63), ' '), char(64), ' '), char(91), ' '), char(92), ' '), char(93), ' '),
        char(94), ' '), char(96), ' '), char(123), ' '), char(124), ' '), char(125), ' '), char(126), ' '), char(127), ' ') AS v
    FROM search_attribute_text_3;

CREATE VIEW search_attribute_text_words AS
    SELECT DISTINCT t.run_id, t.key, j.value AS word
    FROM search_attribute_text_4 t, json_each('[' || replace(json_quote(lower(t.v)), ' ', '","') || ']') j
    WHERE j.value <> '';

INSERT INTO search_attribute_words (run_id, key, word)
    SELECT run_id, key, word FROM search_attribute_text_words;

CREATE TRIGGER search_attribute_words_insert AFTER INSERT ON search_attributes
    WHEN NEW.value_type = 'TEXT'
BEGIN
    INSERT INTO search_attribute_words (run_id, key, word)
        SELECT run_id, key, word FROM search_attribute_text_words WHERE run_id = NEW.run_id AND key = NEW.key;
END;

CREATE TRIGGER search_attribute_words_update AFTER UPDATE ON search_attributes
    WHEN OLD.value_type = 'TEXT' OR NEW.value_type = 'TEXT'
BEGIN
    DELETE FROM search_attribute_words WHERE run_id = OLD.run_id AND key = OLD.key;
    INSERT INTO search_attribute_words (run_id, key, word)
        SELECT run_id, key, word FROM search_attribute_text_words WHERE run_id = NEW.run_id AND key = NEW.key;
END;

CREATE TRIGGER search_attribute_words_delete AFTER DELETE ON search_attributes
    WHEN OLD.value_type = 'TEXT'
BEGIN
    DELETE FROM search_attribute_words WHERE run_id = OLD.run_id AND key = OLD.key;
END;

-- The default search order (open runs first, then close time descending,
-- then start time descending, run id as the tiebreaker), on its own and after
-- the equality filters of the run row that searches use most (the workflow
-- type, IwfWorkflowType = '...', and the status). The expression must stay
-- identical to the one internal/store/searchsql writes. The single-column
-- indexes of 0001 on workflow_type and status are prefixes of the new ones.
CREATE INDEX runs_search_order ON runs (
    (CASE WHEN closed_at = 0 THEN 9223372036854775807 ELSE closed_at END), started_at, run_id);
CREATE INDEX runs_search_type_order ON runs (
    workflow_type, (CASE WHEN closed_at = 0 THEN 9223372036854775807 ELSE closed_at END), started_at, run_id);
CREATE INDEX runs_search_status_order ON runs (
    status, (CASE WHEN closed_at = 0 THEN 9223372036854775807 ELSE closed_at END), started_at, run_id);
-- ORDER BY StartTime after the workflow type: no column of it changes after
-- the run is inserted.
CREATE INDEX runs_search_type_start ON runs (workflow_type, started_at, run_id);
DROP INDEX runs_workflow_type;
DROP INDEX runs_status;
