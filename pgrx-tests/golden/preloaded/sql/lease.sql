-- Node-id leases for applications (docs/FLEETS.md, "Applications") on a server without
-- pg_snowflake.registry: the right is checked first, the arguments next, both before any
-- connection; then each function says to set the registry.
\set SHOW_CONTEXT never
SET timezone = 'UTC';
CREATE EXTENSION pg_snowflake;

-- The role the extension makes: no login, no members.
SELECT rolname, rolcanlogin FROM pg_roles WHERE rolname = 'snowflake_lease';
SELECT count(*) AS members FROM pg_auth_members WHERE roleid = 'snowflake_lease'::regrole;

-- A superuser has the right; without a registry, each function says to set it.
SELECT * FROM snowflake_lease_acquire('orders');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM snowflake_lease_renew(0, '0123456789abcdef0123456789abcdef', 1, 0);
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_lease_release(0, '0123456789abcdef0123456789abcdef', 1);
\echo :LAST_ERROR_SQLSTATE

-- Arguments that are not a lease's.
SELECT * FROM snowflake_lease_acquire('');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM snowflake_lease_acquire(repeat('x', 101));
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM snowflake_lease_acquire(E'two\nlines');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM snowflake_lease_renew(-1, '0123456789abcdef0123456789abcdef', 1, 0);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM snowflake_lease_renew(0, 'not a token', 1, 0);
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_lease_release(0, '0123456789abcdef0123456789abcdef', 0);
\echo :LAST_ERROR_SQLSTATE
SELECT snowflake_lease_release(0, NULL, 1);
\echo :LAST_ERROR_SQLSTATE

-- A role without the right is refused, whatever it passes; granted it, it gets as far as the
-- superuser.
CREATE ROLE lease_app;
SET ROLE lease_app;
SELECT * FROM snowflake_lease_acquire('orders');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM snowflake_lease_renew(0, 'not a token', 1, 0);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
GRANT snowflake_lease TO lease_app;
SET ROLE lease_app;
SELECT * FROM snowflake_lease_acquire('orders');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP ROLE lease_app;

DROP EXTENSION pg_snowflake;
