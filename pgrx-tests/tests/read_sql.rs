//! pg_snowflake_read, the read side in SQL for servers that cannot load the library, gives what
//! the library gives: on each layout's edges (the first and last tick, each power of two of the
//! time field, the extreme node and sequence values, each tick's first and last microsecond) and
//! on random IDs and instants (a million of the default layout's, 200,000 of each other's: the
//! same SQL with other constants), every decoder, time bound and base-32 form equals the
//! library's, compared in the server in one query per layout (on the majors other than the
//! newest, the default layout's on 100,000: what differs between majors is the planner's handling
//! of the SQL functions, which as many rows meet alike); every refusal has the library's
//! SQLSTATE, message, detail and hint. And it runs where the library is absent: a server of a
//! copy of the PostgreSQL tree without pg_snowflake's library or control file, where a role that
//! is no superuser installs it as a trusted extension, and the same file runs as a plain psql
//! script.

use postgres::Client;
use snowflake_it::{
    describe, one, pg_bin, pg_config, pg_config_value, repo_root, run, Config, Server,
};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The last instant any layout counts to (the library's LATEST_END_UNIX_MS).
const LATEST_END_UNIX_MS: i64 = 253_402_300_799_999;

/// A layout: its epoch (SQL text and Unix ms), unit, node and sequence bits.
struct Layout {
    name: &'static str,
    epoch: &'static str,
    epoch_ms: i64,
    unit: i64,
    node_bits: u32,
    seq_bits: u32,
}

impl Layout {
    fn args(&self) -> String {
        format!(
            "'{}'::timestamptz, {}, {}, {}",
            self.epoch, self.unit, self.node_bits, self.seq_bits
        )
    }

    fn end_tick(&self) -> i64 {
        let time_bits = 63 - self.node_bits - self.seq_bits;
        ((1i64 << time_bits) - 1).min((LATEST_END_UNIX_MS - self.epoch_ms) / self.unit)
    }

    /// A server preloading the library with this layout, the library in public and the read
    /// extension in schema rd.
    fn server(&self) -> Server {
        let node = if self.node_bits == 0 { 0 } else { 1 };
        let server = Server::start(
            &format!("read-{}", self.name),
            Config::node(node)
                .setting(&format!("pg_snowflake.epoch = '{}'", self.epoch))
                .setting(&format!("pg_snowflake.time_unit_ms = {}", self.unit))
                .setting(&format!("pg_snowflake.node_bits = {}", self.node_bits))
                .setting(&format!("pg_snowflake.sequence_bits = {}", self.seq_bits)),
        );
        server.execute("CREATE SCHEMA rd; CREATE EXTENSION pg_snowflake_read SCHEMA rd");
        server
    }
}

const DEFAULT: Layout = Layout {
    name: "default",
    epoch: "2024-01-01 00:00:00+00",
    epoch_ms: 1_704_067_200_000,
    unit: 1,
    node_bits: 10,
    seq_bits: 12,
};

/// The README's presets and a layout of days since 1970 whose time field outlasts year 9999.
static OTHERS: [Layout; 4] = [
    Layout {
        name: "fleet",
        epoch: "2024-01-01 00:00:00+00",
        epoch_ms: 1_704_067_200_000,
        unit: 1000,
        node_bits: 22,
        seq_bits: 9,
    },
    Layout {
        name: "bursty",
        epoch: "2024-01-01 00:00:00+00",
        epoch_ms: 1_704_067_200_000,
        unit: 1,
        node_bits: 8,
        seq_bits: 16,
    },
    Layout {
        name: "sonyflake",
        epoch: "2014-09-01 00:00:00+00",
        epoch_ms: 1_409_529_600_000,
        unit: 10,
        node_bits: 16,
        seq_bits: 8,
    },
    Layout {
        name: "days",
        epoch: "1970-01-01 00:00:00+00",
        epoch_ms: 0,
        unit: 86_400_000,
        node_bits: 0,
        seq_bits: 1,
    },
];

const MILLION: i64 = 1_000_000;
/// The default layout's random IDs and instants on every major (a million on the newest).
const ON_EVERY_MAJOR: i64 = 100_000;
/// Each other layout's random IDs and instants, beside its edges: the same SQL as the default
/// layout's with other constants, so random values find less that the edges do not.
const PER_OTHER_LAYOUT: i64 = 200_000;
/// How many IDs the functions that are not inlined get (the record-returning decoders, which
/// Postgres never inlines, and base 32 read back), so that the test stays within seconds.
const SLOW: i64 = 2_000;

/// A layout's edges: the ticks (0 to 2, each power of two of the time field and its neighbours,
/// the last three) and the parts below the time field (0, 1, the last sequence of node 0, node 1's
/// first, the last node's first and last), as SQL arrays.
fn edges(layout: &Layout) -> (String, String) {
    let (end, shift) = (layout.end_tick(), layout.node_bits + layout.seq_bits);
    let mut ticks: Vec<i64> = (0..63 - shift)
        .flat_map(|bit| [(1i64 << bit) - 1, 1 << bit, (1 << bit) + 1])
        .chain([0, 2, end - 2, end - 1, end])
        .filter(|tick| (0..=end).contains(tick))
        .collect();
    let (seq_end, low_end) = ((1i64 << layout.seq_bits) - 1, (1i64 << shift) - 1);
    let mut lows = vec![0, 1, seq_end, seq_end + 1, low_end - seq_end, low_end];
    lows.retain(|low| *low <= low_end);
    assert!(
        ticks.contains(&end) && lows.contains(&low_end),
        "{}",
        layout.name
    );
    let array = |values: &mut Vec<i64>| {
        values.sort_unstable();
        values.dedup();
        let values: Vec<String> = values.iter().map(i64::to_string).collect();
        format!("'{{{}}}'::bigint[]", values.join(","))
    };
    (array(&mut ticks), array(&mut lows))
}

/// Counts, over the layout's edges, n random IDs of the layout (random ticks, nodes and
/// sequences) and n random instants in its time field (random to the microsecond), the results
/// of the read extension that differ from the library's: the layout-argument forms against the
/// library's same forms, and against its one-argument forms with the server's layout where the
/// library has no layout-argument form (jsonb, the time bounds).
fn mismatches(client: &mut Client, layout: &Layout, n: i64) -> Vec<(String, i64)> {
    let (args, shift, end_tick) = (
        layout.args(),
        layout.node_bits + layout.seq_bits,
        layout.end_tick(),
    );
    let span_ms = (end_tick + 1) * layout.unit;
    let (ticks, lows) = edges(layout);
    // The edges first: the one-argument forms compare the first 2,000 rows. Their instants in
    // whole hours and seconds below one: a float of all their seconds, exact only to about 30 µs
    // in the year 9999, would carry the last microsecond past the field's end.
    let sql = format!(
        "WITH ids AS (
             SELECT 0::bigint AS i, (t << {shift}) | low AS id FROM unnest({ticks}) t, unnest({lows}) low
             UNION ALL SELECT i, ((hashint8extended(i, 1) & 9223372036854775807) % ({end_tick} + 1)) << {shift}
                    | (hashint8extended(i, 2) & ((1::bigint << {shift}) - 1))
             FROM generate_series(2, {n} - 1) i),
         instants AS (
             SELECT '{epoch}'::timestamptz + make_interval(hours => ((t * {unit} + ms) / 3600000)::int,
                        secs => ((t * {unit} + ms) % 3600000)::float8 / 1000)
                    + us * interval '1 microsecond' AS ts
             FROM unnest({ticks}) t, unnest(ARRAY[0, {unit} - 1]) ms, unnest(ARRAY[0, 1, 999]) us
             UNION ALL SELECT '{epoch}'::timestamptz
                    + make_interval(secs => ((hashint8extended(i, 3) & 9223372036854775807) % {span_ms})::float8 / 1000)
                    + (i % 1000) * interval '1 microsecond' AS ts
             FROM generate_series(1, {n}) i)
         SELECT 'timestamp', count(*) FILTER (WHERE rd.snowflake_timestamp(id, {args})
                                   IS DISTINCT FROM public.snowflake_timestamp(id, {args})) FROM ids
         UNION ALL SELECT 'node_id', count(*) FILTER (WHERE rd.snowflake_node_id(id, {args})
                                   IS DISTINCT FROM public.snowflake_node_id(id, {args})) FROM ids
         UNION ALL SELECT 'seq', count(*) FILTER (WHERE rd.snowflake_seq(id, {args})
                                   IS DISTINCT FROM public.snowflake_seq(id, {args})) FROM ids
         UNION ALL SELECT 'decode', count(*) FILTER (WHERE rd.snowflake_decode(id, {args})
                                   IS DISTINCT FROM public.snowflake_decode(id, {args}))
                   FROM ids WHERE i < {SLOW}
         UNION ALL SELECT 'decode_jsonb', count(*) FILTER (WHERE rd.snowflake_decode_jsonb(id, {args})
                                   IS DISTINCT FROM public.snowflake_decode_jsonb(id)) FROM ids
         UNION ALL SELECT 'to_base32', count(*) FILTER (WHERE rd.snowflake_to_base32(id)
                                   IS DISTINCT FROM public.snowflake_to_base32(id)) FROM ids
         UNION ALL SELECT 'from_base32', count(*) FILTER (
                 WHERE rd.snowflake_from_base32(lower(public.snowflake_to_base32(id)))
                       IS DISTINCT FROM id) FROM ids WHERE i < {SLOW} * 10
         UNION ALL SELECT 'from_timestamp', count(*) FILTER (
                 WHERE rd.snowflake_from_timestamp(ts, {args})
                       IS DISTINCT FROM public.snowflake_from_timestamp(ts)) FROM instants
         UNION ALL SELECT 'max_from_timestamp', count(*) FILTER (
                 WHERE rd.snowflake_max_from_timestamp(ts, {args})
                       IS DISTINCT FROM public.snowflake_max_from_timestamp(ts)) FROM instants
         UNION ALL SELECT 'one-argument forms', count(*) FILTER (
                 WHERE {one_arg}) FROM ids, instants LIMIT 1",
        epoch = layout.epoch,
        unit = layout.unit,
        one_arg = if layout.name == "default" {
            "(rd.snowflake_decode(id), rd.snowflake_decode_jsonb(id), rd.snowflake_from_timestamp(ts),
              rd.snowflake_max_from_timestamp(ts))
             IS DISTINCT FROM (public.snowflake_decode(id), public.snowflake_decode_jsonb(id),
              public.snowflake_from_timestamp(ts), public.snowflake_max_from_timestamp(ts))"
        } else {
            "false"
        },
    );
    // The one-argument forms pair the n-th ID with the n-th instant rather than every pair.
    let sql = sql.replace(
        "FROM ids, instants LIMIT 1",
        "FROM (SELECT id, row_number() OVER () AS n FROM ids) a
              JOIN (SELECT ts, row_number() OVER () AS n FROM instants) b USING (n)
         WHERE n <= 2000",
    );
    client
        .query(&sql, &[])
        .unwrap_or_else(|e| panic!("{}: {}", layout.name, describe(&e)))
        .iter()
        .map(|row| (row.get(0), row.get(1)))
        .collect()
}

