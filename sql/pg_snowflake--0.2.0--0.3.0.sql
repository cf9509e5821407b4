\echo Use "ALTER EXTENSION pg_snowflake UPDATE" to load this file. \quit

-- pg_snowflake 0.2.0 -> 0.3.0. pgrx-tests/tests/upgrade.rs checks that the result equals a
-- fresh CREATE EXTENSION of 0.3.0, member by member.

-- src/adopt.rs: a NULL argument is refused with an error (22004) instead of being skipped in
-- silence, so the function is no longer STRICT.
ALTER FUNCTION snowflake_adopt(regclass, text) CALLED ON NULL INPUT;
