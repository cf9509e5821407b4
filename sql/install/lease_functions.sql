
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
