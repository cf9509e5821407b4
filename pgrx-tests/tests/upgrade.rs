//! The upgrade path. A database with the first release (0.1.0) and data in it is updated with
//! `ALTER EXTENSION pg_snowflake UPDATE`: its data must keep its meaning, the new functions must
//! work, and — the decisive check — the extension must then be exactly what a fresh
//! `CREATE EXTENSION pg_snowflake` gives in another database of the same server, member by
//! member: a function added to the Rust code without its line in the upgrade script, or a
//! changed volatility, strictness or comment, fails here with the difference spelt out.
//!
//! The servers need `sql/pg_snowflake--0.1.0.sql` installed, which `./dev test` does.

use postgres::Client;
use snowflake_it::{cargo_version, describe, one, repo_root, strictly_increasing, Config, Server};
use std::collections::{BTreeMap, BTreeSet};

const FIRST_RELEASE: &str = "0.1.0";
const GUARD: &str = r#"\echo Use "ALTER EXTENSION pg_snowflake UPDATE" to load this file. \quit"#;

/// Every property of every member of the extension, as (member, property) → value.
///
/// Functions: everything `pg_proc` says about them (arguments with defaults, result, kind,
/// volatility, strictness, parallel safety, language, source, library, SQL body, cost, rows,
/// settings, privileges…) and their comment. Every other member (types, casts, operators,
/// tables…): that it exists, what Postgres calls it, and its comment. The extension itself:
/// schema, relocatability and configuration tables (what pg_dump dumps).
const MEMBERS: &str = r#"
WITH ext AS (SELECT * FROM pg_extension WHERE extname = 'pg_snowflake'),
members AS (
    SELECT d.classid, d.objid, d.objsubid
    FROM pg_depend d, ext
    WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e'
),
functions AS (
    SELECT format('function %s(%s)', p.proname, pg_get_function_identity_arguments(p.oid))
               AS member, p.*
    FROM members m JOIN pg_proc p ON m.classid = 'pg_proc'::regclass AND m.objid = p.oid
)
SELECT member, property, value FROM functions, LATERAL (VALUES
    ('schema', pronamespace::regnamespace::text),
    ('arguments', pg_get_function_arguments(oid)),
    ('result', pg_get_function_result(oid)),
    ('kind', CASE prokind WHEN 'f' THEN 'function' WHEN 'p' THEN 'procedure'
                          WHEN 'a' THEN 'aggregate' WHEN 'w' THEN 'window' END),
    ('volatility', CASE provolatile WHEN 'i' THEN 'IMMUTABLE' WHEN 's' THEN 'STABLE'
                                    ELSE 'VOLATILE' END),
    ('strict', CASE WHEN proisstrict THEN 'STRICT' ELSE 'CALLED ON NULL INPUT' END),
    ('parallel', CASE proparallel WHEN 's' THEN 'PARALLEL SAFE' WHEN 'r' THEN 'PARALLEL RESTRICTED'
                                  ELSE 'PARALLEL UNSAFE' END),
    ('language', (SELECT lanname::text FROM pg_language l WHERE l.oid = prolang)),
    ('source', prosrc),
    ('library', probin),
    ('sql body', pg_get_function_sqlbody(oid)),
    ('returns set', proretset::text),
    ('cost', procost::text),
    ('rows', prorows::text),
    ('security definer', prosecdef::text),
    ('leakproof', proleakproof::text),
    ('support function', prosupport::text),
    ('settings', proconfig::text),
    ('privileges', proacl::text),
    ('comment', obj_description(oid, 'pg_proc'))
) AS v(property, value)
UNION ALL
SELECT format('%s %s', o.type, o.identity), v.property, v.value
FROM members m, pg_identify_object(m.classid, m.objid, m.objsubid) o, LATERAL (VALUES
    ('exists', 'yes'),
    ('comment', (SELECT description FROM pg_description c
                 WHERE c.classoid = m.classid AND c.objoid = m.objid AND c.objsubid = m.objsubid))
) AS v(property, value)
WHERE m.classid <> 'pg_proc'::regclass
UNION ALL
SELECT 'extension pg_snowflake', v.property, v.value FROM ext, LATERAL (VALUES
    ('schema', extnamespace::regnamespace::text),
    ('relocatable', extrelocatable::text),
    ('configuration tables', (SELECT string_agg(c::regclass::text, ', ') FROM unnest(extconfig) c)),
    ('configuration conditions', extcondition::text)
) AS v(property, value)
"#;

type Members = BTreeMap<(String, String), Option<String>>;

fn members(client: &mut Client) -> Members {
    client
        .query(MEMBERS, &[])
        .unwrap_or_else(|e| panic!("listing the extension's members: {}", describe(&e)))
        .into_iter()
        .map(|row| ((row.get(0), row.get(1)), row.get(2)))
        .collect()
}

