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

-- src/sql/adopt_online.rs: the checks of CALL snowflake_adopt_online(table, column).
CREATE FUNCTION snowflake_adopt_online_check(tbl regclass, col text) RETURNS boolean
VOLATILE CALLED ON NULL INPUT PARALLEL UNSAFE
LANGUAGE c AS 'MODULE_PATHNAME', 'snowflake_adopt_online_check_wrapper';

-- sql/install/adopt_online.sql: the procedure, its progress table and helpers.

-- snowflake_adopt_online: a large integer primary key (and the foreign keys that point at it)
-- adopted without holding ACCESS EXCLUSIVE for the length of a rewrite. The steps, each
-- committed, so that a crash, a cancel or a lost connection loses at most the step in flight and
-- the next CALL resumes from the row of snowflake_adopt_progress:
--   prepare     a bigint shadow column beside the key and beside every referencing column, kept
--               equal to it by a BEFORE INSERT OR UPDATE trigger (short locks, retried);
--   backfill    the rows that were there before the trigger, in batches of heap blocks, a COMMIT
--               after each;
--   constraints CHECK (shadow IS NOT NULL) NOT VALID, then VALIDATE (SHARE UPDATE EXCLUSIVE), so
--               that the swap's SET NOT NULL scans nothing;
--   index       the unique index on the shadow key (and an index on each referencing shadow
--               whose column had one) built CONCURRENTLY: which a procedure cannot do (Postgres
--               refuses CREATE INDEX CONCURRENTLY anywhere but at the top level), so the CALL
--               stops here, naming the statements; snowflake_adopt_online_indexes() returns them;
--   swap        under ACCESS EXCLUSIVE taken with lock_timeout and retried: the old key dropped,
--               the columns renamed, PRIMARY KEY USING INDEX, DEFAULT snowflake_nextval(), the
--               foreign keys made again NOT VALID, the triggers dropped: catalog changes only;
--   validate    VALIDATE CONSTRAINT for each foreign key (SHARE UPDATE EXCLUSIVE);
--   done.

CREATE TABLE snowflake_adopt_progress (
    table_oid oid NOT NULL,
    column_name text NOT NULL,
    table_name text NOT NULL,
    phase text NOT NULL CHECK (phase IN
        ('backfill', 'constraints', 'index', 'swap', 'validate', 'done')),
    rows_done bigint NOT NULL DEFAULT 0,
    rows_estimate bigint NOT NULL DEFAULT 0,
    batches bigint NOT NULL DEFAULT 0,
    lock_retries integer NOT NULL DEFAULT 0,
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    next_step text,
    parts jsonb NOT NULL,
    foreign_keys jsonb NOT NULL,
    PRIMARY KEY (table_oid, column_name)
);
COMMENT ON TABLE snowflake_adopt_progress IS
'One row per CALL snowflake_adopt_online(table, column): the step it is at, rows backfilled, and what it will do; committed as it goes, readable from any session.';
-- The procedure runs as its caller, who must be able to keep their own row; what a row says is
-- checked again against the catalogs before it is acted on (a shadow left NULL fails the swap's
-- NOT NULL check), so a row edited by hand can stop an adoption but not corrupt a table.
GRANT SELECT, INSERT, UPDATE, DELETE ON snowflake_adopt_progress TO PUBLIC;

-- Runs the statements, in order, in a subtransaction, with lock_timeout; a lock not granted in
-- time rolls them back, and they are tried again after a pause, up to `retries` times. So does a
-- deadlock: the statements take their tables one at a time, and a writer holding one of them
-- that then needs one already taken here closes a cycle, which PostgreSQL ends after
-- deadlock_timeout (this attempt, or the writer's transaction if its check comes first: keep
-- `lock_timeout_ms` below deadlock_timeout). A writer queued behind one of these locks waits at
-- most `lock_timeout_ms` for each statement still waiting for its own, plus the statements'
-- (catalog-only) time. Returns the number of attempts that timed out or were ended.
CREATE FUNCTION snowflake_adopt_online_try(statements text[], lock_timeout_ms integer,
                                           retries integer)
