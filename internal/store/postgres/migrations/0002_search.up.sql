-- Search (engine.ReadTx.RunSearch, SearchAttributeTypeOf).
--
-- search_attribute_types holds, per search attribute key, the value type last
-- written under it in any run; a search uses it to type an attribute that the
-- server configuration does not declare. A trigger keeps it up to date on
-- every write of search_attributes. It first looks without locking, and
-- writes (locking the key's row) only when the type changes, so that
-- concurrent writers of one key do not queue on that row. Keys written before
-- this migration get one of their types.
CREATE TABLE search_attribute_types (
    key        TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    value_type TEXT COLLATE "C" NOT NULL
);

INSERT INTO search_attribute_types (key, value_type)
    SELECT key, max(value_type) FROM search_attributes GROUP BY key;

-- search_path is pinned to the one of the migration (the store's schema).
CREATE FUNCTION search_attribute_types_track() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM search_attribute_types WHERE key = NEW.key AND value_type = NEW.value_type) THEN
        INSERT INTO search_attribute_types (key, value_type) VALUES (NEW.key, NEW.value_type)
            ON CONFLICT (key) DO UPDATE SET value_type = EXCLUDED.value_type;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER search_attribute_types_track AFTER INSERT OR UPDATE ON search_attributes
    FOR EACH ROW EXECUTE FUNCTION search_attribute_types_track();

-- search_attribute_words holds the words of every TEXT value (one row per
-- distinct word), which a TEXT condition (engine.SearchMatch) reads through
-- its index. A word is a maximal run of characters other than the ASCII
-- characters that are not letters, digits or '_', with ASCII letters in
-- lower case (lower under the "C" collation folds ASCII only):
-- engine.SearchWords. A trigger keeps the table up to date on every write
-- of a TEXT value.
CREATE TABLE search_attribute_words (
    run_id TEXT COLLATE "C" NOT NULL,
    key    TEXT COLLATE "C" NOT NULL,
    word   TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (run_id, key, word)
);
CREATE INDEX search_attribute_words_word ON search_attribute_words (key, word, run_id);

-- The separators (\x01 ... \x7f without letters, digits, '_' and the space)
-- become spaces; the value is cut at the spaces.
CREATE FUNCTION search_attribute_words_of(value text) RETURNS SETOF text
    LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT DISTINCT w FROM unnest(string_to_array(lower(translate(value,
        E'\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f\x21\x22\x23\x24\x25\x26\x27\x28\x29\x2a\x2b\x2c\x2d\x2e\x2f\x3a\x3b\x3c\x3d\x3e\x3f\x40\x5b\x5c\x5d\x5e\x60\x7b\x7c\x7d\x7e\x7f',
        '                                                               ') COLLATE "C"), ' ')) AS w
    WHERE w <> ''
$$;

INSERT INTO search_attribute_words (run_id, key, word)
    SELECT s.run_id, s.key, w FROM search_attributes s, search_attribute_words_of(s.string_value) AS w
    WHERE s.value_type = 'TEXT';

CREATE FUNCTION search_attribute_words_track() RETURNS trigger
    LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        DELETE FROM search_attribute_words WHERE run_id = OLD.run_id AND key = OLD.key;
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.value_type = 'TEXT' THEN
        INSERT INTO search_attribute_words (run_id, key, word)
            SELECT NEW.run_id, NEW.key, w FROM search_attribute_words_of(NEW.string_value) AS w;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER search_attribute_words_insert AFTER INSERT ON search_attributes
    FOR EACH ROW WHEN (NEW.value_type = 'TEXT') EXECUTE FUNCTION search_attribute_words_track();
CREATE TRIGGER search_attribute_words_update AFTER UPDATE ON search_attributes
    FOR EACH ROW WHEN (OLD.value_type = 'TEXT' OR NEW.value_type = 'TEXT') EXECUTE FUNCTION search_attribute_words_track();
CREATE TRIGGER search_attribute_words_delete AFTER DELETE ON search_attributes
    FOR EACH ROW WHEN (OLD.value_type = 'TEXT') EXECUTE FUNCTION search_attribute_words_track();

-- A value column holds values of one attribute key mostly, so the planner's
-- assumption that key and value are independent underestimates conditions
-- such as key = 'IwfExecutingStateIds' AND value = 'S2' many times over and
-- picks plans that sort thousands of runs. Multi-column statistics (most
-- common value pairs) give it the real frequencies.
CREATE STATISTICS search_attribute_strings_key_value (mcv) ON key, value FROM search_attribute_strings;
CREATE STATISTICS search_attribute_words_key_word (mcv) ON key, word FROM search_attribute_words;
CREATE STATISTICS search_attributes_key_string (mcv) ON key, string_value FROM search_attributes;
CREATE STATISTICS search_attributes_key_bool (mcv) ON key, bool_value FROM search_attributes;

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
