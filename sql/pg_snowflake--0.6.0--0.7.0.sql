\echo Use "ALTER EXTENSION pg_snowflake UPDATE" to load this file. \quit

-- pg_snowflake 0.6.0 -> 0.7.0. pgrx-tests/tests/upgrade.rs checks that the result equals a
-- fresh CREATE EXTENSION of 0.7.0, member by member.

-- src/sql/adopt.rs: the view snowflake_sequence_keys, every integer column still fed by a
-- sequence (sql/install/sequence_keys.sql).

CREATE VIEW snowflake_sequence_keys AS
SELECT c.oid::regclass AS tbl,
       format('%I.%I', n.nspname, c.relname) AS table_name,
       a.attname AS column_name,
       format_type(a.atttypid, a.atttypmod) AS type,
       CASE a.attidentity
           WHEN 'a' THEN 'identity always'
           WHEN 'd' THEN 'identity by default'
           ELSE CASE WHEN seq.owned THEN 'serial' ELSE 'nextval default' END
       END AS source,
       seq.sequence,
       pg_total_relation_size(c.oid) AS table_bytes,
       a.atttypid <> 'bigint'::regtype AS needs_rewrite,
       coalesce(fk.foreign_keys, 0) AS foreign_keys,
       fk.referenced_by,
       format('SELECT snowflake_adopt(%L, %L);', format('%I.%I', n.nspname, c.relname),
              a.attname) AS adopt
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
CROSS JOIN LATERAL (
    -- The identity's own sequence, or the sequences the default reads; owned: the column's
    -- serial sequence.
    SELECT string_agg(format('%I.%I', sn.nspname, s.relname), ', ' ORDER BY s.oid) AS sequence,
           bool_or(EXISTS (SELECT FROM pg_depend o
                           WHERE o.classid = 'pg_class'::regclass AND o.objid = s.oid
                             AND o.refobjid = c.oid AND o.refobjsubid = a.attnum
                             AND o.deptype = 'a')) AS owned
    FROM pg_class s JOIN pg_namespace sn ON sn.oid = s.relnamespace
    WHERE s.relkind = 'S' AND s.oid IN (
        SELECT d.objid FROM pg_depend d
        WHERE a.attidentity <> '' AND d.classid = 'pg_class'::regclass
          AND d.refclassid = 'pg_class'::regclass AND d.refobjid = c.oid
          AND d.refobjsubid = a.attnum AND d.deptype = 'i'
        UNION ALL
        SELECT d.refobjid FROM pg_attrdef ad
        JOIN pg_depend d ON d.classid = 'pg_attrdef'::regclass AND d.objid = ad.oid
             AND d.refclassid = 'pg_class'::regclass
        WHERE ad.adrelid = c.oid AND ad.adnum = a.attnum)
) seq
LEFT JOIN LATERAL (
    -- Each foreign key once: a partitioned table's constraint, not its partitions' copies.
    SELECT count(*) AS foreign_keys,
           string_agg(format('%I.%I.%I (%s)', rn.nspname, r.relname, ra.attname,
                             format_type(ra.atttypid, ra.atttypmod)), ', '
                      ORDER BY rn.nspname, r.relname, ra.attname) AS referenced_by
    FROM pg_constraint con
    CROSS JOIN LATERAL unnest(con.conkey, con.confkey) AS k(attnum, refnum)
    JOIN pg_class r ON r.oid = con.conrelid
    JOIN pg_namespace rn ON rn.oid = r.relnamespace
    JOIN pg_attribute ra ON ra.attrelid = con.conrelid AND ra.attnum = k.attnum
    WHERE con.contype = 'f' AND con.confrelid = c.oid AND con.conparentid = 0
      AND k.refnum = a.attnum
) fk ON true
WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\_toast%'
  AND NOT pg_is_other_temp_schema(n.oid)
  AND a.atttypid IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype)
  AND seq.sequence IS NOT NULL
  -- An extension's own tables are its to number.
  AND NOT EXISTS (SELECT FROM pg_depend e WHERE e.classid = 'pg_class'::regclass
                  AND e.objid = c.oid AND e.deptype = 'e');

COMMENT ON VIEW snowflake_sequence_keys IS
'Every integer column whose values come from a sequence (serial, identity, a nextval() default), not yet on snowflake_nextval(): its table, type, the table''s size, whether adopting it rewrites the table, the foreign keys that reference it, and the snowflake_adopt call that adopts it.';

-- src/sql/adopt_new_keys.rs: the event trigger that puts new serial and identity columns on
-- the generator when pg_snowflake.adopt_new_keys is on, and the tables it leaves alone
-- (sql/install/adopt_new_keys.sql).
CREATE FUNCTION snowflake_adopt_exclude(tbl text) RETURNS void
VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_adopt_exclude_wrapper';