/// What differs between the updated and the fresh extension, one line per member or property;
/// empty when they are the same.
fn differences(updated: &Members, fresh: &Members) -> Vec<String> {
    let names = |m: &Members| {
        m.keys()
            .map(|(member, _)| member.clone())
            .collect::<BTreeSet<_>>()
    };
    let (updated_names, fresh_names) = (names(updated), names(fresh));
    let show = |v: Option<&Option<String>>| match v {
        Some(Some(text)) => format!("{text:?}"),
        Some(None) => "NULL".to_string(),
        None => "(no such property)".to_string(),
    };
    let mut lines = Vec::new();
    for name in fresh_names.difference(&updated_names) {
        lines.push(format!(
            "{name}: missing after the update (a fresh install has it)"
        ));
    }
    for name in updated_names.difference(&fresh_names) {
        lines.push(format!(
            "{name}: left over after the update (a fresh install does not have it)"
        ));
    }
    for name in updated_names.intersection(&fresh_names) {
        let properties: BTreeSet<&String> = updated
            .keys()
            .chain(fresh.keys())
            .filter(|(member, _)| member == name)
            .map(|(_, property)| property)
            .collect();
        for property in properties {
            let key = (name.clone(), property.clone());
            let (u, f) = (updated.get(&key), fresh.get(&key));
            if u != f {
                lines.push(format!(
                    "{name}: {property}: after the update {}, fresh install {}",
                    show(u),
                    show(f)
                ));
            }
        }
    }
    lines
}

/// The upgrade scripts in sql/, as from-version → (to-version, file name).
fn upgrade_scripts() -> BTreeMap<String, (String, String)> {
    let dir = repo_root().join("sql");
    std::fs::read_dir(&dir)
        .expect("sql/ exists")
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter_map(|name| {
            let versions = name.strip_prefix("pg_snowflake--")?.strip_suffix(".sql")?;
            let (from, to) = versions.split_once("--")?;
            Some((from.to_string(), (to.to_string(), name.clone())))
        })
        .collect()
}

/// The upgrade scripts from the first release to the current version, in order.
fn upgrade_chain() -> Vec<String> {
    let (scripts, target) = (upgrade_scripts(), cargo_version());
    let mut version = FIRST_RELEASE.to_string();
    let mut chain = Vec::new();
    while version != target {
        let Some((next, name)) = scripts.get(&version) else {
            panic!(
                "no upgrade script from {version} on the way from {FIRST_RELEASE} to {target} \
                 (the Cargo.toml version): add sql/pg_snowflake--{version}--{target}.sql \
                 (scripts found: {:?})",
                scripts.values().map(|(_, name)| name).collect::<Vec<_>>()
            );
        };
        assert!(
            chain.len() < scripts.len(),
            "the upgrade scripts form a loop"
        );
        chain.push(name.clone());
        version = next.clone();
    }
    chain
}

#[test]
fn upgrade_scripts_lead_from_the_first_release_to_the_cargo_version_with_the_guard() {
    let chain = upgrade_chain();
    assert!(!chain.is_empty() || cargo_version() == FIRST_RELEASE);
    for name in upgrade_scripts().values().map(|(_, name)| name) {
        let text = std::fs::read_to_string(repo_root().join("sql").join(name)).unwrap();
        assert_eq!(
            text.lines().next(),
            Some(GUARD),
            "sql/{name} must start with the guard line"
        );
    }
    let base = repo_root().join(format!("sql/pg_snowflake--{FIRST_RELEASE}.sql"));
    assert!(base.exists(), "{} is missing", base.display());
}

/// (id, ts, node_id, seq) of every row, in id order.
fn decoded(client: &mut Client) -> Vec<(i64, String, i32, i32)> {
    client
        .query(
            "SELECT id, (d).ts::text, (d).node_id, (d).seq \
             FROM (SELECT id, snowflake_decode(id) AS d FROM orders) o ORDER BY id",
            &[],
        )
        .expect("decoding the orders")
        .iter()
        .map(|row| (row.get(0), row.get(1), row.get(2), row.get(3)))
        .collect()
}

fn version(client: &mut Client) -> String {
    client
        .query_one(
            "SELECT extversion FROM pg_extension WHERE extname = 'pg_snowflake'",
            &[],
        )
        .expect("pg_snowflake is installed")
        .get(0)
}

fn run(client: &mut Client, sql: &str) {
    client
        .batch_execute(sql)
        .unwrap_or_else(|e| panic!("{sql}: {}", describe(&e)));
}

