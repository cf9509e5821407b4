//! Configurable layouts against real servers: several layouts generate, decode and order
//! correctly; settings that cannot work stop the server with the reason; a server refuses to
//! start under another layout than its IDs were made with; `sequence_spread` spreads `id % 16`.

use snowflake_it::{assert_error, strictly_increasing, take_ids, Config, Server};

/// (name, postgresql.conf lines, node id, epoch, unit ms, node bits, sequence bits)
type Preset = (
    &'static str,
    [&'static str; 4],
    i32,
    &'static str,
    i32,
    i32,
    i32,
);

const PRESETS: [Preset; 3] = [
    (
        "seconds",
        [
            "pg_snowflake.epoch = '2020-01-01 00:00:00+00'",
            "pg_snowflake.time_unit_ms = 1000",
            "pg_snowflake.node_bits = 22",
            "pg_snowflake.sequence_bits = 9",
        ],
        4_000_000,
        "2020-01-01 00:00:00+00",
        1000,
        22,
        9,
    ),
    (
        "bursty",
        [
            "pg_snowflake.epoch = '2024-01-01'",
            "pg_snowflake.time_unit_ms = 1",
            "pg_snowflake.node_bits = 8",
            "pg_snowflake.sequence_bits = 16",
        ],
        200,
        "2024-01-01 00:00:00+00",
        1,
        8,
        16,
    ),
    (
        "sonyflake",
        [
            "pg_snowflake.epoch = '2024-01-01T00:00:00Z'",
            "pg_snowflake.time_unit_ms = 10",
            "pg_snowflake.node_bits = 16",
            "pg_snowflake.sequence_bits = 8",
        ],
        65_000,
        "2024-01-01 00:00:00+00",
        10,
        16,
        8,
    ),
];

#[test]
fn three_layouts_generate_decode_and_order() {
    for (name, settings, node, epoch, unit, node_bits, seq_bits) in PRESETS {
        let config = settings
            .iter()
            .fold(Config::node(node), |config, line| config.setting(line));
        let server = Server::start(name, config);
        // The seconds layout makes 512 IDs a second: ask for a little more than that.
        let ids = take_ids(&mut server.connect(), 1_500, 100);
        assert!(strictly_increasing(&ids), "{name}");
        let mut client = server.connect();
        let row = client
            .query_one(
                "SELECT bool_and(snowflake_node_id(id) = $2),
                        bool_and(snowflake_timestamp(id) = snowflake_timestamp(id, $3::text::timestamptz, $4, $5, $6)
                                 AND snowflake_node_id(id) = snowflake_node_id(id, $3::text::timestamptz, $4, $5, $6)
                                 AND snowflake_seq(id) = snowflake_seq(id, $3::text::timestamptz, $4, $5, $6)),
                        max(abs(extract(epoch FROM snowflake_timestamp(id) - now())))::float8,
                        (SELECT layout FROM snowflake_stats())
                 FROM unnest($1::bigint[]) id",
                &[&ids, &node, &epoch, &unit, &node_bits, &seq_bits],
            )
            .unwrap();
        let (right_node, explicit_agrees, off_s, layout): (bool, bool, f64, String) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        println!("{name}: {layout}; 1500 IDs, node {node}, at most {off_s:.3} s from now()");
        assert!(right_node, "{name}");
        assert!(explicit_agrees, "{name}");
        assert!(off_s < 5.0, "{name}: {off_s} s");
        assert!(layout.starts_with(&format!("{} bits of {unit} ms", 63 - node_bits - seq_bits)));
    }
}

/// Starts a server with these settings, expecting it to refuse; returns its log.
fn refused(name: &str, settings: &[&str]) -> String {
    let config = settings
        .iter()
        .fold(Config::node(1), |config, line| config.setting(line));
    let server = Server::init(name, config);
    server
        .try_start()
        .expect_err("a server with an invalid layout must not start")
}

#[test]
fn layout_settings_that_cannot_work_stop_the_server_with_the_reason() {
    let cases: [(&[&str], &[&str]); 4] = [
        (
            &["pg_snowflake.time_unit_ms = 0"],
            &[
                "FATAL:  invalid value for parameter \"pg_snowflake.time_unit_ms\": \"0\"",
                "DETAIL:  It must be a whole number from 1 to 86400000.",
            ],
        ),
        (
            &["pg_snowflake.node_bits = 40"],
            &[
                "FATAL:  invalid value for parameter \"pg_snowflake.node_bits\": \"40\"",
                "DETAIL:  It must be a whole number from 0 to 31.",
            ],
        ),
        (
            &["pg_snowflake.epoch = 'yesterday'"],
            &[
                "FATAL:  invalid value for parameter \"pg_snowflake.epoch\": \"yesterday\"",
                "DETAIL:  \"yesterday\" is not a UTC timestamp like \"2024-01-01 00:00:00+00\" or \"2024-01-01\"",
            ],
        ),
        (
            &["pg_snowflake.epoch = '2999-01-01'"],
            &[
                "FATAL:  invalid snowflake layout",
                "DETAIL:  The layout is invalid: the epoch 2999-01-01 00:00:00.000 UTC is in the future.",
                "HINT:  Choose pg_snowflake.epoch, time_unit_ms, node_bits and sequence_bits so that the time field covers the present; see \"Layouts\" in pg_snowflake's README.",
            ],
        ),
    ];
    for (i, (settings, expected)) in cases.iter().enumerate() {
        let log = refused(&format!("badlayout{i}"), settings);
        for line in *expected {
            assert!(
                log.contains(line),
                "{settings:?}: expected {line:?} in:\n{log}"
            );
        }
    }
    // A layout whose time field has already run out (19 bits of ms: 8 minutes) starts, and
    // says so when asked for an ID.
    let short = Server::start(
        "shortlayout",
        Config::node(1)
            .setting("pg_snowflake.node_bits = 22")
            .setting("pg_snowflake.sequence_bits = 22"),
    );
    let err = short
        .connect()
        .query_one("SELECT snowflake_nextval()", &[])
        .unwrap_err();
    assert_error(
        &err,
        "2200H",
        "snowflake time field is exhausted",
        Some("The time field of this layout ends at 2024-01-01 00:08:44.287 UTC."),
        None,
    );
}

#[test]
fn a_server_refuses_to_start_under_another_layout_than_its_ids() {
    let server = Server::start("relayout", Config::node(3));
    take_ids(&mut server.connect(), 100, 100);
    server.stop();
    let conf = server.data_file("postgresql.conf");
    server.as_postgres(&format!("echo 'pg_snowflake.time_unit_ms = 10' >> {conf}"));
    let log = server
        .try_start()
        .expect_err("a changed layout must not start");
    for line in [
        "FATAL:  the snowflake layout differs from the one this server's IDs were made with",
        "DETAIL:  The state file records the layout \"41 bits of 1 ms since 2024-01-01 00:00:00.000 UTC | 10 bits node | 12 bits sequence\"; the settings give \"41 bits of 10 ms since 2024-01-01 00:00:00.000 UTC | 10 bits node | 12 bits sequence\".",
        "HINT:  Restore the previous pg_snowflake layout settings.",
    ] {
        assert!(log.contains(line), "expected {line:?} in:\n{log}");
    }
    server.as_postgres(&format!("sed -i '$d' {conf}"));
    server.start_again();
    assert_eq!(take_ids(&mut server.connect(), 10, 10).len(), 10);
}

/// `id % 16` over `count` IDs made one per millisecond or slower.
fn low_rate_buckets(server: &Server, count: i32) -> [i64; 16] {
    let mut buckets = [0; 16];
    for row in server
        .connect()
        .query(
            "SELECT snowflake_nextval() % 16, count(*)
             FROM generate_series(1, $1) g, LATERAL (SELECT pg_sleep(0.0011 + g * 0)) pause
             GROUP BY 1",
            &[&count],
        )
        .unwrap()
    {
        buckets[row.get::<_, i64>(0) as usize] = row.get(1);
    }
    buckets
}

#[test]
fn sequence_spread_spreads_id_mod_16_at_low_rates() {
    let spread = Server::start(
        "spread",
        Config::node(1).setting("pg_snowflake.sequence_spread = 16"),
    );
    // 100 whole turns of the cycle of 16 (past the 256 a byte-wide counter would wrap at): one
    // ID too many or too few in any bucket fails, as with any longer run.
    let buckets = low_rate_buckets(&spread, 1_600);
    println!("sequence_spread = 16, 1,600 IDs one per ms: id % 16 buckets {buckets:?}");
    // One ID per tick: each tick starts one step further round the cycle of 16.
    assert_eq!(buckets, [100; 16]);

    let plain = Server::start("nospread", Config::node(1));
    let buckets = low_rate_buckets(&plain, 1_000);
    println!("without it, 1,000 IDs one per ms: id % 16 buckets {buckets:?}");
    assert_eq!(buckets.iter().filter(|&&b| b > 0).count(), 1, "{buckets:?}");
}
