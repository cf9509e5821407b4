
COMMENT ON FUNCTION snowflake_adopt(regclass, text) IS
'Switches a serial, identity or sequence-default key column to bigint DEFAULT snowflake_nextval() with ordinary DDL; refuses when existing values could collide with new IDs.';
