\echo Use "ALTER EXTENSION pg_snowflake UPDATE" to load this file. \quit

-- pg_snowflake 0.6.0 -> 0.7.0. pgrx-tests/tests/upgrade.rs checks that the result equals a
-- fresh CREATE EXTENSION of 0.7.0, member by member.

-- src/sql/watermark.rs: snowflake_watermark(), new.
CREATE  FUNCTION "snowflake_watermark"() RETURNS bigint /* i64 */
STRICT VOLATILE PARALLEL RESTRICTED
LANGUAGE c /* Rust */
AS 'MODULE_PATHNAME', 'snowflake_watermark_wrapper';

COMMENT ON FUNCTION snowflake_watermark() IS
'Returns an ID below which every ID this server has issued belongs to a transaction that has ended (committed and visible to any snapshot taken after the call, or aborted); IDs issued after the call are above it. Poll with id > last AND id < the watermark.';
