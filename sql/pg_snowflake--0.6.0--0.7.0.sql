\echo Use "ALTER EXTENSION pg_snowflake UPDATE" to load this file. \quit

-- pg_snowflake 0.6.0 -> 0.7.0. pgrx-tests/tests/upgrade.rs checks that the result equals a
-- fresh CREATE EXTENSION of 0.7.0, member by member.

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
