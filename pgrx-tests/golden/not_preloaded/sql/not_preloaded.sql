-- A server without pg_snowflake in shared_preload_libraries.
\set SHOW_CONTEXT never
SET timezone = 'UTC';
CREATE EXTENSION pg_snowflake;

-- No shared generator: a clear error naming the setting, never a crash.
SELECT snowflake_nextval();
\echo :LAST_ERROR_SQLSTATE
-- Still so on a second call and in a new transaction.
BEGIN;
SELECT snowflake_nextval();
ROLLBACK;

SELECT * FROM snowflake_nextval_batch(10);
\echo :LAST_ERROR_SQLSTATE

SELECT snowflake_watermark();
\echo :LAST_ERROR_SQLSTATE

-- Nor is there a generator to report on.
SELECT * FROM snowflake_stats();
\echo :LAST_ERROR_SQLSTATE

-- Decoding needs no shared memory.
SELECT * FROM snowflake_decode(531934583543832577);

DROP EXTENSION pg_snowflake;
