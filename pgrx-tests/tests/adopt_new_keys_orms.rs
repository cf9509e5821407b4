//! `pg_snowflake.adopt_new_keys` under two real ORMs' own migration commands: Django's
//! `manage.py migrate` (BigAutoField and AutoField keys: identity columns) and Knex's `knex
//! migrate:latest` (increments and bigIncrements: serial and bigserial, and one added by ALTER
//! TABLE … ADD COLUMN), run as their users run them, as subprocesses against a real server
//! whose database has the setting on. After the migrations every key is `bigint DEFAULT
//! snowflake_nextval()` with no sequence left, nothing is left for `snowflake_sequence_keys`,
//! the server's log names each change, and a row inserted through the ORM comes back with a
//! snowflake ID of the server's node id, which the ORM read back itself (RETURNING).
//!
//! The programs are examples/python/adopt_new_keys (Django) and examples/js/adopt_new_keys
//! (Knex). Their packages are the client recipes' (examples/python/requirements.txt,
//! examples/js/package-lock.json): the Python ones from the virtualenv scripts/test/clients
//! makes, else one made here under target/; the npm ones installed into examples/js/node_modules
//! with `npm ci` as scripts/test/clients does, when missing.

use postgres::Client;
use snowflake_it::{repo_root, run, Config, Server};
use std::path::{Path, PathBuf};
use std::process::Command;

const NODE_ID: i32 = 3;

/// A server with node id 3 and a database `app` with pg_snowflake and the setting on, as a
/// database's owner would set it up.
fn server_with_app_database(name: &str) -> Server {
    let server = Server::start(name, Config::node(NODE_ID));
    server.execute("CREATE DATABASE app");
    server.execute("ALTER DATABASE app SET pg_snowflake.adopt_new_keys = on");
    server
        .connect_db("app")
        .batch_execute("CREATE EXTENSION pg_snowflake")
        .unwrap();
    server
}

fn database_url(server: &Server) -> String {
    format!("postgresql://postgres@127.0.0.1:{}/app", server.port)
}

/// Runs `program` with `args` in `dir`, DATABASE_URL naming the server's `app`; returns its
/// standard output, panicking with everything it printed when it fails.
fn run_in(dir: &Path, program: &Path, args: &[&str], server: &Server) -> String {
    let output = Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("DATABASE_URL", database_url(server))
        .output()
        .unwrap_or_else(|e| panic!("{} runs: {e}", program.display()));
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "{} {args:?} failed:\n{printed}",
        program.display()
    );
    println!("{} {args:?}:\n{printed}", program.display());
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Every key column of `tables` is bigint DEFAULT snowflake_nextval(), no sequence is left in
/// the database, and `snowflake_sequence_keys` lists nothing.
fn assert_every_key_on_the_generator(app: &mut Client, keys: &[(&str, &str)]) {
    for (table, column) in keys {
        let row = app
            .query_one(
                "SELECT format_type(a.atttypid, a.atttypmod),
                        pg_get_expr(d.adbin, d.adrelid), a.attidentity::text
                 FROM pg_attribute a
                 LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
                 WHERE a.attrelid = $1::text::regclass AND a.attname = $2",
                &[table, column],
            )
            .unwrap_or_else(|e| panic!("{table}.{column}: {e}"));
        let (type_name, default, identity): (String, Option<String>, String) =
            (row.get(0), row.get(1), row.get(2));
        assert_eq!(
            (type_name.as_str(), default.as_deref(), identity.as_str()),
            ("bigint", Some("snowflake_nextval()"), ""),
            "{table}.{column}"
        );
    }
    let sequences: Vec<String> = app
        .query(
            "SELECT c.oid::regclass::text FROM pg_class c WHERE c.relkind = 'S'
             AND c.relnamespace = 'public'::regnamespace",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(sequences.is_empty(), "sequences left: {sequences:?}");
    let left: i64 = app
        .query_one("SELECT count(*) FROM snowflake_sequence_keys", &[])
        .unwrap()
        .get(0);
    assert_eq!(left, 0, "snowflake_sequence_keys still lists columns");
}

/// `id` is a snowflake ID of this server (node id 3, made within the last minute) and the key
/// of a row of `table`.
fn assert_snowflake_row(app: &mut Client, table: &str, id: i64) {
    let row = app
        .query_one(
            &format!(
                "SELECT snowflake_node_id($1), snowflake_timestamp($1) > now() - interval '1 minute',
                        (SELECT count(*) FROM {table} WHERE id = $1)"
            ),
            &[&id],
        )
        .unwrap();
    let (node, recent, rows): (i32, bool, i64) = (row.get(0), row.get(1), row.get(2));
    assert_eq!((node, recent, rows), (NODE_ID, true, 1), "{table} id {id}");
}

/// The server's log says what the trigger changed, one line per column.
fn assert_logged(server: &Server, keys: &[(&str, &str)]) {
    let log = server.log();
    for (table, column) in keys {
        let line = format!(
            "LOG:  pg_snowflake.adopt_new_keys put column \"{column}\" of table public.{table} \
             on snowflake_nextval()"
        );
        assert!(log.contains(&line), "no line {line:?} in the server's log");
    }
}

fn as_id(value: &serde_json::Value) -> i64 {
    match value {
        serde_json::Value::Number(n) => n.as_i64().expect("an i64"),
        // node-postgres gives bigint as a string: 19 digits do not fit a JavaScript number.
        serde_json::Value::String(s) => s.parse().expect("digits"),
        other => panic!("not an id: {other}"),
    }
}

/// A Python with the examples' packages (Django, psycopg): scripts/test/clients' virtualenv,
/// else one made here from examples/python/requirements.txt.
fn python() -> PathBuf {
    let has_django = |python: &Path| {
        Command::new(python)
            .args(["-c", "import django, psycopg"])
            .status()
            .is_ok_and(|status| status.success())
    };
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let clients = home.join(".cache/pg_snowflake/clients/python/bin/python");
    if has_django(&clients) {
        return clients;
    }
    let venv = repo_root().join("target/pgsf-orm-venv");
    let python = venv.join("bin/python");
    if !has_django(&python) {
        run("python3", &["-m", "venv", venv.to_str().unwrap()]);
        let requirements = repo_root().join("examples/python/requirements.txt");
        run(
            &python,
            &[
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "-r",
                requirements.to_str().unwrap(),
            ],
        );
    }
    python
}

/// examples/js/node_modules with Knex and node-postgres, installed by `npm ci` when missing.
fn knex_cli() -> PathBuf {
    let js = repo_root().join("examples/js");
    let cli = js.join("node_modules/knex/bin/cli.js");
    if !cli.exists() || !js.join("node_modules/pg").exists() {
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&js)
            .status()
            .expect("npm runs (Debian's npm)");
        assert!(status.success(), "npm ci in examples/js failed");
    }
    cli
}

