-- pg_snowflake_read: pg_snowflake's read side (decoders, time bounds, base-32 text) in plain
-- SQL, for servers that cannot load pg_snowflake's library (managed services). One file, two uses:
--
--   CREATE EXTENSION pg_snowflake_read SCHEMA snowflake;     -- trusted: CREATE on the database
--   psql -v ON_ERROR_STOP=1 -c 'SET search_path = snowflake' -f pg_snowflake_read--0.7.0.sql
--                                                            -- no extension at all
--
-- So it has no "\echo ... \quit" guard and names no schema: every function lands in the first
-- schema of search_path (the extension's, or the one psql set), and every SQL body below is a
-- SQL-standard one (RETURN ...), whose references are bound when it is created, not looked up
-- by each caller's search_path. CREATE OR REPLACE lets psql run it again over an older copy;
-- inside CREATE EXTENSION it refuses a same-named function that is not the extension's own.
--
-- The results, errors and volatility are the library's (pgrx-tests/tests/read_sql.rs compares
-- them on a million IDs per layout). The layout is an argument: the one-argument forms decode with
-- the default layout, as the library does where it is not preloaded.

-- Raises an error; IMMUTABLE so that an expression calling it may still be inlined and folded.
-- Every call passes something of the caller's input, so that the planner never folds one of an
-- arm not taken. PL/pgSQL only because SQL cannot raise an error of its own.
CREATE OR REPLACE FUNCTION snowflake_read_raise(code text, message_text text, detail_text text,
                                                hint_text text, result anyelement)
RETURNS anyelement
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    IF detail_text IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = code, MESSAGE = message_text, HINT = hint_text;
    END IF;
    RAISE EXCEPTION USING ERRCODE = code, MESSAGE = message_text, DETAIL = detail_text,
        HINT = hint_text;
END
$$;

-- Whether a Unix millisecond lies in the future: the library's check that a layout's epoch is
-- not reads the clock, which no SQL expression that may be inlined into an IMMUTABLE function can.
CREATE OR REPLACE FUNCTION snowflake_read_in_future(ms bigint)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
BEGIN
    RETURN ms > floor(extract(epoch FROM clock_timestamp()) * 1000);
END
$$;

-- The Unix millisecond holding ts (rounded down); the infinities as the bigint extremes.
CREATE OR REPLACE FUNCTION snowflake_read_unix_ms(ts timestamptz)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN ts = 'infinity'::timestamptz THEN 9223372036854775807::bigint
            WHEN ts = '-infinity'::timestamptz THEN '-9223372036854775808'::bigint
            ELSE floor(extract(epoch FROM ts AT TIME ZONE 'UTC') * 1000)::bigint END;

-- A Unix millisecond (0 or later) as a timestamptz, exactly: whole hours and the seconds of the
-- last hour, added to a timestamp without time zone, whose arithmetic is immutable.
CREATE OR REPLACE FUNCTION snowflake_read_timestamptz(ms bigint)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN ('1970-01-01 00:00:00'::timestamp
        + make_interval(hours => (ms / 3600000)::integer,
                        secs => (ms % 3600000)::double precision / 1000)) AT TIME ZONE 'UTC';

