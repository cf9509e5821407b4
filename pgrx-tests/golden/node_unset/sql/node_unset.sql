-- A server with the library preloaded but pg_snowflake.node_id not set.
\set SHOW_CONTEXT never
SET timezone = 'UTC';
CREATE EXTENSION pg_snowflake;
SHOW pg_snowflake.node_id;

-- Refuses to make IDs, and says which line to add.
SELECT snowflake_nextval();
\echo :LAST_ERROR_SQLSTATE

SELECT * FROM snowflake_nextval_batch(10);
\echo :LAST_ERROR_SQLSTATE

-- Nor a watermark: it draws an ID like snowflake_nextval().
SELECT snowflake_watermark();
\echo :LAST_ERROR_SQLSTATE

-- The generator reports the node as unknown, and why it makes no IDs.
SELECT node_id, ids_issued, refusing FROM snowflake_stats();

-- Decoding needs no node id.
SELECT * FROM snowflake_decode(531934583543832577);

DROP EXTENSION pg_snowflake;