#[test]
fn django_migrate_puts_every_new_key_on_the_generator_and_django_reads_back_snowflake_ids() {
    let server = server_with_app_database("django");
    let dir = repo_root().join("examples/python/adopt_new_keys");
    let python = python();
    run_in(&dir, &python, &["manage.py", "migrate"], &server);

    let mut app = server.connect_db("app");
    // 0001: BigAutoField keys (bigint identity); 0002: an AutoField key (integer identity),
    // widened; Django's own table of applied migrations too.
    let keys = [
        ("shop_customer", "id"),
        ("shop_order", "id"),
        ("shop_invoice", "id"),
        ("django_migrations", "id"),
    ];
    assert_every_key_on_the_generator(&mut app, &keys);
    assert_logged(&server, &keys);

    let printed = run_in(&dir, &python, &["insert.py"], &server);
    let ids: serde_json::Value = serde_json::from_str(printed.trim()).expect("one JSON object");
    assert_snowflake_row(&mut app, "shop_customer", as_id(&ids["customer"]));
    assert_snowflake_row(&mut app, "shop_order", as_id(&ids["order"]));
    assert_snowflake_row(&mut app, "shop_invoice", as_id(&ids["invoice"]));
    let bulk: Vec<i64> = ids["bulk"].as_array().unwrap().iter().map(as_id).collect();
    assert_eq!(bulk.len(), 3);
    for id in &bulk {
        assert_snowflake_row(&mut app, "shop_order", *id);
    }
    assert!(bulk.windows(2).all(|w| w[0] < w[1]), "{bulk:?}");

    // Migrating back to zero and forward again: the same.
    run_in(
        &dir,
        &python,
        &["manage.py", "migrate", "shop", "zero"],
        &server,
    );
    run_in(&dir, &python, &["manage.py", "migrate"], &server);
    assert_every_key_on_the_generator(&mut app, &keys);
}

#[test]
fn knex_migrate_latest_puts_every_new_key_on_the_generator_and_knex_reads_back_snowflake_ids() {
    let server = server_with_app_database("knex");
    let dir = repo_root().join("examples/js/adopt_new_keys");
    let cli = knex_cli();
    let node = PathBuf::from("node");
    let knex = |args: &[&str]| {
        let mut all = vec![cli.to_str().unwrap()];
        all.extend_from_slice(args);
        run_in(&dir, &node, &all, &server)
    };
    knex(&["migrate:latest"]);

    let mut app = server.connect_db("app");
    // increments (serial), bigIncrements (bigserial), increments added by ALTER TABLE … ADD
    // COLUMN, and Knex's own tables.
    let keys = [
        ("customers", "id"),
        ("orders", "id"),
        ("orders", "number"),
        ("knex_migrations", "id"),
        ("knex_migrations_lock", "index"),
    ];
    assert_every_key_on_the_generator(&mut app, &keys);
    assert_logged(&server, &keys);

    let printed = run_in(&dir, &node, &["insert.mjs"], &server);
    let ids: serde_json::Value = serde_json::from_str(printed.trim()).expect("one JSON object");
    assert_snowflake_row(&mut app, "customers", as_id(&ids["customer"]));
    assert_snowflake_row(&mut app, "orders", as_id(&ids["order"]));
    let number = as_id(&ids["number"]);
    let node_of_number: i32 = app
        .query_one("SELECT snowflake_node_id($1)", &[&number])
        .unwrap()
        .get(0);
    assert_eq!(node_of_number, NODE_ID, "orders.number {number}");
    let bulk: Vec<i64> = ids["bulk"].as_array().unwrap().iter().map(as_id).collect();
    assert_eq!(bulk.len(), 3);
    for id in &bulk {
        assert_snowflake_row(&mut app, "orders", *id);
    }

    // Rolled back and migrated again: the same.
    knex(&["migrate:rollback", "--all"]);
    knex(&["migrate:latest"]);
    assert_every_key_on_the_generator(&mut app, &keys);
}