-- A Unix millisecond as 'YYYY-MM-DD HH:MM:SS.mmm UTC', as the library's messages write it: a
-- proleptic Gregorian calendar with astronomical years (Howard Hinnant's civil_from_days), for
-- any bigint. PL/pgSQL for its local variables: a SQL function reading its argument many times
-- would not be inlined, and a SQL function that is not inlined costs far more per call.
CREATE OR REPLACE FUNCTION snowflake_read_format_ms(ms bigint)
RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
    days bigint := ms / 86400000 - (ms % 86400000 < 0)::integer;
    ms_of_day bigint := (ms % 86400000 + 86400000) % 86400000;
    z bigint := days + 719468;
    era bigint := z / 146097 - (z % 146097 < 0)::integer;
    doe bigint := z - era * 146097;
    yoe bigint := (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    doy bigint := doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp bigint := (5 * doy + 2) / 153;
    d bigint := doy - (153 * mp + 2) / 5 + 1;
    m bigint := CASE WHEN mp < 10 THEN mp + 3 ELSE mp - 9 END;
    y bigint := yoe + era * 400 + (m <= 2)::integer;
BEGIN
    RETURN CASE WHEN y < 0 THEN '-' || lpad((-y)::text, greatest(3, length((-y)::text)), '0')
                ELSE lpad(y::text, greatest(4, length(y::text)), '0') END
        || '-' || lpad(m::text, 2, '0') || '-' || lpad(d::text, 2, '0')
        || ' ' || lpad((ms_of_day / 3600000)::text, 2, '0')
        || ':' || lpad((ms_of_day / 60000 % 60)::text, 2, '0')
        || ':' || lpad((ms_of_day / 1000 % 60)::text, 2, '0')
        || '.' || lpad((ms_of_day % 1000)::text, 3, '0') || ' UTC';
END
$$;

-- The layout's epoch in Unix ms, once the layout is one a server could run (the library's
-- Layout::new, reason for reason, in its order); NULL for a NULL argument. Given constants (the
-- usual case), the planner calls it once and keeps its value.
CREATE OR REPLACE FUNCTION snowflake_read_layout(epoch timestamptz, time_unit_ms integer,
                                                 node_bits integer, sequence_bits integer)
RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN CASE
    WHEN time_unit_ms < 1 OR time_unit_ms > 86400000
         OR node_bits NOT BETWEEN 0 AND 31 OR sequence_bits NOT BETWEEN 1 AND 31
         OR 63 - node_bits - sequence_bits < 16
         OR snowflake_read_unix_ms(epoch) NOT BETWEEN 0 AND 253402300799999
         OR snowflake_read_in_future(snowflake_read_unix_ms(epoch))
    THEN snowflake_read_raise('22023', 'invalid snowflake layout', 'The layout is invalid: ' ||
        CASE WHEN time_unit_ms < 1
             THEN 'the time unit is ' || time_unit_ms::text || ' ms; it must be at least 1 ms'
             WHEN time_unit_ms > 86400000
             THEN 'the time unit is ' || time_unit_ms::text
                  || ' ms; it must be at most 86400000 ms (a day)'
             -- The library reads a negative width as an unsigned one: 4294967295.
             WHEN node_bits NOT BETWEEN 0 AND 31 OR sequence_bits NOT BETWEEN 1 AND 31
             THEN CASE WHEN node_bits < 0 THEN '4294967295' ELSE node_bits::text END
                  || ' node bits and '
                  || CASE WHEN sequence_bits < 0 THEN '4294967295' ELSE sequence_bits::text END
                  || ' sequence bits: node bits run from 0 to 31, sequence bits from 1 to 31'
             WHEN 63 - node_bits - sequence_bits < 16
             THEN node_bits::text || ' node bits and ' || sequence_bits::text
                  || ' sequence bits leave ' || (63 - node_bits - sequence_bits)::text
                  || ' bits of time; the time field needs at least 16'
             WHEN snowflake_read_unix_ms(epoch) NOT BETWEEN 0 AND 253402300799999
             THEN 'the epoch ' || snowflake_read_format_ms(snowflake_read_unix_ms(epoch))
                  || ' is not between 1970-01-01 and 9999-12-31'
             ELSE 'the epoch ' || snowflake_read_format_ms(snowflake_read_unix_ms(epoch))
                  || ' is in the future' END || '.',
        'Choose pg_snowflake.epoch, time_unit_ms, node_bits and sequence_bits so that the time '
        'field covers the present; see "Layouts" in pg_snowflake''s README.', NULL::bigint)
    ELSE snowflake_read_unix_ms(epoch)
END;

-- The last tick IDs of a valid layout can be made in: the end of the time field or of 9999.
CREATE OR REPLACE FUNCTION snowflake_read_end_tick(epoch_ms bigint, time_unit_ms integer,
                                                   node_bits integer, sequence_bits integer)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN least((1::bigint << (63 - node_bits - sequence_bits)) - 1,
             (253402300799999 - epoch_ms) / time_unit_ms);

-- The layout as its settings spell it, for messages.
CREATE OR REPLACE FUNCTION snowflake_read_describe(epoch_ms bigint, time_unit_ms integer,
                                                   node_bits integer, sequence_bits integer)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN (63 - node_bits - sequence_bits)::text || ' bits of ' || time_unit_ms::text
       || ' ms since ' || snowflake_read_format_ms(epoch_ms) || ' | ' || node_bits::text
       || ' bits node | ' || sequence_bits::text || ' bits sequence';

-- id itself, once the layout is valid and id is an ID of it: not negative, its time not past
-- the end of the time field; NULL for a NULL argument.
CREATE OR REPLACE FUNCTION snowflake_read_checked_id(id bigint, epoch timestamptz,
                                                     time_unit_ms integer, node_bits integer,
                                                     sequence_bits integer)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN snowflake_read_layout(epoch, time_unit_ms, node_bits, sequence_bits) IS NULL
         OR id IS NULL THEN NULL
    WHEN id < 0 THEN snowflake_read_raise('22023', 'snowflake id ' || id::text || ' is negative',
        'Snowflake IDs are positive: their sign bit is always 0.',
        'Pass an ID made by snowflake_nextval().', NULL::bigint)
    WHEN id >> (node_bits + sequence_bits) > snowflake_read_end_tick(
             snowflake_read_layout(epoch, time_unit_ms, node_bits, sequence_bits),
             time_unit_ms, node_bits, sequence_bits)
    THEN snowflake_read_raise('22023',
        'snowflake id ' || id::text || ' lies past the end of the time field',
        'IDs of the layout "' || snowflake_read_describe(
            snowflake_read_layout(epoch, time_unit_ms, node_bits, sequence_bits), time_unit_ms,
            node_bits, sequence_bits) || '" end at ' || snowflake_read_format_ms(
            snowflake_read_layout(epoch, time_unit_ms, node_bits, sequence_bits)
            + snowflake_read_end_tick(snowflake_read_layout(epoch, time_unit_ms, node_bits,
                                                            sequence_bits),
                                      time_unit_ms, node_bits, sequence_bits) * time_unit_ms)
            || '.',
        'Pass an ID made with this layout.', NULL::bigint)
    ELSE id
END;

-- The Unix millisecond an ID was made at.
CREATE OR REPLACE FUNCTION snowflake_read_id_ms(id bigint, epoch timestamptz,
                                                time_unit_ms integer, node_bits integer,
                                                sequence_bits integer)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN snowflake_read_layout(epoch, time_unit_ms, node_bits, sequence_bits)
       + (snowflake_read_checked_id(id, epoch, time_unit_ms, node_bits, sequence_bits)
          >> (node_bits + sequence_bits)) * time_unit_ms;

CREATE OR REPLACE FUNCTION snowflake_timestamp(id bigint, epoch timestamptz,
                                               time_unit_ms integer, node_bits integer,
                                               sequence_bits integer)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN snowflake_read_timestamptz(
    snowflake_read_id_ms(id, epoch, time_unit_ms, node_bits, sequence_bits));

CREATE OR REPLACE FUNCTION snowflake_node_id(id bigint, epoch timestamptz,
                                             time_unit_ms integer, node_bits integer,
                                             sequence_bits integer)
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN ((snowflake_read_checked_id(id, epoch, time_unit_ms, node_bits, sequence_bits)
         >> sequence_bits) & ((1::bigint << node_bits) - 1))::integer;

CREATE OR REPLACE FUNCTION snowflake_seq(id bigint, epoch timestamptz,
                                         time_unit_ms integer, node_bits integer,
                                         sequence_bits integer)
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN (snowflake_read_checked_id(id, epoch, time_unit_ms, node_bits, sequence_bits)
        & ((1::bigint << sequence_bits) - 1))::integer;

CREATE OR REPLACE FUNCTION snowflake_decode(id bigint, epoch timestamptz, time_unit_ms integer,
                                            node_bits integer, sequence_bits integer,
                                            OUT ts timestamptz, OUT node_id integer,
                                            OUT seq integer)
RETURNS record
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN (snowflake_timestamp(id, epoch, time_unit_ms, node_bits, sequence_bits),
        snowflake_node_id(id, epoch, time_unit_ms, node_bits, sequence_bits),
        snowflake_seq(id, epoch, time_unit_ms, node_bits, sequence_bits));

CREATE OR REPLACE FUNCTION snowflake_decode_jsonb(id bigint, epoch timestamptz,
                                                  time_unit_ms integer, node_bits integer,
                                                  sequence_bits integer)
RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN ('{"id": "' || id::text || '", "ts": "'
        || overlay(overlay(snowflake_read_format_ms(
               snowflake_read_id_ms(id, epoch, time_unit_ms, node_bits, sequence_bits))
               PLACING 'Z' FROM 24 FOR 4) PLACING 'T' FROM 11)
        || '", "node_id": '
        || snowflake_node_id(id, epoch, time_unit_ms, node_bits, sequence_bits)::text
        || ', "seq": ' || snowflake_seq(id, epoch, time_unit_ms, node_bits, sequence_bits)::text
        || '}')::jsonb;

-- The tick a timestamp falls in, once it lies within the layout's time field.
CREATE OR REPLACE FUNCTION snowflake_read_tick_at(ts timestamptz, epoch timestamptz,
                                                  time_unit_ms integer, node_bits integer,
                                                  sequence_bits integer)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN snowflake_read_layout(epoch, time_unit_ms, node_bits, sequence_bits) IS NULL
         OR ts IS NULL THEN NULL
    WHEN snowflake_read_unix_ms(ts) < snowflake_read_layout(epoch, time_unit_ms, node_bits,
                                                            sequence_bits)
         OR (snowflake_read_unix_ms(ts) - snowflake_read_layout(epoch, time_unit_ms, node_bits,
                                                                sequence_bits)) / time_unit_ms
            > snowflake_read_end_tick(snowflake_read_layout(epoch, time_unit_ms, node_bits,
                                                            sequence_bits),
                                      time_unit_ms, node_bits, sequence_bits)
    THEN snowflake_read_raise('22008', 'timestamp '
        || CASE snowflake_read_unix_ms(ts)
               WHEN 9223372036854775807 THEN 'infinity'
               WHEN '-9223372036854775808'::bigint THEN '-infinity'
               ELSE snowflake_read_format_ms(snowflake_read_unix_ms(ts)) END
        || CASE WHEN snowflake_read_unix_ms(ts) < snowflake_read_layout(epoch, time_unit_ms,
                                                                         node_bits, sequence_bits)
                THEN ' is before the snowflake epoch'
                ELSE ' is after the end of the snowflake time field' END,
        CASE WHEN snowflake_read_unix_ms(ts) < snowflake_read_layout(epoch, time_unit_ms,
                                                                      node_bits, sequence_bits)
             THEN 'Snowflake IDs count milliseconds from ' || snowflake_read_format_ms(
                      snowflake_read_layout(epoch, time_unit_ms, node_bits, sequence_bits))
             ELSE 'The time field of this layout ends at ' || snowflake_read_format_ms(
                      snowflake_read_layout(epoch, time_unit_ms, node_bits, sequence_bits)
                      + snowflake_read_end_tick(snowflake_read_layout(epoch, time_unit_ms,
                                                                      node_bits, sequence_bits),
                                                time_unit_ms, node_bits, sequence_bits)
                        * time_unit_ms) END || '.',
        'Pass a timestamp from ' || snowflake_read_format_ms(
            snowflake_read_layout(epoch, time_unit_ms, node_bits, sequence_bits))
        || ' to ' || snowflake_read_format_ms(
            snowflake_read_layout(epoch, time_unit_ms, node_bits, sequence_bits)
            + snowflake_read_end_tick(snowflake_read_layout(epoch, time_unit_ms, node_bits,
                                                            sequence_bits),
                                      time_unit_ms, node_bits, sequence_bits) * time_unit_ms)
        || '.', NULL::bigint)
    ELSE (snowflake_read_unix_ms(ts) - snowflake_read_layout(epoch, time_unit_ms, node_bits,
                                                             sequence_bits)) / time_unit_ms
END;

CREATE OR REPLACE FUNCTION snowflake_from_timestamp(ts timestamptz, epoch timestamptz,
                                                    time_unit_ms integer, node_bits integer,
                                                    sequence_bits integer)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN snowflake_read_tick_at(ts, epoch, time_unit_ms, node_bits, sequence_bits)
       << (node_bits + sequence_bits);

CREATE OR REPLACE FUNCTION snowflake_max_from_timestamp(ts timestamptz, epoch timestamptz,
                                                        time_unit_ms integer, node_bits integer,
                                                        sequence_bits integer)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN (snowflake_read_tick_at(ts, epoch, time_unit_ms, node_bits, sequence_bits)
        << (node_bits + sequence_bits))
       | (((1::bigint << node_bits) - 1) << sequence_bits)
       | ((1::bigint << sequence_bits) - 1);

-- The one-argument forms: the default layout (2024-01-01 UTC, 1 ms, 10 node bits, 12 sequence
-- bits), as the library uses where it is not preloaded.
CREATE OR REPLACE FUNCTION snowflake_timestamp(id bigint)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN snowflake_timestamp(id, '2024-01-01 00:00:00+00', 1, 10, 12);

CREATE OR REPLACE FUNCTION snowflake_node_id(id bigint)
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN snowflake_node_id(id, '2024-01-01 00:00:00+00', 1, 10, 12);

CREATE OR REPLACE FUNCTION snowflake_seq(id bigint)
RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN snowflake_seq(id, '2024-01-01 00:00:00+00', 1, 10, 12);

CREATE OR REPLACE FUNCTION snowflake_decode(id bigint, OUT ts timestamptz,
                                            OUT node_id integer, OUT seq integer)
RETURNS record
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN (snowflake_timestamp(id), snowflake_node_id(id), snowflake_seq(id));

CREATE OR REPLACE FUNCTION snowflake_decode_jsonb(id bigint)
RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN snowflake_decode_jsonb(id, '2024-01-01 00:00:00+00', 1, 10, 12);

CREATE OR REPLACE FUNCTION snowflake_from_timestamp(ts timestamptz)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN snowflake_from_timestamp(ts, '2024-01-01 00:00:00+00', 1, 10, 12);

CREATE OR REPLACE FUNCTION snowflake_max_from_timestamp(ts timestamptz)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN snowflake_max_from_timestamp(ts, '2024-01-01 00:00:00+00', 1, 10, 12);

-- Crockford's base 32, 13 digits of 5 bits from the top: no layout.
CREATE OR REPLACE FUNCTION snowflake_to_base32(id bigint)
RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE WHEN id < 0 THEN snowflake_read_raise('22023',
                'snowflake id ' || id::text || ' is negative',
                'Snowflake IDs are positive: their sign bit is always 0.',
                'Pass an ID made by snowflake_nextval().', NULL::text)
    ELSE substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((id >> 60) & 31)::integer + 1, 1)
      || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((id >> 55) & 31)::integer + 1, 1)
      || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((id >> 50) & 31)::integer + 1, 1)
      || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((id >> 45) & 31)::integer + 1, 1)
      || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((id >> 40) & 31)::integer + 1, 1)
      || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((id >> 35) & 31)::integer + 1, 1)
      || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((id >> 30) & 31)::integer + 1, 1)
      || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((id >> 25) & 31)::integer + 1, 1)
      || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((id >> 20) & 31)::integer + 1, 1)
      || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((id >> 15) & 31)::integer + 1, 1)
      || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((id >> 10) & 31)::integer + 1, 1)
      || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', ((id >> 5) & 31)::integer + 1, 1)
      || substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ', (id & 31)::integer + 1, 1) END;