RETURNS integer LANGUAGE plpgsql VOLATILE AS $body$
DECLARE
    attempt integer := 0;
    statement text;
    caller_timeout text := current_setting('lock_timeout');
BEGIN
    LOOP
        BEGIN
            PERFORM set_config('lock_timeout', lock_timeout_ms || 'ms', true);
            FOREACH statement IN ARRAY statements LOOP
                EXECUTE statement;
            END LOOP;
            PERFORM set_config('lock_timeout', caller_timeout, true);
            RETURN attempt;
        EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
            attempt := attempt + 1;
            IF attempt > retries THEN
                RAISE EXCEPTION 'snowflake_adopt_online: a lock was not granted within % ms, % times',
                    lock_timeout_ms, attempt
                    USING ERRCODE = 'lock_not_available',
                          DETAIL = format('The statement waiting: %s', statement),
                          HINT = 'Long transactions on the tables hold it; CALL again (it resumes '
                                 'here), or raise lock_retries or lock_timeout_ms.';
            END IF;
            IF SQLSTATE = '40P01' THEN
                RAISE NOTICE 'snowflake_adopt_online: ended by a deadlock with another transaction, attempt % of %, retrying',
                    attempt, retries + 1;
            ELSE
                RAISE NOTICE 'snowflake_adopt_online: lock not granted within % ms, attempt % of %, retrying',
                    lock_timeout_ms, attempt, retries + 1;
            END IF;
            PERFORM pg_sleep(least(0.05 * attempt, 1.0));
        END;
    END LOOP;
END
$body$;

-- The statements to build the indexes the swap needs, to be run one by one outside any
-- transaction block (psql: SELECT … \gexec). An index left invalid by an interrupted build is
-- dropped first. No row: nothing to build.
CREATE FUNCTION snowflake_adopt_online_indexes(tbl regclass, col text DEFAULT 'id')
RETURNS SETOF text LANGUAGE plpgsql STABLE AS $body$
DECLARE
    progress snowflake_adopt_progress;
    part jsonb;
    pair jsonb;
    existing record;
BEGIN
    SELECT * INTO progress FROM snowflake_adopt_progress p
    WHERE p.table_oid = tbl AND p.column_name = col;
    IF NOT FOUND OR progress.phase NOT IN ('backfill', 'constraints', 'index') THEN
        RETURN;
    END IF;
    FOR part IN SELECT jsonb_array_elements(progress.parts) LOOP
        FOR pair IN SELECT jsonb_array_elements(part->'columns') LOOP
            CONTINUE WHEN NOT (pair->>'indexed')::boolean;
            SELECT i.indisvalid INTO existing FROM pg_index i
            JOIN pg_class c ON c.oid = i.indexrelid
            WHERE c.relname = pair->>'index' AND c.relnamespace =
                  (SELECT relnamespace FROM pg_class WHERE oid = (part->>'oid')::oid);
            IF FOUND AND existing.indisvalid THEN
                CONTINUE;
            ELSIF FOUND THEN
                RETURN NEXT format('DROP INDEX CONCURRENTLY %I.%I', part->>'schema',
                                   pair->>'index');
            END IF;
            RETURN NEXT format('CREATE %sINDEX CONCURRENTLY %I ON %s (%I)',
                               CASE WHEN (pair->>'key')::boolean THEN 'UNIQUE ' ELSE '' END,
                               pair->>'index', part->>'table', pair->>'shadow');
        END LOOP;
    END LOOP;
END
$body$;

CREATE PROCEDURE snowflake_adopt_online(tbl regclass, col text DEFAULT 'id',
                                        batch_rows integer DEFAULT 10000,
                                        lock_timeout_ms integer DEFAULT 200,
                                        lock_retries integer DEFAULT 100)
