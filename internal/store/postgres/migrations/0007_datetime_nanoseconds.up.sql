-- DATETIME search attributes keep nanoseconds, as iWF does: time_value
-- holds unix nanoseconds from now on (unix milliseconds before). Values
-- beyond what nanoseconds in a BIGINT can hold (before 1677-09-21 or after
-- 2262-04-11) become the nearest bound; the engine refuses new ones.
UPDATE search_attributes SET time_value = CASE
        WHEN time_value > 9223372036854 THEN 9223372036854775807
        WHEN time_value < -9223372036854 THEN -9223372036854775808
        ELSE time_value * 1000000
    END
WHERE time_value IS NOT NULL;