fn assert_equal_on(layout: &Layout, n: i64) {
    let server = layout.server();
    let mut client = server.connect();
    let started = Instant::now();
    let counts = mismatches(&mut client, layout, n);
    eprintln!(
        "{}: {n} IDs and instants compared in {:.1} s",
        layout.name,
        started.elapsed().as_secs_f64()
    );
    assert_eq!(counts.len(), 10, "{counts:?}");
    for (function, count) in counts {
        assert_eq!(
            count, 0,
            "{}: {count} results of {function} differ",
            layout.name
        );
    }
    assert_same_errors(&mut client, layout);
}

/// What a call gives: its value as text, or its error's SQLSTATE, message, detail and hint.
fn outcome(client: &mut Client, sql: &str) -> String {
    match client.query_one(sql, &[]) {
        Ok(row) => format!("value {:?}", row.get::<_, Option<String>>(0)),
        Err(e) => {
            let db = e
                .as_db_error()
                .unwrap_or_else(|| panic!("{sql}: not a server's error: {e}"));
            format!(
                "error {} {:?} detail {:?} hint {:?}",
                db.code().code(),
                db.message(),
                db.detail(),
                db.hint()
            )
        }
    }
}

/// Each refusal (and NULL) of the library, called both ways: the same outcome.
fn assert_same_errors(client: &mut Client, layout: &Layout) {
    let args = layout.args();
    let mut pairs: Vec<(String, String)> = Vec::new();
    for id in [
        "-1",
        "'-9223372036854775808'::bigint",
        "9223372036854775807",
        "NULL",
    ] {
        for f in ["snowflake_timestamp", "snowflake_node_id", "snowflake_seq"] {
            pairs.push((
                format!("SELECT rd.{f}({id}, {args})::text"),
                format!("SELECT public.{f}({id}, {args})::text"),
            ));
        }
        pairs.push((
            format!("SELECT rd.snowflake_decode_jsonb({id}, {args})::text"),
            format!("SELECT public.snowflake_decode_jsonb({id})::text"),
        ));
        pairs.push((
            format!("SELECT rd.snowflake_to_base32({id})"),
            format!("SELECT public.snowflake_to_base32({id})"),
        ));
    }
    let end_ms = layout.epoch_ms + (layout.end_tick() + 1) * layout.unit;
    for ts in [
        format!("'{}'::timestamptz - interval '1 microsecond'", layout.epoch),
        format!("to_timestamp({end_ms}::numeric / 1000)"),
        "'infinity'::timestamptz".to_string(),
        "'-infinity'::timestamptz".to_string(),
        "NULL::timestamptz".to_string(),
    ] {
        for f in ["snowflake_from_timestamp", "snowflake_max_from_timestamp"] {
            pairs.push((
                format!("SELECT rd.{f}({ts}, {args})::text"),
                format!("SELECT public.{f}({ts})::text"),
            ));
        }
    }
    // Layouts no server could run, each reason, and NULL arguments.
    let epoch = format!("'{}'::timestamptz", layout.epoch);
    for bad in [
        format!("{epoch}, 0, 10, 12"),
        format!("{epoch}, 86400001, 10, 12"),
        format!("{epoch}, 1, 32, 12"),
        format!("{epoch}, 1, -1, 12"),
        format!("{epoch}, 1, 10, 0"),
        format!("{epoch}, 1, 10, -3"),
        format!("{epoch}, 1, 31, 31"),
        format!("{epoch}, 1, 24, 23"),
        "'1969-12-31 23:59:59.999+00', 1, 10, 12".to_string(),
        "'10000-01-01 00:00:00+00', 1, 10, 12".to_string(),
        "'4000-01-01 BC', 1, 10, 12".to_string(),
        "'infinity', 1, 10, 12".to_string(),
        "'-infinity', 1, 10, 12".to_string(),
        "'2999-01-01 00:00:00+00', 1, 10, 12".to_string(),
        "NULL, 1, 10, 12".to_string(),
        format!("{epoch}, NULL, 10, 12"),
        format!("{epoch}, 0, NULL, 12"),
    ] {
        for f in [
            "snowflake_timestamp",
            "snowflake_node_id",
            "snowflake_seq",
            "snowflake_decode",
        ] {
            pairs.push((
                format!("SELECT rd.{f}(1, {bad})::text"),
                format!("SELECT public.{f}(1, {bad})::text"),
            ));
        }
    }
    for text in [
        "''",
        "'-'",
        "'12U4'",
        "'u'",
        "'é'",
        "'0x1'",
        "'G000000000000'",
        "'7ZZZZZZZZZZZZ'",
        "'8000000000000'",
        "'00000000000000'",
        "'0000000000000000U'",
        "'U' || repeat('0', 20)",
        "repeat('0', 13) || 'é'",
        "repeat('0', 14) || 'é'",
        "repeat('0', 100)",
        "repeat('é', 70)",
        "'0ere-fnxv-y0801'",
        "'oIl'",
        "NULL",
    ] {
        pairs.push((
            format!("SELECT rd.snowflake_from_base32({text})::text"),
            format!("SELECT public.snowflake_from_base32({text})::text"),
        ));
    }
    for (sql_side, library) in &pairs {
        assert_eq!(
            outcome(client, sql_side),
            outcome(client, library),
            "{}: {sql_side} against {library}",
            layout.name
        );
    }
}