LANGUAGE plpgsql AS $body$
DECLARE
    progress snowflake_adopt_progress;
    ext_schema text;
    part jsonb;
    pair jsonb;
    fk jsonb;
    parts jsonb := '[]';
    fks jsonb := '[]';
    statements text[];
    i integer;
    cursor_block bigint;
    blocks bigint;
    step_blocks bigint;
    done bigint;
    total_done bigint;
    next_report bigint;
    retried integer;
    max_key bigint;
    pending text[];
    r record;
BEGIN
    IF tbl IS NULL OR col IS NULL OR batch_rows IS NULL OR batch_rows < 1
       OR lock_timeout_ms IS NULL OR lock_timeout_ms < 1 OR lock_retries IS NULL
       OR lock_retries < 0 THEN
        RAISE EXCEPTION 'snowflake_adopt_online: arguments must not be null, batch_rows and lock_timeout_ms must be positive'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'e.g. CALL snowflake_adopt_online(''orders'', ''id'', 10000, 200, 100).';
    END IF;
    SELECT quote_ident(n.nspname) INTO ext_schema FROM pg_extension e
    JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_snowflake';

    SELECT * INTO progress FROM snowflake_adopt_progress p
    WHERE p.table_oid = tbl AND p.column_name = col;

    IF NOT FOUND OR progress.phase = 'done' THEN
        -- Refusals come from the Rust check (error/adopt.rs): one catalogue, one collision rule.
        IF NOT snowflake_adopt_online_check(tbl, col) THEN
            RETURN;
        END IF;
        DELETE FROM snowflake_adopt_progress p WHERE p.table_oid = tbl AND p.column_name = col;

        -- prepare: the columns to widen, one part per table (the key's table first).
        FOR r IN
            WITH key_col AS (
                SELECT a.attnum FROM pg_attribute a WHERE a.attrelid = tbl AND a.attname = col),
            widened AS (
                SELECT tbl::oid AS relid, col AS colname, true AS is_key
                UNION
                SELECT con.conrelid, a.attname::text, con.conrelid = tbl AND a.attname = col
                FROM pg_constraint con CROSS JOIN key_col
                JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = con.conkey[1]
                WHERE con.contype = 'f' AND con.confrelid = tbl
                  AND con.confkey = ARRAY[key_col.attnum])
            SELECT w.relid, w.colname, bool_or(w.is_key) AS is_key,
                   format('%I.%I', n.nspname, c.relname) AS qualified, n.nspname::text AS schema,
                   c.relname::text AS relname, c.relkind::text AS relkind,
                   format_type(a.atttypid, NULL) AS type_name, a.attnotnull,
                   a.attidentity <> '' AS identity,
                   EXISTS (SELECT 1 FROM pg_index x WHERE x.indrelid = w.relid
                           AND x.indkey[0] = a.attnum) AS indexed
            FROM widened w JOIN pg_class c ON c.oid = w.relid
            JOIN pg_namespace n ON n.oid = c.relnamespace
            JOIN pg_attribute a ON a.attrelid = w.relid AND a.attname = w.colname
            GROUP BY w.relid, w.colname, n.nspname, c.relname, c.relkind, a.atttypid,
                     a.attnotnull, a.attidentity, a.attnum
            ORDER BY bool_or(w.is_key) DESC, w.relid, w.colname
        LOOP
            IF r.relkind <> 'r' THEN
                RAISE EXCEPTION 'snowflake_adopt_online: table % references %.% but is partitioned',
                    r.qualified, tbl, col
                    USING ERRCODE = 'feature_not_supported',
                          HINT = 'A NOT VALID foreign key on a partitioned table is not '
                                 'supported; use snowflake_adopt in a maintenance window.';
            END IF;
            -- A view reads a column by its number: after the swap it would read the old
            -- column, NULL in every new row. Refused before anything is changed.
            IF EXISTS (SELECT 1 FROM pg_depend d JOIN pg_rewrite w ON w.oid = d.objid
                       JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
                       WHERE d.classid = 'pg_rewrite'::regclass AND d.refobjid = r.relid
                         AND a.attname = r.colname AND w.ev_class <> r.relid) THEN
                RAISE EXCEPTION 'snowflake_adopt_online: views read column %.%', r.qualified,
                    quote_ident(r.colname)
                    USING ERRCODE = 'object_not_in_prerequisite_state',
                          DETAIL = (SELECT string_agg(DISTINCT w.ev_class::regclass::text, ', ')
                                    FROM pg_depend d JOIN pg_rewrite w ON w.oid = d.objid
                                    JOIN pg_attribute a ON a.attrelid = d.refobjid
                                         AND a.attnum = d.refobjsubid
                                    WHERE d.classid = 'pg_rewrite'::regclass
                                      AND d.refobjid = r.relid AND a.attname = r.colname
                                      AND w.ev_class <> r.relid),
                          HINT = 'A view reads a column by its number and would go on reading '
                                 'the old one after the swap: drop the views, adopt, create '
                                 'them again; or use snowflake_adopt, which keeps the column.';
            END IF;
            -- A column already bigint needs no shadow: only its foreign key is made again.
            CONTINUE WHEN r.type_name = 'bigint';
            i := (SELECT min(ord) - 1 FROM jsonb_array_elements(parts) WITH ORDINALITY e(p, ord)
                  WHERE (p->>'oid')::oid = r.relid);
            pair := jsonb_build_object(
                'column', r.colname, 'shadow', left(r.colname, 48) || '_snowflake_new',
                'old', left(r.colname, 44) || '_before_snowflake', 'key', r.is_key,
                'not_null', r.attnotnull, 'identity', r.identity,
                'indexed', r.is_key OR r.indexed,
                'index', left(r.relname || '_' || r.colname, 46) || '_snowflake_idx',
                'check', left(r.colname, 46) || '_snowflake_nn');
            IF i IS NULL THEN
                parts := parts || jsonb_build_array(jsonb_build_object(
                    'oid', r.relid, 'table', r.qualified, 'schema', r.schema,
                    'relname', r.relname, 'next_block', 0, 'blocks', NULL,
                    'columns', jsonb_build_array(pair)));
            ELSE
                parts := jsonb_set(parts, ARRAY[i::text, 'columns'],
                                   (parts->i->'columns') || jsonb_build_array(pair));
            END IF;
        END LOOP;
        SELECT coalesce(jsonb_agg(jsonb_build_object(
                   'name', con.conname, 'oid', con.conrelid,
                   'table', format('%I.%I', n.nspname, c.relname),
                   'def', regexp_replace(pg_get_constraintdef(con.oid), '\s+NOT VALID$', ''))
                   ORDER BY con.conrelid, con.conname), '[]')
        INTO fks
        FROM pg_constraint con JOIN pg_class c ON c.oid = con.conrelid
        JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE con.contype = 'f' AND con.confrelid = tbl;

        -- The shadows and one trigger per table keeping them equal to their columns.
        statements := '{}';
        FOR part IN SELECT jsonb_array_elements(parts) LOOP
            FOR pair IN SELECT jsonb_array_elements(part->'columns') LOOP
                statements := statements || format('ALTER TABLE %s ADD COLUMN %I bigint',
                                                   part->>'table', pair->>'shadow');
            END LOOP;
            statements := statements || format(
                'CREATE FUNCTION %I.%I() RETURNS trigger LANGUAGE plpgsql AS %L',
                part->>'schema', 'snowflake_adopt_sync_' || (part->>'oid'),
                'BEGIN ' || (SELECT string_agg(format('NEW.%I := NEW.%I;', c->>'shadow',
                                                      c->>'column'), ' ')
                             FROM jsonb_array_elements(part->'columns') c)
                || ' RETURN NEW; END');
            statements := statements || format(
                'CREATE TRIGGER snowflake_adopt_sync BEFORE INSERT OR UPDATE ON %s '
                'FOR EACH ROW EXECUTE FUNCTION %I.%I()',
                part->>'table', part->>'schema', 'snowflake_adopt_sync_' || (part->>'oid'));
        END LOOP;
        retried := snowflake_adopt_online_try(statements, lock_timeout_ms, lock_retries);
        INSERT INTO snowflake_adopt_progress AS p
            (table_oid, column_name, table_name, phase, rows_estimate, lock_retries, parts,
             foreign_keys, next_step)
        VALUES (tbl, col, tbl::text, 'backfill',
                (SELECT coalesce(sum(greatest(c.reltuples, 0)), 0)::bigint FROM pg_class c
                 WHERE c.oid IN (SELECT (e->>'oid')::oid FROM jsonb_array_elements(parts) e)),
                retried, parts, fks, 'backfill')
        RETURNING * INTO progress;
        RAISE NOTICE 'snowflake_adopt_online: %.%: shadow columns and triggers on % table(s); backfilling about % rows',
            tbl, col, jsonb_array_length(parts), progress.rows_estimate;
        COMMIT;
    END IF;

    IF progress.phase = 'backfill' THEN
        next_report := progress.rows_estimate / 10;
        total_done := progress.rows_done;
        FOR i IN 0 .. jsonb_array_length(progress.parts) - 1 LOOP
            part := progress.parts->i;
            -- The blocks that held rows before the trigger: measured once, after the trigger
            -- was committed; what lies beyond them was written with the trigger in place.
            blocks := (part->>'blocks')::bigint;
            IF blocks IS NULL THEN
                blocks := pg_relation_size((part->>'oid')::oid)
                          / current_setting('block_size')::bigint;
                progress.parts := jsonb_set(progress.parts, ARRAY[i::text, 'blocks'],
                                            to_jsonb(blocks));
            END IF;
            -- Rows per block from the statistics; 100 when the table was never analysed.
            SELECT greatest(1, batch_rows / CASE WHEN c.reltuples > 0 AND c.relpages > 0
                                                 THEN greatest(1.0, c.reltuples / c.relpages)
                                                 ELSE 100 END)::bigint
            INTO step_blocks FROM pg_class c WHERE c.oid = (part->>'oid')::oid;
            cursor_block := (part->>'next_block')::bigint;
            WHILE cursor_block < blocks LOOP
                EXECUTE format('UPDATE %s SET %s WHERE ctid >= %L::tid AND ctid < %L::tid AND (%s)',
                    part->>'table',
                    (SELECT string_agg(format('%I = %I', c->>'shadow', c->>'column'), ', ')
                     FROM jsonb_array_elements(part->'columns') c),
                    format('(%s,0)', cursor_block),
                    format('(%s,0)', least(cursor_block + step_blocks, 4294967295)),
                    (SELECT string_agg(format('%I IS DISTINCT FROM %I', c->>'shadow',
                                              c->>'column'), ' OR ')
                     FROM jsonb_array_elements(part->'columns') c));
                GET DIAGNOSTICS done = ROW_COUNT;
                cursor_block := cursor_block + step_blocks;
                total_done := total_done + done;
                progress.parts := jsonb_set(progress.parts, ARRAY[i::text, 'next_block'],
                                            to_jsonb(cursor_block));
                UPDATE snowflake_adopt_progress p
                SET parts = progress.parts, rows_done = total_done, batches = p.batches + 1,
                    updated_at = clock_timestamp()
                WHERE p.table_oid = tbl AND p.column_name = col;
                COMMIT;
                IF total_done >= next_report AND next_report > 0 THEN
                    RAISE NOTICE 'snowflake_adopt_online: %.%: % of about % rows backfilled',
                        tbl, col, total_done, progress.rows_estimate;
                    next_report := next_report + greatest(progress.rows_estimate / 10, 1);
                END IF;
            END LOOP;
        END LOOP;
        UPDATE snowflake_adopt_progress p
        SET phase = 'constraints', next_step = 'constraints', parts = progress.parts,
            updated_at = clock_timestamp()
        WHERE p.table_oid = tbl AND p.column_name = col RETURNING * INTO progress;
        RAISE NOTICE 'snowflake_adopt_online: %.%: backfill done, % rows in % batches',
            tbl, col, progress.rows_done, progress.batches;
        COMMIT;
    END IF;

    IF progress.phase = 'constraints' THEN
        FOR part IN SELECT jsonb_array_elements(progress.parts) LOOP
            FOR pair IN SELECT jsonb_array_elements(part->'columns') LOOP
                CONTINUE WHEN NOT (pair->>'not_null')::boolean;
                IF NOT EXISTS (SELECT 1 FROM pg_constraint
                               WHERE conrelid = (part->>'oid')::oid
                                 AND conname = pair->>'check') THEN
                    retried := snowflake_adopt_online_try(ARRAY[format(
                        'ALTER TABLE %s ADD CONSTRAINT %I CHECK (%I IS NOT NULL) NOT VALID',
                        part->>'table', pair->>'check', pair->>'shadow')],
                        lock_timeout_ms, lock_retries);
                    UPDATE snowflake_adopt_progress p
                    SET lock_retries = p.lock_retries + retried
                    WHERE p.table_oid = tbl AND p.column_name = col;
                    COMMIT;
                END IF;
                -- SHARE UPDATE EXCLUSIVE: writers go on while the table is scanned.
                EXECUTE format('ALTER TABLE %s VALIDATE CONSTRAINT %I', part->>'table',
                               pair->>'check');
                COMMIT;
            END LOOP;
        END LOOP;
        UPDATE snowflake_adopt_progress p
        SET phase = 'index', next_step = 'index', updated_at = clock_timestamp()
        WHERE p.table_oid = tbl AND p.column_name = col RETURNING * INTO progress;
        COMMIT;
    END IF;

    IF progress.phase = 'index' THEN
        pending := ARRAY(SELECT snowflake_adopt_online_indexes(tbl, col));
        IF cardinality(pending) > 0 THEN
            UPDATE snowflake_adopt_progress p
            SET next_step = 'run, outside a transaction block: '
                            || array_to_string(pending, '; ') || '; then CALL again',
                updated_at = clock_timestamp()
            WHERE p.table_oid = tbl AND p.column_name = col;
            COMMIT;
            RAISE NOTICE 'snowflake_adopt_online: %.%: run these statements, then CALL snowflake_adopt_online again: %',
                tbl, col, array_to_string(pending, '; ')
                USING HINT = format('In psql: SELECT %s.snowflake_adopt_online_indexes(%L, %L) \gexec '
                                    '(CREATE INDEX CONCURRENTLY cannot run inside a procedure).',
                                    ext_schema, tbl::text, col);
            RETURN;
        END IF;
        UPDATE snowflake_adopt_progress p
        SET phase = 'swap', next_step = 'swap', updated_at = clock_timestamp()
        WHERE p.table_oid = tbl AND p.column_name = col RETURNING * INTO progress;
        COMMIT;
    END IF;

    IF progress.phase = 'swap' THEN
        -- One transaction, catalog changes only, under ACCESS EXCLUSIVE on every table taken
        -- at once (one LOCK: no order for a writer to deadlock against).
        statements := ARRAY[format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE',
            (SELECT string_agg(DISTINCT t, ', ') FROM (
                SELECT p->>'table' AS t FROM jsonb_array_elements(progress.parts) p
                UNION SELECT f->>'table' FROM jsonb_array_elements(progress.foreign_keys) f
                UNION SELECT tbl::text) s))];
        FOR fk IN SELECT jsonb_array_elements(progress.foreign_keys) LOOP
            statements := statements || format('ALTER TABLE %s DROP CONSTRAINT %I',
                                               fk->>'table', fk->>'name');
        END LOOP;
        statements := statements || (SELECT format('ALTER TABLE %s DROP CONSTRAINT %I',
                                                   tbl, conname)
                                     FROM pg_constraint WHERE conrelid = tbl AND contype = 'p');
        FOR part IN SELECT jsonb_array_elements(progress.parts) LOOP
            statements := statements || format('DROP TRIGGER snowflake_adopt_sync ON %s',
                                               part->>'table')
                                     || format('DROP FUNCTION %I.%I()', part->>'schema',
                                               'snowflake_adopt_sync_' || (part->>'oid'));
            FOR pair IN SELECT jsonb_array_elements(part->'columns') LOOP
                IF (pair->>'identity')::boolean THEN
                    statements := statements || format('ALTER TABLE %s ALTER COLUMN %I DROP IDENTITY',
                                                       part->>'table', pair->>'column');
                END IF;
                statements := statements
                    || format('ALTER TABLE %s ALTER COLUMN %I DROP DEFAULT',
                              part->>'table', pair->>'column')
                    || format('ALTER TABLE %s ALTER COLUMN %I DROP NOT NULL',
                              part->>'table', pair->>'column')
                    || format('ALTER TABLE %s RENAME COLUMN %I TO %I', part->>'table',
                              pair->>'column', pair->>'old')
                    || format('ALTER TABLE %s RENAME COLUMN %I TO %I', part->>'table',
                              pair->>'shadow', pair->>'column');
                IF (pair->>'not_null')::boolean THEN
                    -- The validated CHECK proves it: no scan.
                    statements := statements
                        || format('ALTER TABLE %s ALTER COLUMN %I SET NOT NULL',
                                  part->>'table', pair->>'column')
                        || format('ALTER TABLE %s DROP CONSTRAINT %I', part->>'table',
                                  pair->>'check');
                END IF;
                IF (pair->>'key')::boolean THEN
                    statements := statements
                        || format('ALTER TABLE %s ADD CONSTRAINT %I PRIMARY KEY USING INDEX %I',
                                  part->>'table',
                                  (SELECT conname FROM pg_constraint
                                   WHERE conrelid = tbl AND contype = 'p'),
                                  pair->>'index')
                        || format('ALTER TABLE %s ALTER COLUMN %I SET DEFAULT %s.snowflake_nextval()',
                                  part->>'table', pair->>'column', ext_schema);
                ELSIF (pair->>'indexed')::boolean THEN
                    statements := statements || format('ALTER INDEX %I.%I RENAME TO %I',
                        part->>'schema', pair->>'index',
                        left(part->>'relname' || '_' || (pair->>'column'), 50) || '_sf_idx');
                END IF;
            END LOOP;
        END LOOP;
        -- Made again against the new key, unchecked: VALIDATE follows, without the long lock.
        FOR fk IN SELECT jsonb_array_elements(progress.foreign_keys) LOOP
            statements := statements || format('ALTER TABLE %s ADD CONSTRAINT %I %s NOT VALID',
                                               fk->>'table', fk->>'name', fk->>'def');
        END LOOP;
        -- Checked last, under the lock: the old key's values, not one a server can issue now.
        statements := statements || format(
            'DO $check$ BEGIN IF (SELECT max(%I) FROM %s) >= %s.snowflake_from_timestamp(now()) '
            'THEN RAISE EXCEPTION %L USING ERRCODE = %L, HINT = %L; END IF; END $check$',
            col, tbl, ext_schema,
            format('snowflake_adopt_online: %s.%s holds values that snowflake IDs could repeat',
                   tbl, col),
            'object_not_in_prerequisite_state',
            'Renumber the rows below snowflake_from_timestamp(now()), or keep the sequence.');
        statements := statements || format(
            'UPDATE %s.snowflake_adopt_progress SET phase = %L, next_step = %L, '
            'updated_at = clock_timestamp() WHERE table_oid = %s AND column_name = %L',
            ext_schema, 'validate', 'validate', tbl::oid, col);
        retried := snowflake_adopt_online_try(statements, lock_timeout_ms, lock_retries);
        UPDATE snowflake_adopt_progress p SET lock_retries = p.lock_retries + retried
        WHERE p.table_oid = tbl AND p.column_name = col RETURNING * INTO progress;
        RAISE NOTICE 'snowflake_adopt_online: %.%: swapped (% lock retries); new rows get snowflake_nextval()',
            tbl, col, progress.lock_retries;
        COMMIT;
    END IF;

    IF progress.phase = 'validate' THEN
        FOR fk IN SELECT jsonb_array_elements(progress.foreign_keys) LOOP
            IF NOT (SELECT convalidated FROM pg_constraint
                    WHERE conrelid = (fk->>'oid')::oid AND conname = fk->>'name') THEN
                EXECUTE format('ALTER TABLE %s VALIDATE CONSTRAINT %I', fk->>'table',
                               fk->>'name');
                COMMIT;
            END IF;
        END LOOP;
        UPDATE snowflake_adopt_progress p
        SET phase = 'done', next_step = NULL, updated_at = clock_timestamp()
        WHERE p.table_oid = tbl AND p.column_name = col RETURNING * INTO progress;
        RAISE NOTICE 'snowflake_adopt_online: %.%: done in %; the old columns are kept, renamed: %',
            tbl, col, date_trunc('second', progress.updated_at - progress.started_at),
            (SELECT string_agg(format('%s.%I', p->>'table', c->>'old'), ', ')
             FROM jsonb_array_elements(progress.parts) p,
                  jsonb_array_elements(p->'columns') c)
            USING HINT = 'Drop them with ALTER TABLE … DROP COLUMN once nothing reads them '
                         '(a catalog change); their old sequence goes with them.';
        COMMIT;
    END IF;