-- The value of 1 to 13 base-32 digits (no hyphens; the first of 13 at most 7). A digit's value
-- is its position in this text, less one, modulo 32: the alphabet in both cases, then O, I, L, o, i
-- and l where they read as 0 and 1 (the dots are never looked up); '' (left of the first digit)
-- is at 1, a 0.
CREATE OR REPLACE FUNCTION snowflake_read_base32_value(digits text)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN (((strpos('0123456789ABCDEFGHJKMNPQRSTVWXYZ0123456789abcdefghjkmnpqrstvwxyzOI..............................oi...............................L...............................l', substr(digits, char_length(digits) - 0, 1)) - 1) % 32)::bigint << 0)
     | (((strpos('0123456789ABCDEFGHJKMNPQRSTVWXYZ0123456789abcdefghjkmnpqrstvwxyzOI..............................oi...............................L...............................l', substr(digits, char_length(digits) - 1, 1)) - 1) % 32)::bigint << 5)
     | (((strpos('0123456789ABCDEFGHJKMNPQRSTVWXYZ0123456789abcdefghjkmnpqrstvwxyzOI..............................oi...............................L...............................l', substr(digits, char_length(digits) - 2, 1)) - 1) % 32)::bigint << 10)
     | (((strpos('0123456789ABCDEFGHJKMNPQRSTVWXYZ0123456789abcdefghjkmnpqrstvwxyzOI..............................oi...............................L...............................l', substr(digits, char_length(digits) - 3, 1)) - 1) % 32)::bigint << 15)
     | (((strpos('0123456789ABCDEFGHJKMNPQRSTVWXYZ0123456789abcdefghjkmnpqrstvwxyzOI..............................oi...............................L...............................l', substr(digits, char_length(digits) - 4, 1)) - 1) % 32)::bigint << 20)
     | (((strpos('0123456789ABCDEFGHJKMNPQRSTVWXYZ0123456789abcdefghjkmnpqrstvwxyzOI..............................oi...............................L...............................l', substr(digits, char_length(digits) - 5, 1)) - 1) % 32)::bigint << 25)
     | (((strpos('0123456789ABCDEFGHJKMNPQRSTVWXYZ0123456789abcdefghjkmnpqrstvwxyzOI..............................oi...............................L...............................l', substr(digits, char_length(digits) - 6, 1)) - 1) % 32)::bigint << 30)
     | (((strpos('0123456789ABCDEFGHJKMNPQRSTVWXYZ0123456789abcdefghjkmnpqrstvwxyzOI..............................oi...............................L...............................l', substr(digits, char_length(digits) - 7, 1)) - 1) % 32)::bigint << 35)
     | (((strpos('0123456789ABCDEFGHJKMNPQRSTVWXYZ0123456789abcdefghjkmnpqrstvwxyzOI..............................oi...............................L...............................l', substr(digits, char_length(digits) - 8, 1)) - 1) % 32)::bigint << 40)
     | (((strpos('0123456789ABCDEFGHJKMNPQRSTVWXYZ0123456789abcdefghjkmnpqrstvwxyzOI..............................oi...............................L...............................l', substr(digits, char_length(digits) - 9, 1)) - 1) % 32)::bigint << 45)
     | (((strpos('0123456789ABCDEFGHJKMNPQRSTVWXYZ0123456789abcdefghjkmnpqrstvwxyzOI..............................oi...............................L...............................l', substr(digits, char_length(digits) - 10, 1)) - 1) % 32)::bigint << 50)
     | (((strpos('0123456789ABCDEFGHJKMNPQRSTVWXYZ0123456789abcdefghjkmnpqrstvwxyzOI..............................oi...............................L...............................l', substr(digits, char_length(digits) - 11, 1)) - 1) % 32)::bigint << 55)
     | (((strpos('0123456789ABCDEFGHJKMNPQRSTVWXYZ0123456789abcdefghjkmnpqrstvwxyzOI..............................oi...............................L...............................l', substr(digits, char_length(digits) - 12, 1)) - 1) % 32)::bigint << 60);

