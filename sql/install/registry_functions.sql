
REVOKE EXECUTE ON FUNCTION snowflake_registry_create() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION snowflake_registry() FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION snowflake_registry_retire(integer) FROM PUBLIC;
COMMENT ON FUNCTION snowflake_registry_create() IS
'Makes the node-id registry''s table snowflake_nodes in the database pg_snowflake.registry names, if it is not there.';
COMMENT ON FUNCTION snowflake_registry() IS
'Lists every node id the registry knows: state (live, lost, retired, free), holder, generation, lease, high-water mark, clock offset, and whether it is this server''s.';
COMMENT ON FUNCTION snowflake_registry_retire(integer) IS
'Retires a node id whose holder is gone; it is handed out again once the registry''s clock is past its high-water mark (returned) by pg_snowflake.max_clock_skew_ms.';
