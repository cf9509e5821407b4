
COMMENT ON FUNCTION snowflake_watermark() IS
'Returns an ID below which every ID this server has issued belongs to a transaction that has ended (committed and visible to any snapshot taken after the call, or aborted); IDs issued after the call are above it. Poll with id > last AND id < the watermark.';
