-- The node-id registry's functions on a server without pg_snowflake.registry: each says to set
-- it (docs/FLEETS.md); a node id that cannot be one is refused before any connection.
\set SHOW_CONTEXT never
SET timezone = 'UTC';
CREATE EXTENSION pg_snowflake;
SHOW pg_snowflake.registry;
SHOW pg_snowflake.registry_mode;

SELECT * FROM snowflake_registry();
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_registry_create();
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_registry_retire(-1);
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_registry_retire(3);
\echo :LAST_ERROR_SQLSTATE

-- Without a registry, nothing refuses and there is no claim to show.
SELECT refusing, registry_generation, lease_remaining_ms, registry_clock_offset_ms
FROM snowflake_stats();

-- Ordinary users may not use them: the connection string may carry a password.
CREATE ROLE registry_reader;
SET ROLE registry_reader;
SELECT * FROM snowflake_registry();
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP ROLE registry_reader;

DROP EXTENSION pg_snowflake;
