//! A harness for out-of-process tests: real PostgreSQL 15 servers on 127.0.0.1, each with its
//! own data directory, started and stopped through `scripts/pgserver` (the same script the demo
//! uses), with the pg_snowflake installed in the system PostgreSQL.

use postgres::{Client, NoTls};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The repository's top directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("pgrx-tests/ lies inside the repository")
        .to_path_buf()
}

fn pgserver(args: &[&str]) -> Output {
    let output = Command::new(repo_root().join("scripts/pgserver"))
        .args(args)
        .output()
        .expect("scripts/pgserver runs");
    assert!(
        output.status.success(),
        "scripts/pgserver {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Ports are handed out from a per-process counter, then checked free by `pgserver free-port`,
/// so that servers of one test run never race for the same port.
fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let base = 20000 + (std::process::id() % 200) * 100 + NEXT.fetch_add(7, Ordering::Relaxed);
    let out = pgserver(&["free-port", &base.to_string()]);
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("free-port prints a port number")
}

/// How a test server is configured.
pub struct Config {
    /// Preload pg_snowflake through shared_preload_libraries.
    pub preload: bool,
    /// `pg_snowflake.node_id`, or None to leave it unset.
    pub node_id: Option<i32>,
}

impl Config {
    /// Preloaded, with the given node id: what every server of a deployment looks like.
    pub fn node(node_id: i32) -> Self {
        Config {
            preload: true,
            node_id: Some(node_id),
        }
    }
}

/// A running server; stopped and deleted on drop.
pub struct Server {
    dir: String,
    pub port: u16,
}

impl Server {
    /// Starts a fresh server and, when the library is preloaded, creates the extension in its
    /// `postgres` database.
    pub fn start(name: &str, config: Config) -> Server {
        Server::start_with(name, config, &[])
    }

    /// Like [`Server::start`], with more postgresql.conf lines (e.g. `"wal_level = logical"`).
    pub fn start_with(name: &str, config: Config, extra: &[&str]) -> Server {
        let preload = config.preload;
        let server = Server::init_with(name, config, extra);
        if let Err(log) = server.try_start() {
            panic!("the server did not start:\n{log}");
        }
        if preload {
            server
                .connect()
                .batch_execute("CREATE EXTENSION pg_snowflake")
                .expect("CREATE EXTENSION pg_snowflake");
        }
        server
    }

    /// A fresh data directory with this configuration, not started yet.
    pub fn init(name: &str, config: Config) -> Server {
        Server::init_with(name, config, &[])
    }

    /// Like [`Server::init`], with more postgresql.conf lines.
    pub fn init_with(name: &str, config: Config, extra: &[&str]) -> Server {
        let port = free_port();
        let dir = format!("/tmp/pgsf-{name}-{port}");
        pgserver(&["destroy", &dir]);
        let mut settings = vec![];
        if config.preload {
            settings.push("shared_preload_libraries = 'pg_snowflake'".to_string());
        }
        if let Some(node) = config.node_id {
            settings.push(format!("pg_snowflake.node_id = {node}"));
        }
        settings.extend(extra.iter().map(|line| line.to_string()));
        let port_text = port.to_string();
        let mut args = vec!["init", dir.as_str(), port_text.as_str()];
        args.extend(settings.iter().map(String::as_str));
        pgserver(&args);
        Server { dir, port }
    }

    /// Starts the server; on failure returns what it printed and logged.
    pub fn try_start(&self) -> Result<(), String> {
        let output = Command::new(repo_root().join("scripts/pgserver"))
            .args(["start", &self.dir])
            .output()
            .expect("scripts/pgserver runs");
        if output.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&output.stderr).into_owned())
        }
    }

    /// A new connection to the `postgres` database as the superuser.
    pub fn connect(&self) -> Client {
        self.connect_as("postgres")
    }

    pub fn connect_as(&self, user: &str) -> Client {
        Client::connect(
            &format!(
                "host=127.0.0.1 port={} user={user} dbname=postgres",
                self.port
            ),
            NoTls,
        )
        .unwrap_or_else(|e| panic!("connecting to the server on port {}: {e}", self.port))
    }

    /// A new connection to database `dbname` as the superuser.
    pub fn connect_db(&self, dbname: &str) -> Client {
        Client::connect(&self.conninfo(dbname), NoTls)
            .unwrap_or_else(|e| panic!("connecting to {dbname} on port {}: {e}", self.port))
    }

    /// A libpq connection string for database `dbname`, for postgres_fdw, subscriptions and the
    /// client programs.
    pub fn conninfo(&self, dbname: &str) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname={dbname}",
            self.port
        )
    }

    /// The server log, for failure messages.
    pub fn log(&self) -> String {
        String::from_utf8_lossy(&pgserver(&["log", &self.dir]).stdout).into_owned()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = Command::new(repo_root().join("scripts/pgserver"))
            .args(["destroy", &self.dir])
            .output();
    }
}

/// `SELECT snowflake_nextval()` `count` times on one connection, in statements of `batch` IDs,
/// returning the IDs in the order they were made.
pub fn take_ids(client: &mut Client, count: usize, batch: usize) -> Vec<i64> {
    let statement = client
        .prepare("SELECT snowflake_nextval() FROM generate_series(1, $1::int)")
        .expect("prepare");
    let mut ids = Vec::with_capacity(count);
    while ids.len() < count {
        let n = batch.min(count - ids.len()) as i32;
        for row in client
            .query(&statement, &[&n])
            .expect("snowflake_nextval()")
        {
            ids.push(row.get::<_, i64>(0));
        }
    }
    ids
}

/// Starts one server per node id at once (each preloaded, with that node id and the extra
/// settings), named `{name}{node}`: a deployment of shards in a few seconds.
pub fn start_cluster(name: &str, nodes: &[i32], settings: &[&str]) -> Vec<Server> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = nodes
            .iter()
            .map(|&node| {
                scope.spawn(move || {
                    Server::start_with(&format!("{name}{node}"), Config::node(node), settings)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// Polls `done` every 100 ms until it returns true; panics with `what` after `timeout`.
/// Returns how long it took.
pub fn wait_until(timeout: Duration, what: &str, mut done: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    start.elapsed()
}

/// The path of a PostgreSQL 15 client program (pg_dump, pg_restore, psql).
pub fn pg_bin(program: &str) -> PathBuf {
    let pg_config = std::env::var("PG_CONFIG")
        .unwrap_or_else(|_| "/usr/lib/postgresql/15/bin/pg_config".into());
    let out = Command::new(&pg_config)
        .arg("--bindir")
        .output()
        .expect("pg_config runs");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()).join(program)
}
