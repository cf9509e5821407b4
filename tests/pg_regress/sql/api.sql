-- pg_snowflake's user-visible behaviour on a server with the library preloaded and
-- pg_snowflake.node_id = 1. Every error shows its message, hint and SQLSTATE.
\set SHOW_CONTEXT never
SET timezone = 'UTC';
CREATE EXTENSION pg_snowflake;

-- The functions, as \df+ users see them: volatility, strictness, parallel safety, comment.
SELECT p.proname, pg_get_function_arguments(p.oid) AS arguments,
       pg_get_function_result(p.oid) AS result,
       p.provolatile AS vol, p.proisstrict AS strict, p.proparallel AS par
FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'pg_snowflake'
ORDER BY 1;
SELECT p.proname, obj_description(p.oid, 'pg_proc') AS comment
FROM pg_proc p WHERE p.proname LIKE 'snowflake\_%' ORDER BY 1;

-- The node id is the one in postgresql.conf, and IDs carry it.
SHOW pg_snowflake.node_id;
SELECT snowflake_node_id(snowflake_nextval()) AS node;
SELECT snowflake_nextval() > 0 AS positive;

-- Decoding, by the documented arithmetic: ts = 2024-01-01 + (id >> 22) ms,
-- node = (id >> 12) & 1023, seq = id & 4095.
SELECT v.id, d.* FROM (VALUES
    (0::bigint),
    ((1::bigint << 22) | (7 << 12) | 9),
    (531934583543832577),
    (9223372036854775807)
) v(id), snowflake_decode(v.id) d;
SELECT snowflake_timestamp(531934583543832577), snowflake_node_id(531934583543832577),
       snowflake_seq(531934583543832577);

-- NULL in, NULL out.
SELECT snowflake_decode(NULL) IS NULL AS decode_null, snowflake_timestamp(NULL) IS NULL AS ts_null,
       snowflake_node_id(NULL) IS NULL AS node_null, snowflake_seq(NULL) IS NULL AS seq_null;

-- Negative IDs are refused by every decoder.
SELECT snowflake_decode(-1);
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_timestamp(-9223372036854775808);
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_node_id(-42);
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_seq(-1);
\echo :LAST_ERROR_SQLSTATE

-- The node id cannot be changed in a running server, by anyone.
SET pg_snowflake.node_id = 2;
\echo :LAST_ERROR_SQLSTATE
CREATE ROLE snowflake_app;
SET ROLE snowflake_app;
SET pg_snowflake.node_id = 2;
\echo :LAST_ERROR_SQLSTATE
ALTER SYSTEM SET pg_snowflake.node_id = 2;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP ROLE snowflake_app;

-- The pg_snowflake. prefix is reserved: a misspelt setting is an error, not a silent no-op.
SET pg_snowflake.nodeid = 2;
\echo :LAST_ERROR_SQLSTATE

-- Batches: n IDs, strictly increasing, all new.
SELECT count(*) AS ids, count(DISTINCT id) AS distinct_ids, bool_and(id > 0) AS positive
FROM snowflake_nextval_batch(100000) id;
SELECT bool_and(id > prev) AS increasing
FROM (SELECT id, lag(id) OVER (ORDER BY n) AS prev
      FROM snowflake_nextval_batch(20000) WITH ORDINALITY b(id, n)) s;
SELECT count(*) AS rows_for_null FROM snowflake_nextval_batch(NULL);
SELECT snowflake_nextval_batch(0);
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_nextval_batch(-5);
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_nextval_batch(100000001);
\echo :LAST_ERROR_SQLSTATE

-- The generator's state: what does not depend on the moment.
SELECT node_id, layout, ids_issued > 0 AS issued, last_issued <= reserved_until AS reserved_ahead,
       lead_ms >= 0 AS lead_ok, clock_regressions, time_field_ends
FROM snowflake_stats();

-- The shape users declare.
CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text);
INSERT INTO orders (item) SELECT 'item ' || n FROM generate_series(1, 1000) n;
SELECT count(*) AS rows, count(DISTINCT id) AS distinct_ids,
       bool_and(snowflake_node_id(id) = 1) AS all_node_1,
       bool_and(abs(extract(epoch FROM snowflake_timestamp(id) - now())) < 5) AS made_now
FROM orders;
DROP TABLE orders;

DROP EXTENSION pg_snowflake;
