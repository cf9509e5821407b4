-- The Rust example's migration (src/main.rs runs it).
-- snippet: migration
CREATE EXTENSION IF NOT EXISTS pg_snowflake;
CREATE TABLE IF NOT EXISTS orders (
    id   bigint PRIMARY KEY DEFAULT snowflake_nextval(),
    item text NOT NULL
);
-- end snippet
