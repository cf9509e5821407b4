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
ORDER BY 1, pg_get_function_arguments(p.oid) COLLATE "C";
SELECT p.proname, obj_description(p.oid, 'pg_proc') AS comment
FROM pg_proc p WHERE p.proname LIKE 'snowflake\_%'
ORDER BY 1, obj_description(p.oid, 'pg_proc') COLLATE "C";

-- The node id is the one in postgresql.conf, and IDs carry it.
SHOW pg_snowflake.node_id;
SELECT snowflake_node_id(snowflake_nextval()) AS node;
SELECT snowflake_nextval() > 0 AS positive;

-- The watermark: below every ID made after it, and, with no transaction open, above every ID
-- made before it.
SELECT snowflake_nextval() AS before \gset
SELECT snowflake_watermark() AS mark \gset
SELECT :before < :mark AS above_earlier_ids, :mark < snowflake_nextval() AS below_later_ids;

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

-- The same decoders with the layout as arguments (immutable everywhere): the default layout
-- gives the same answers, other layouts other ones.
SELECT d.* FROM snowflake_decode(531934583543832577, '2024-01-01 00:00:00+00', 1, 10, 12) d;
SELECT d.* FROM snowflake_decode(531934583543832577, '2024-01-01 00:00:00+00', 10, 16, 8) d;
SELECT snowflake_timestamp(531934583543832577, '2020-01-01+00', 1000, 22, 9),
       snowflake_node_id(531934583543832577, '2020-01-01+00', 1000, 22, 9),
       snowflake_seq(531934583543832577, '2020-01-01+00', 1000, 22, 9);
SELECT snowflake_decode(1, '2024-01-01+00', 0, 10, 12);
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_decode(1, '2024-01-01+00', 1, 40, 12);
\echo :LAST_ERROR_SQLSTATE
-- Layouts the settings refuse, the layout arguments refuse too (one validation).
SELECT snowflake_decode(1, '2024-01-01+00', 86400001, 10, 12);
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_decode(1, '2024-01-01+00', 1, 31, 31);
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_decode(1, '3000-01-01+00', 1, 10, 12);
\echo :LAST_ERROR_SQLSTATE
-- A layout of whole days with 62 time bits: IDs whose time lies past year 9999 are refused.
SELECT snowflake_timestamp(9223372036854775807, '2024-01-01+00', 86400000, 0, 1);
\echo :LAST_ERROR_SQLSTATE

-- JSON and text forms: the ID as a string, base 32 that sorts like the ID.
SELECT snowflake_decode_jsonb(531934583543832577);
SELECT snowflake_decode_jsonb(531934583543832577) ->> 'id' = '531934583543832577' AS id_is_text;
SELECT snowflake_to_base32(531934583543832577), snowflake_to_base32(0),
       snowflake_to_base32(9223372036854775807);
SELECT snowflake_from_base32('0EREFNXVY0801'), snowflake_from_base32('0erefnxvy0801'),
       snowflake_from_base32('0ERE-FNXV-Y0801'), snowflake_from_base32('OEREFNXVYO8OL');
SELECT bool_and(snowflake_from_base32(snowflake_to_base32(id)) = id) AS round_trip,
       bool_and(snowflake_to_base32(id) > snowflake_to_base32(prev)) AS sorts_like_ids
FROM (SELECT id, lag(id) OVER (ORDER BY n) AS prev
      FROM snowflake_nextval_batch(10000) WITH ORDINALITY b(id, n)) s;
SELECT snowflake_from_base32('snowflake-42U');
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_from_base32('ZZZZZZZZZZZZZ');
\echo :LAST_ERROR_SQLSTATE
-- 13 digits whose first is G..Q: 65 bits, no wrap into a smaller ID.
SELECT snowflake_from_base32('G000000000000');
\echo :LAST_ERROR_SQLSTATE
-- Text of a megabyte is shown as a bounded prefix with its length, never echoed whole.
SELECT snowflake_from_base32(repeat('0', 1048576));
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_to_base32(-1);
\echo :LAST_ERROR_SQLSTATE

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
       lead_ms >= 0 AS lead_ok, clock_regressions, time_field_ends, renewal_failures, clock_jumps
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