END
$body$;

COMMENT ON PROCEDURE snowflake_adopt_online(regclass, text, integer, integer, integer) IS
'Adopts a large integer primary key and widens the foreign keys that point at it without a long lock: shadow columns, a batched backfill, CONCURRENTLY built indexes, a short swap; resumable; progress in snowflake_adopt_progress.';
COMMENT ON FUNCTION snowflake_adopt_online_check(regclass, text) IS
'snowflake_adopt_online''s refusals, before it changes anything: false (with a NOTICE) when the column is adopted already.';
COMMENT ON FUNCTION snowflake_adopt_online_indexes(regclass, text) IS
'The CREATE INDEX CONCURRENTLY statements snowflake_adopt_online waits for, to run outside a transaction block (psql: \gexec); none when there is nothing to build.';
COMMENT ON FUNCTION snowflake_adopt_online_try(text[], integer, integer) IS
'snowflake_adopt_online''s short locks: runs the statements with lock_timeout in a subtransaction, tried again after a pause when a lock is not granted; returns the attempts that timed out.';

-- IDs stamped at past instants, for re-keying old rows (docs/GUIDE.md, "Re-keying historical
-- rows").
CREATE  FUNCTION "snowflake_nextval_at"(
	"ts" timestamp with time zone /* pgrx::datum::time_stamp_with_timezone::TimestampWithTimeZone */
) RETURNS bigint /* i64 */
STRICT VOLATILE PARALLEL UNSAFE
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_nextval_at_wrapper';

COMMENT ON FUNCTION snowflake_nextval_at(timestamptz) IS
'Returns a snowflake ID stamped at a past instant (re-keying old rows) under pg_snowflake.backfill_node_id; instants must not decrease while the server runs.';
