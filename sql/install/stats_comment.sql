
COMMENT ON FUNCTION snowflake_stats() IS
'Shows this server''s generator: node, layout, IDs issued since start, last issued time, lead over the clock, clock regressions, exhausted milliseconds, overload waits, durable reservation, when the time field runs out, waits for and failures of reservation writes, whether one is being written, and forward steps of the system clock held rather than followed, why no ID may be made now (NULL: they may), and with a node-id registry the claim''s generation, the lease left and the clock''s offset from the registry''s.';