#[test]
fn the_default_layout_gives_the_librarys_results_and_errors() {
    assert_equal_on(&DEFAULT, ON_EVERY_MAJOR);
}

#[test]
fn a_million_of_the_default_layout_give_the_librarys_results_and_errors() {
    assert_equal_on(&DEFAULT, MILLION);
}

// The four other layouts, a test each: they run side by side rather than one after another.
fn other(name: &str) -> &'static Layout {
    OTHERS.iter().find(|layout| layout.name == name).unwrap()
}

#[test]
fn the_fleet_layout_gives_the_librarys_results_and_errors() {
    assert_equal_on(other("fleet"), PER_OTHER_LAYOUT);
}

#[test]
fn the_bursty_layout_gives_the_librarys_results_and_errors() {
    assert_equal_on(other("bursty"), PER_OTHER_LAYOUT);
}

#[test]
fn the_sonyflake_layout_gives_the_librarys_results_and_errors() {
    assert_equal_on(other("sonyflake"), PER_OTHER_LAYOUT);
}

#[test]
fn the_days_layout_gives_the_librarys_results_and_errors() {
    assert_equal_on(other("days"), PER_OTHER_LAYOUT);
}

/// A copy of the PostgreSQL tree under test without pg_snowflake's library and control file:
/// its programs copied, its library and share folders made of links to every other file, each
/// at the same place relative to the programs as in the tree (PostgreSQL finds them from where
/// its own binary is: bin/../lib in a tree of its own, ../../../share/postgresql/N on Debian).
fn tree_without_the_library(dir: &Path) -> PathBuf {
    let [bin, lib, share] =
        ["--bindir", "--pkglibdir", "--sharedir"].map(|flag| pg_config_value(&pg_config(), flag));
    // The deepest folder holding all three.
    let mut top = bin.clone();
    while !(lib.starts_with(&top) && share.starts_with(&top)) {
        top = top.parent().expect("a common folder").to_path_buf();
    }
    let copy = |path: &Path| dir.join(path.strip_prefix(&top).unwrap());
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(copy(&bin).parent().unwrap()).unwrap();
    run(
        "cp",
        &["-a", bin.to_str().unwrap(), copy(&bin).to_str().unwrap()],
    );
    for folder in [lib.clone(), share.clone(), share.join("extension")] {
        std::fs::create_dir_all(copy(&folder)).unwrap();
        for entry in std::fs::read_dir(&folder).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            let ours = name == "pg_snowflake.so"
                || name == "pg_snowflake.control"
                || name.starts_with("pg_snowflake--");
            // share/extension is a folder of its own, filled on the next round.
            let made_here = entry.path() == share.join("extension");
            if !ours && !made_here {
                std::os::unix::fs::symlink(entry.path(), copy(&folder).join(&name)).unwrap();
            }
        }
    }
    run("chmod", &["-R", "a+rX", dir.to_str().unwrap()]);
    copy(&bin).join("pg_config")
}