CREATE OR REPLACE FUNCTION snowflake_read_from_base32(text text, digits text)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN CASE
    WHEN text IS NULL THEN NULL
    WHEN strpos(digits, substring(digits FROM
             '[^0123456789ABCDEFGHIJKLMNOPQRSTVWXYZabcdefghijklmnopqrstvwxyz]')) BETWEEN 1 AND 14
         OR char_length(digits) NOT BETWEEN 1 AND 13
         OR (char_length(digits) = 13 AND strpos('01234567IiLlOo', left(digits, 1)) = 0)
    THEN snowflake_read_raise('22P02', 'invalid snowflake base-32 text '
        || CASE WHEN char_length(text) <= 64 THEN '"' || text || '"'
                ELSE '"' || left(text, 64) || '..." (' || char_length(text)::text
                     || ' characters)' END
        || ': ' || CASE
            WHEN strpos(digits, substring(digits FROM
                     '[^0123456789ABCDEFGHIJKLMNOPQRSTVWXYZabcdefghijklmnopqrstvwxyz]'))
                 BETWEEN 1 AND 14
            THEN '''' || translate(substring(digits FROM
                     '[^0123456789ABCDEFGHIJKLMNOPQRSTVWXYZabcdefghijklmnopqrstvwxyz]'),
                     'abcdefghijklmnopqrstuvwxyz', 'ABCDEFGHIJKLMNOPQRSTUVWXYZ')
                 || ''' is not a base-32 digit'
            WHEN char_length(digits) > 13 THEN 'it has more than 13 digits'
            WHEN char_length(digits) = 0 THEN 'it has no digits'
            ELSE 'its value does not fit a positive bigint' END,
        NULL,
        'Pass the 13-character text snowflake_to_base32() makes (digits 0-9 and letters except '
        'I, L, O and U).', NULL::bigint)
    ELSE snowflake_read_base32_value(digits)
