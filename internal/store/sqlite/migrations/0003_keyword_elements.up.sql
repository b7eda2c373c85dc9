-- KEYWORD and KEYWORD_ARRAY are one family, as in Temporal: a KEYWORD value
-- is searched as a one-element list, so its element is kept in
-- search_attribute_strings too. Backfill the KEYWORD values written before.
INSERT INTO search_attribute_strings (run_id, key, pos, value)
SELECT run_id, key, 0, string_value
FROM search_attributes
WHERE value_type = 'KEYWORD' AND string_value IS NOT NULL
ON CONFLICT (run_id, key, pos) DO NOTHING;