#[test]
fn it_runs_where_the_library_is_absent_installed_by_a_role_that_is_no_superuser() {
    let tree = PathBuf::from(format!("/tmp/pgsf-nolib-{}", std::process::id()));
    let bare = Server::start(
        "read-nolib",
        Config::default().postgres(tree_without_the_library(&tree)),
    );
    let mut admin = bare.connect();
    // The library is not there to load, nor the extension that needs it.
    for refused in ["LOAD 'pg_snowflake'", "CREATE EXTENSION pg_snowflake"] {
        let error = admin.batch_execute(refused).expect_err(refused);
        assert!(
            describe(&error).contains("could not access file")
                || describe(&error).contains("is not available"),
            "{refused}: {}",
            describe(&error)
        );
    }
    admin
        .batch_execute("CREATE ROLE reader LOGIN; GRANT CREATE ON DATABASE postgres TO reader")
        .unwrap();
    let mut reader = bare.connect_as("reader");
    reader
        .batch_execute(
            "CREATE SCHEMA snowflake; CREATE EXTENSION pg_snowflake_read SCHEMA snowflake",
        )
        .unwrap_or_else(|e| panic!("CREATE EXTENSION as reader: {}", describe(&e)));
    // Trusted: the extension is the reader's, its functions the bootstrap superuser's.
    let owners: String = one(
        &mut reader,
        "SELECT e.extowner::regrole::text || ' ' || string_agg(DISTINCT p.proowner::regrole::text, ',')
         FROM pg_extension e JOIN pg_depend d ON d.refobjid = e.oid AND d.deptype = 'e'
         JOIN pg_proc p ON p.oid = d.objid WHERE e.extname = 'pg_snowflake_read' GROUP BY e.extowner",
    );
    assert_eq!(owners, "reader postgres");
    // Each function the library has, with the library's volatility and parallel safety.
    let unlike: i64 = one(
        &mut reader,
        "SELECT count(*) FROM pg_proc WHERE pronamespace = 'snowflake'::regnamespace
         AND proname NOT LIKE 'snowflake_read_%' AND (provolatile, proparallel) <> ('i', 's')",
    );
    assert_eq!(unlike, 0);
    // And a comment each, which psql's \df+ shows.
    let uncommented: i64 = one(
        &mut reader,
        "SELECT count(*) FROM pg_proc WHERE pronamespace = 'snowflake'::regnamespace
         AND proname NOT LIKE 'snowflake_read_%' AND obj_description(oid, 'pg_proc') IS NULL",
    );
    assert_eq!(uncommented, 0);
    // The same file as a plain psql script, in a schema the reader picks.
    let script = repo_root().join("sql/pg_snowflake_read--0.7.0.sql");
    run(
        pg_bin("psql"),
        &[
            &bare.conninfo_as("reader", "postgres"),
            "-X",
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            "CREATE SCHEMA plain",
            "-c",
            "SET search_path = plain",
            "-f",
            script.to_str().unwrap(),
        ],
    );
    // In an index, inlined: the plan reads the index for a range of times.
    reader
        .batch_execute(
            "CREATE SCHEMA app; CREATE TABLE app.events (id bigint PRIMARY KEY);
             INSERT INTO app.events SELECT snowflake.snowflake_from_timestamp('2026-01-01+00') + i::bigint * 4194304
                                FROM generate_series(1, 10000) i;
             CREATE INDEX ON app.events (snowflake.snowflake_timestamp(id));
             ANALYZE app.events",
        )
        .unwrap();
    let plan: String = reader
        .query(
            "EXPLAIN SELECT * FROM app.events WHERE snowflake.snowflake_timestamp(id)
                 BETWEEN '2026-01-01 00:00:01+00' AND '2026-01-01 00:00:02+00'",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get::<_, String>(0) + "\n")
        .collect();
    assert!(plan.contains("Index"), "{plan}");
    // A digest of 100,000 IDs' decodings here, and with the library on another server (the
    // million-ID comparisons above run on the library's servers).
    let digest = |schema: &str| {
        format!(
            "SELECT md5(string_agg(({schema}.snowflake_timestamp(id), {schema}.snowflake_node_id(id),
                                    {schema}.snowflake_seq(id), {schema}.snowflake_decode_jsonb(id),
                                    {schema}.snowflake_to_base32(id))::text, ';' ORDER BY i))
             FROM (SELECT i, (hashint8extended(i, 9) & 9223372036854775807) >> 22 << 22
                             | (hashint8extended(i, 10) & 4194303) AS id
                   FROM generate_series(1, 100000) i) s
             WHERE id >> 22 <= 2199023255551"
        )
    };
    let started = Instant::now();
    let without: Vec<String> = ["snowflake", "plain"]
        .iter()
        .map(|schema| one(&mut reader, &digest(schema)))
        .collect();
    let library = Server::start("read-library", Config::node(1));
    let with: String = one(&mut library.connect(), &digest("public"));
    eprintln!(
        "digests of 100,000 IDs: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(without, vec![with.clone(), with]);
    drop(bare);
    let _ = std::fs::remove_dir_all(&tree);
}