END;

-- The library reads the text character by character and stops at the first fault: a character
-- that is no digit, or a 14th digit. The first character outside the alphabet (after hyphens are
-- dropped) is the fault when at most 13 digits come before it.
CREATE OR REPLACE FUNCTION snowflake_from_base32(text text)
RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN snowflake_read_from_base32(snowflake_from_base32.text,
                                  replace(snowflake_from_base32.text, '-', ''));

COMMENT ON FUNCTION snowflake_timestamp(bigint, timestamptz, integer, integer, integer) IS
'Returns the time a snowflake ID of the given layout (epoch, time unit in ms, node bits, sequence bits) was made; pg_snowflake''s, in SQL.';
COMMENT ON FUNCTION snowflake_node_id(bigint, timestamptz, integer, integer, integer) IS
'Returns the node id of a snowflake ID of the given layout (epoch, time unit in ms, node bits, sequence bits); pg_snowflake''s, in SQL.';
COMMENT ON FUNCTION snowflake_seq(bigint, timestamptz, integer, integer, integer) IS
'Returns the sequence number of a snowflake ID of the given layout (epoch, time unit in ms, node bits, sequence bits); pg_snowflake''s, in SQL.';
COMMENT ON FUNCTION snowflake_decode(bigint, timestamptz, integer, integer, integer) IS
'Splits a snowflake ID of the given layout (epoch, time unit in ms, node bits, sequence bits) into time, node and sequence; pg_snowflake''s, in SQL.';
COMMENT ON FUNCTION snowflake_decode_jsonb(bigint, timestamptz, integer, integer, integer) IS
'Returns a snowflake ID of the given layout decoded as jsonb with the ID as a string: {"id", "ts", "node_id", "seq"}; in SQL.';
COMMENT ON FUNCTION snowflake_from_timestamp(timestamptz, timestamptz, integer, integer, integer) IS
'Returns the smallest snowflake ID of the given layout any node can issue at this instant: id >= it selects the rows made from then on; in SQL.';
COMMENT ON FUNCTION snowflake_max_from_timestamp(timestamptz, timestamptz, integer, integer, integer) IS
'Returns the largest snowflake ID of the given layout any node can issue at this instant: id <= it selects the rows made up to then; in SQL.';
COMMENT ON FUNCTION snowflake_timestamp(bigint) IS
'Returns the time a snowflake ID of the default layout was made; pg_snowflake''s, in SQL.';
COMMENT ON FUNCTION snowflake_node_id(bigint) IS
'Returns the node id of a snowflake ID of the default layout; pg_snowflake''s, in SQL.';
COMMENT ON FUNCTION snowflake_seq(bigint) IS
'Returns the sequence number of a snowflake ID of the default layout; pg_snowflake''s, in SQL.';
COMMENT ON FUNCTION snowflake_decode(bigint) IS
'Splits a snowflake ID of the default layout into time, node and sequence; pg_snowflake''s, in SQL.';
COMMENT ON FUNCTION snowflake_decode_jsonb(bigint) IS
'Returns a snowflake ID of the default layout decoded as jsonb with the ID as a string; pg_snowflake''s, in SQL.';
COMMENT ON FUNCTION snowflake_from_timestamp(timestamptz) IS
'Returns the smallest snowflake ID of the default layout any node can issue at this instant; pg_snowflake''s, in SQL.';
COMMENT ON FUNCTION snowflake_max_from_timestamp(timestamptz) IS
'Returns the largest snowflake ID of the default layout any node can issue at this instant; pg_snowflake''s, in SQL.';
COMMENT ON FUNCTION snowflake_to_base32(bigint) IS
'Returns the 13-character Crockford base-32 text of a snowflake ID: sorts like the ID, safe in JSON and URLs; pg_snowflake''s, in SQL.';
COMMENT ON FUNCTION snowflake_from_base32(text) IS
'Returns the snowflake ID of a Crockford base-32 text (case-insensitive; I and L read as 1, O as 0, hyphens ignored); pg_snowflake''s, in SQL.';