CREATE FUNCTION snowflake_adopt_new_keys() RETURNS event_trigger
VOLATILE PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_adopt_new_keys_wrapper';

CREATE TABLE snowflake_adopt_exclusions (
    schema_name name NOT NULL,
    table_name name NOT NULL,
    PRIMARY KEY (schema_name, table_name)
);
SELECT pg_catalog.pg_extension_config_dump('snowflake_adopt_exclusions', '');
-- The event trigger reads it as the role running the DDL.
GRANT SELECT ON snowflake_adopt_exclusions TO PUBLIC;

CREATE EVENT TRIGGER snowflake_adopt_new_keys ON ddl_command_end
    WHEN TAG IN ('CREATE TABLE', 'ALTER TABLE')
    EXECUTE FUNCTION snowflake_adopt_new_keys();

COMMENT ON TABLE snowflake_adopt_exclusions IS
'Tables whose new serial and identity columns keep their sequences when pg_snowflake.adopt_new_keys is on; add one with snowflake_adopt_exclude(table), remove it with DELETE.';

COMMENT ON FUNCTION snowflake_adopt_new_keys() IS
'Event trigger (ddl_command_end, CREATE TABLE and ALTER TABLE): with pg_snowflake.adopt_new_keys on, makes every serial, bigserial and identity column the command created bigint DEFAULT snowflake_nextval(), drops the sequence it no longer needs, and logs each change.';

COMMENT ON FUNCTION snowflake_adopt_exclude(text) IS
'Leaves an existing table''s new serial and identity columns on their sequences when pg_snowflake.adopt_new_keys is on (a row of snowflake_adopt_exclusions).';

COMMENT ON EVENT TRIGGER snowflake_adopt_new_keys IS
'Puts new serial, bigserial and identity columns on snowflake_nextval() when pg_snowflake.adopt_new_keys is on.';

-- src/sql/watermark.rs: snowflake_watermark(), new.
CREATE  FUNCTION "snowflake_watermark"() RETURNS bigint /* i64 */
STRICT VOLATILE PARALLEL RESTRICTED
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_watermark_wrapper';

COMMENT ON FUNCTION snowflake_watermark() IS
'Returns an ID below which every ID this server has issued belongs to a transaction that has ended (committed and visible to any snapshot taken after the call, or aborted); IDs issued after the call are above it. Poll with id > last AND id < the watermark.';

-- Node-id leases for application processes (docs/FLEETS.md, "Applications").
CREATE  FUNCTION "snowflake_lease_acquire"(
	"label" TEXT /* & str */
) RETURNS TABLE (
	"node_id" INT,  /* i32 */
	"token" TEXT,  /* String */
	"generation" bigint,  /* i64 */
	"floor_ms" bigint,  /* Option < i64 > */
	"ceiling_ms" bigint,  /* i64 */
	"lease_ms" bigint,  /* i64 */
	"epoch_ms" bigint,  /* i64 */
	"unit_ms" bigint,  /* i64 */
	"time_bits" INT,  /* i32 */
	"node_bits" INT,  /* i32 */
	"sequence_bits" INT  /* i32 */
)
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_lease_acquire_wrapper';
CREATE  FUNCTION "snowflake_lease_release"(
	"node_id" INT, /* Option < i32 > */
	"token" TEXT, /* Option < & str > */
	"generation" bigint, /* Option < i64 > */
	"ceiling_ms" bigint DEFAULT NULL, /* Option < i64 > */
	"last_ms" bigint DEFAULT NULL /* Option < i64 > */
) RETURNS bool /* bool */
VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_lease_release_wrapper';
CREATE  FUNCTION "snowflake_lease_renew"(
	"node_id" INT, /* i32 */
	"token" TEXT, /* & str */
	"generation" bigint, /* i64 */
	"ceiling_ms" bigint /* i64 */
) RETURNS TABLE (
	"ceiling_ms" bigint,  /* i64 */
	"mark_own" bool  /* bool */
)
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_lease_renew_wrapper';
DO $lease$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'snowflake_lease') THEN
        CREATE ROLE snowflake_lease NOLOGIN;
    END IF;
END
$lease$;
COMMENT ON FUNCTION snowflake_lease_acquire(text) IS
'Takes a node id of the fleet''s registry for an application process (members of snowflake_lease only): its token, generation, floor and ceiling (Unix ms), lease and the fleet''s layout.';
COMMENT ON FUNCTION snowflake_lease_renew(integer, text, bigint, bigint) IS
'Renews an application''s node-id lease (its node id, token, generation and ceiling): its new ceiling (Unix ms), and whether the registry''s mark is still the lease''s own.';
COMMENT ON FUNCTION snowflake_lease_release(integer, text, bigint, bigint, bigint) IS
'Releases an application''s node-id lease at its clean exit; with its ceiling and the time of its last ID (Unix ms), the registry''s mark comes down to that ID.';
