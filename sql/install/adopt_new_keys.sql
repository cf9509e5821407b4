
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