#[test]
fn update_from_the_first_release_keeps_the_data_and_equals_a_fresh_install() {
    let current = cargo_version();
    let server = Server::start("upgrade", Config::node(1));
    server.execute("CREATE DATABASE updated");
    server.execute("CREATE DATABASE fresh");

    // A 0.1.0 installation in use: a table keyed by snowflake_nextval() and an index on a
    // decoder, both of which depend on the extension's functions.
    let mut old = server.connect_db("updated");
    run(
        &mut old,
        &format!(
            "CREATE EXTENSION pg_snowflake VERSION '{FIRST_RELEASE}';
             CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text);
             INSERT INTO orders (item) SELECT 'old ' || i FROM generate_series(1, 1000) i;
             CREATE INDEX orders_made ON orders (snowflake_timestamp(id));"
        ),
    );
    assert_eq!(version(&mut old), FIRST_RELEASE);
    let proc_count =
        "SELECT count(*) FROM pg_proc WHERE proname IN ('snowflake_stats', 'snowflake_adopt')";
    assert_eq!(
        one::<i64>(&mut old, proc_count),
        0,
        "0.1.0 has no 0.2.0 functions"
    );
    let before = decoded(&mut old);
    let old_max = before.last().unwrap().0;

    let started = std::time::Instant::now();
    run(&mut old, "ALTER EXTENSION pg_snowflake UPDATE");
    println!(
        "ALTER EXTENSION pg_snowflake UPDATE ({FIRST_RELEASE} → {current} through {:?}) took {:?}",
        upgrade_chain(),
        started.elapsed()
    );
    assert_eq!(
        version(&mut old),
        current,
        "updated to the Cargo.toml version"
    );
    assert_eq!(
        one::<String>(
            &mut old,
            "SELECT default_version FROM pg_available_extensions WHERE name = 'pg_snowflake'"
        ),
        current
    );

    // The decisive check, first so that its message explains any failure below: member for
    // member, the updated extension is a fresh one.
    let mut fresh = server.connect_db("fresh");
    run(&mut fresh, "CREATE EXTENSION pg_snowflake");
    let (updated_members, fresh_members) = (members(&mut old), members(&mut fresh));
    assert!(
        fresh_members.len() > 20,
        "the member query found too little: {fresh_members:?}"
    );
    let differences = differences(&updated_members, &fresh_members);
    assert!(
        differences.is_empty(),
        "pg_snowflake {FIRST_RELEASE} updated by ALTER EXTENSION UPDATE differs from a fresh \
         CREATE EXTENSION of {current}; fix the upgrade script (sql/{}):\n  {}",
        upgrade_chain().last().map_or("none", String::as_str),
        differences.join("\n  ")
    );

    // The old rows mean what they meant, and the index on the decoder still answers.
    assert_eq!(decoded(&mut old), before, "old rows decode the same");
    run(&mut old, "SET enable_seqscan = off");
    let by_index = "SELECT count(*) FROM orders WHERE snowflake_timestamp(id) <= now()";
    let plan: String = old
        .query(&format!("EXPLAIN {by_index}"), &[])
        .unwrap()
        .iter()
        .map(|row| row.get::<_, String>(0) + "\n")
        .collect();
    assert!(plan.contains("orders_made"), "the index is used:\n{plan}");
    assert_eq!(one::<i64>(&mut old, by_index), 1000);
    run(&mut old, "RESET enable_seqscan");

    // New IDs follow the old ones; the new functions work.
    run(
        &mut old,
        "INSERT INTO orders (item) SELECT 'new ' || i FROM generate_series(1, 100) i",
    );
    let new_min: i64 = one(
        &mut old,
        "SELECT min(id) FROM orders WHERE item LIKE 'new %'",
    );
    assert!(new_min > old_max, "new ID {new_min} <= old ID {old_max}");
    let batch: Vec<i64> = old
        .query("SELECT snowflake_nextval_batch(5)", &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(batch.len(), 5);
    assert!(
        strictly_increasing(&batch) && batch[0] > new_min,
        "{batch:?}"
    );
    assert_eq!(
        one::<Option<i32>>(&mut old, "SELECT node_id FROM snowflake_stats()"),
        Some(1)
    );
    assert_eq!(
        one::<i64>(
            &mut old,
            "SELECT count(*) FROM orders WHERE id >= snowflake_from_timestamp(now() - interval '1 hour') \
             AND id <= snowflake_max_from_timestamp(now())"
        ),
        1100
    );
    run(
        &mut old,
        "CREATE TABLE legacy (id serial PRIMARY KEY, item text);
         INSERT INTO legacy (item) VALUES ('a'), ('b');
         SELECT snowflake_adopt('legacy');
         INSERT INTO legacy (item) VALUES ('c');",
    );
    assert!(one::<i64>(&mut old, "SELECT max(id) FROM legacy") > old_max);
}
