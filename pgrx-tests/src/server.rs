//! [`Config`] and [`Server`]: a throwaway PostgreSQL server driven through `scripts/serve/pgserver`.

use crate::checks::{describe, one, wait_until};
use crate::paths::{pg_config, repo_root, servers_root};
use crate::ports::{lease_port, PortLease};
use postgres::{Client, NoTls};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

fn run_pgserver(args: &[&str], env: &[(&str, String)]) -> Output {
    Command::new(repo_root().join("scripts/serve/pgserver"))
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .expect("scripts/serve/pgserver runs")
}

fn pgserver(args: &[&str]) -> Output {
    pgserver_with(args, &[])
}

fn pgserver_with(args: &[&str], env: &[(&str, String)]) -> Output {
    let output = run_pgserver(args, env);
    assert!(
        output.status.success(),
        "scripts/serve/pgserver {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// How a test server is configured.
#[derive(Clone, Default)]
pub struct Config {
    /// Preload pg_snowflake through shared_preload_libraries.
    pub preload: bool,
    /// `pg_snowflake.node_id`, or None to leave it unset.
    pub node_id: Option<i32>,
    /// More postgresql.conf lines.
    pub settings: Vec<String>,
    /// Run on a fake wall clock starting at this libfaketime offset (e.g. "+0", "-1h").
    pub fake_clock: Option<String>,
    /// Run on a slow disk (the fsync-delay shim), its delay starting at 0 ms.
    pub slow_disk: bool,
    /// Put the data directory on a disk of its own of this many MiB (a tmpfs), which a test can
    /// fill.
    pub small_disk_mb: Option<u32>,

    /// The PostgreSQL to run (its pg_config); None: the one under test, [`pg_config`].
    pub pg_config: Option<PathBuf>,
    /// More initdb options (e.g. "--no-data-checksums").
    pub initdb_args: Vec<String>,
}

impl Config {
    /// Preloaded, with the given node id: what every server of a deployment looks like.
    pub fn node(node_id: i32) -> Self {
        Config {
            preload: true,
            node_id: Some(node_id),
            ..Config::default()
        }
    }

    /// One more postgresql.conf line (e.g. `"wal_level = logical"`).
    pub fn setting(mut self, line: &str) -> Self {
        self.settings.push(line.to_string());
        self
    }

    pub fn fake_clock(mut self, offset: &str) -> Self {
        self.fake_clock = Some(offset.to_string());
        self
    }

    pub fn slow_disk(mut self) -> Self {
        self.slow_disk = true;
        self
    }

    /// The data directory on a disk of its own of `mb` MiB, which a test can fill.
    pub fn small_disk(mut self, mb: u32) -> Self {
        self.small_disk_mb = Some(mb);
        self
    }

    /// Runs the PostgreSQL of this pg_config instead of the one under test.
    pub fn postgres(mut self, pg_config: PathBuf) -> Self {
        self.pg_config = Some(pg_config);
        self
    }

    /// Passes one more option to initdb.
    pub fn initdb_arg(mut self, arg: &str) -> Self {
        self.initdb_args.push(arg.to_string());
        self
    }

    fn pg_config_env(&self) -> Vec<(&'static str, String)> {
        let pg_config = self.pg_config.clone().unwrap_or_else(pg_config);
        let mut env = vec![
            ("PG_CONFIG", pg_config.to_string_lossy().into_owned()),
            ("PGSERVER_INITDB_ARGS", self.initdb_args.join(" ")),
        ];
        if let Some(mb) = self.small_disk_mb {
            env.push(("PGSERVER_DATA_DISK_MB", mb.to_string()));
        }
        env
    }

    fn conf_lines(&self) -> Vec<String> {
        let mut lines = self.settings.clone();
        if self.preload {
            lines.push("shared_preload_libraries = 'pg_snowflake'".to_string());
        }
        if let Some(node) = self.node_id {
            lines.push(format!("pg_snowflake.node_id = {node}"));
        }
        lines
    }
}

/// libfaketime's library (`PGSF_LIBFAKETIME`, exported by `./dev test` from scripts/lib/trees.sh).
fn libfaketime() -> String {
    std::env::var("PGSF_LIBFAKETIME").expect(
        "PGSF_LIBFAKETIME is not set: run the tests through ./dev test, which sets it from \
         scripts/lib/trees.sh",
    )
}

/// The fsync-delay shim, built with `cc` into a directory the `postgres` OS user can read: one
/// per user and version of its source, shared by every test process (a directory per process
/// left a copy in /tmp for each). Each process builds under a name of its own and renames it in
/// place, so that one never loads a library another is still writing.
fn fsync_delay_shim() -> String {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    static BUILT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let source = repo_root().join("pgrx-tests/fsync-delay.c");
            let text = std::fs::read(&source).expect("the shim's source");
            // FNV-1a: the same name in every process for the same source, another for a new one.
            let hash = text.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
                (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
            });
            let uid = std::fs::metadata("/proc/self").expect("/proc/self").uid();
            let dir = format!("/tmp/pgsf-fsync-delay-{uid}-{hash:016x}");
            let library = format!("{dir}/fsync_delay.so");
            if std::path::Path::new(&library).is_file() {
                return library;
            }
            std::fs::create_dir_all(&dir).expect("a directory for the shim");
            let partial = format!("{library}.{}", std::process::id());
            let status = Command::new("cc")
                .args(["-shared", "-fPIC", "-O2", "-o", &partial])
                .arg(&source)
                .arg("-ldl")
                .status()
                .expect("cc runs");
            assert!(status.success(), "building {}", source.display());
            for path in [&dir, &partial] {
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
            std::fs::rename(&partial, &library).expect("the shim renamed in place");
            library
        })
        .clone()
}

/// A server; stopped and deleted on drop. Dropped while its thread panics (a failed test), it
/// first prints its log to stderr (the last `LOG_LINES_OF_A_FAILED_TEST` lines).
pub struct Server {
    name: String,
    dir: String,
    pub port: u16,
    _port_lease: PortLease,
    fake_clock: bool,
    slow_disk: bool,
}

impl Server {
    /// Starts a fresh server and, when the library is preloaded, creates the extension in its
    /// `postgres` database.
    pub fn start(name: &str, config: Config) -> Server {
        let preload = config.preload;
        let server = Server::init(name, config);
        server.start_again();
        if preload {
            server.execute("CREATE EXTENSION pg_snowflake");
        }
        server
    }

    /// A fresh data directory with this configuration, not started yet.
    pub fn init(name: &str, config: Config) -> Server {
        let server = Server::new_dir(name, &config);
        let port = server.port.to_string();
        let lines = config.conf_lines();
        let mut args = vec!["init", server.dir.as_str(), port.as_str()];
        args.extend(lines.iter().map(String::as_str));
        pgserver_with(&args, &config.pg_config_env());
        server.write_fake_clock(&config);
        server
    }

    /// A streaming standby of `primary` (pg_basebackup), started and caught up with it.
    pub fn standby_of(primary: &Server, name: &str, config: Config) -> Server {
        let server = Server::new_dir(name, &config);
        let from = primary.port.to_string();
        let port = server.port.to_string();
        let lines = config.settings.clone();
        let mut args = vec!["standby", from.as_str(), server.dir.as_str(), port.as_str()];
        args.extend(lines.iter().map(String::as_str));
        pgserver_with(&args, &config.pg_config_env());
        server.write_fake_clock(&config);
        server.start_again();
        server
    }

    /// A cold copy of `origin`'s data directory, made while `origin` is stopped (`cp -a`, as a
    /// file-level backup or a snapshot of a stopped server's volume is made): every file, the
    /// state file and the control file included, then its own port and socket and the lines
    /// `settings` (e.g. `cluster_name`) appended to its postgresql.conf. Not started.
    pub fn cold_copy_of(origin: &Server, name: &str, settings: &[&str]) -> Server {
        let server = Server::new_dir(name, &Config::default());
        let mut lines = vec![
            "# added by Server::cold_copy_of".to_string(),
            format!("port = {}", server.port),
            format!("unix_socket_directories = '{}'", server.dir),
        ];
        lines.extend(settings.iter().map(|line| line.to_string()));
        origin.as_postgres(&format!(
            "mkdir -p {to} && cp -a {from}/data {from}/pg_config {to}/ && printf '%s\\n' {lines} >> {to}/data/postgresql.conf",
            from = origin.dir,
            to = server.dir,
            lines = lines
                .iter()
                .map(|l| format!("'{}'", l.replace('\'', "'\\''")))
                .collect::<Vec<_>>()
                .join(" "),
        ));
        server
    }

    /// Makes this primary's commits wait for its one streaming standby (`synchronous_standby_names
    /// = '*'`), once the standby streams, and returns when the standby is synchronous.
    pub fn make_standby_synchronous(&self) {
        let wait_for = |condition: &str| {
            wait_until(Duration::from_secs(30), condition, || {
                self.query_one::<bool>(condition)
            });
        };
        wait_for("SELECT count(*) = 1 FROM pg_stat_replication WHERE state = 'streaming'");
        self.execute("ALTER SYSTEM SET synchronous_standby_names = '*'");
        self.execute("SELECT pg_reload_conf()");
        wait_for("SELECT count(*) = 1 FROM pg_stat_replication WHERE sync_state = 'sync'");
    }

    fn new_dir(name: &str, config: &Config) -> Server {
        let lease = lease_port();
        let port = lease.number;
        // Unique while the lease is held; a directory left by a killed run is replaced.
        let dir = format!("{}/pgsf-{name}-{port}", servers_root());
        pgserver(&["destroy", &dir]);
        Server {
            name: name.to_string(),
            dir,
            port,
            _port_lease: lease,
            fake_clock: config.fake_clock.is_some(),
            slow_disk: config.slow_disk,
        }
    }

    fn write_fake_clock(&self, config: &Config) {
        if let Some(offset) = &config.fake_clock {
            self.set_clock(offset);
        }
        if config.slow_disk {
            self.set_fsync_delay_ms(0);
        }
    }

    /// Sets how long every fsync and fdatasync of the server sleeps first (from its next call).
    pub fn set_fsync_delay_ms(&self, ms: u64) {
        assert!(self.slow_disk, "the server was not started on a slow disk");
        self.write_as_postgres(&self.fsync_delay_file(), &ms.to_string());
    }

    fn fsync_delay_file(&self) -> String {
        format!("{}/fsync_delay_ms", self.dir)
    }

    /// Sets the fake clock's offset from the real time (libfaketime syntax: "+0", "-1h",
    /// "-10m", or "@2093-09-06 15:47:30" for an absolute start). The server sees it within a
    /// second.
    pub fn set_clock(&self, offset: &str) {
        assert!(
            self.fake_clock,
            "the server was not started on a fake clock"
        );
        self.write_as_postgres(&self.clock_file(), offset);
    }

    /// Writes `line` into `path` as the `postgres` OS user.
    fn write_as_postgres(&self, path: &str, line: &str) {
        let mut tee = Command::new("sudo")
            .args(["-u", "postgres", "tee", path])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("sudo tee runs");
        use std::io::Write;
        let mut stdin = tee.stdin.take().unwrap();
        writeln!(stdin, "{line}").unwrap();
        drop(stdin);
        assert!(tee.wait().unwrap().success());
    }

    fn clock_file(&self) -> String {
        format!("{}/faketime", self.dir)
    }

    fn start_env(&self) -> Vec<(&'static str, String)> {
        let (mut preload, mut env) = (vec![], vec![]);
        if self.fake_clock {
            preload.push(libfaketime());
            env.extend([
                format!("FAKETIME_TIMESTAMP_FILE={}", self.clock_file()),
                "FAKETIME_CACHE_DURATION=1".to_string(),
                "FAKETIME_DONT_FAKE_MONOTONIC=1".to_string(),
            ]);
        }
        if self.slow_disk {
            preload.push(fsync_delay_shim());
            env.push(format!("FSYNC_DELAY_FILE={}", self.fsync_delay_file()));
        }
        if preload.is_empty() {
            return vec![];
        }
        env.push(format!("LD_PRELOAD={}", preload.join(":")));
        vec![("PGSERVER_ENV", env.join(" "))]
    }

    /// Starts the server; on failure returns what it printed and logged.
    pub fn try_start(&self) -> Result<(), String> {
        let output = run_pgserver(&["start", &self.dir], &self.start_env());
        if output.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&output.stderr).into_owned())
        }
    }

    /// Starts the (stopped or crashed) server again.
    pub fn start_again(&self) {
        if let Err(log) = self.try_start() {
            panic!("the server did not start:\n{log}");
        }
    }

    /// A clean shutdown.
    pub fn stop(&self) {
        pgserver(&["stop", &self.dir]);
    }

    /// The postmaster's pid (read as the postgres user: the data directory is its own).
    fn postmaster_pid(&self) -> String {
        let pidfile =
            self.output_as_postgres(&format!("head -n 1 {}", self.data_file("postmaster.pid")));
        pidfile.trim().to_string()
    }

    /// Sends `signal` (e.g. "STOP", "CONT") to the postmaster and every process it started.
    pub fn signal_all(&self, signal: &str) {
        let pid = self.postmaster_pid();
        self.as_postgres(&format!(
            "kill -{signal} {pid}; pkill -{signal} -P {pid} || true"
        ));
    }

    /// The pids of the server's renewer (a background worker without a database connection
    /// is not in pg_stat_activity): the postmaster's children titled "pg_snowflake renewer".
    pub fn renewer_pids(&self) -> Vec<u32> {
        let out = Command::new("pgrep")
            .args(["-P", &self.postmaster_pid(), "-f", "pg_snowflake renewer"])
            .output()
            .expect("pgrep runs");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|pid| pid.parse().expect("a pid"))
            .collect()
    }

    /// SIGKILL to the postmaster and every process of the server at once, waited for as after a
    /// power cut; then the dead postmaster's `postmaster.pid` is removed.
    ///
    /// That file names a pid which no process of this server holds any more, and pids come
    /// round again within minutes (`kernel.pid_max` is 32768 on these machines, and tests side
    /// by side start from a hundred to several hundred processes a second: a whole round of
    /// pids in one to five minutes). Left in place, the next `pg_ctl stop` on this
    /// directory — the immediate stop of `scripts/serve/pgserver destroy` when the `Server` is
    /// dropped, or [`Server::stop`] — sends its signal to whatever process holds that pid by
    /// then: as the `postgres` user, any process of any other test's server. A backend that gets
    /// that SIGQUIT exits, its postmaster resets, and every client of that server sees its
    /// connection closed under it (`Broken pipe`). A restart could also be refused when the pid
    /// has become a live postgres process ("lock file already exists"). After a real power cut
    /// the machine reboots and its pids start over; removing the file is what that does to it.
    /// Whether the next start recovers from a crash is read from `pg_control`, not from this
    /// file.
    pub fn crash(&self) {
        pgserver(&["crash", &self.dir]);
        self.as_postgres(&format!("rm -f {}", self.data_file("postmaster.pid")));
    }

    pub fn promote(&self) {
        pgserver(&["promote", &self.dir]);
    }

    /// Runs pg_upgrade from `old` (stopped) into this server (made by [`Server::init`] with the
    /// newer PostgreSQL, never started); returns what pg_upgrade printed, panicking on failure.
    pub fn upgrade_from(&self, old: &Server) -> String {
        self.try_upgrade_from(old)
            .unwrap_or_else(|printed| panic!("pg_upgrade failed:\n{printed}"))
    }

    /// [`Server::upgrade_from`], returning what pg_upgrade printed also when it fails.
    pub fn try_upgrade_from(&self, old: &Server) -> Result<String, String> {
        let out = run_pgserver(&["upgrade", &old.dir, &self.dir], &[]);
        let printed = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if out.status.success() {
            Ok(printed)
        } else {
            Err(printed)
        }
    }

    /// A file in the data directory, as seen by the `postgres` OS user.
    pub fn data_file(&self, name: &str) -> String {
        format!("{}/data/{name}", self.dir)
    }

    /// Runs a shell command as the `postgres` OS user, e.g. to damage a file; panics on failure.
    pub fn as_postgres(&self, script: &str) {
        self.output_as_postgres(script);
    }

    /// What a shell command run as the `postgres` OS user prints (e.g. a file in the server's
    /// directory, which the test's user may not read); panics on failure.
    pub fn output_as_postgres(&self, script: &str) -> String {
        let output = Command::new("sudo")
            .args(["-u", "postgres", "sh", "-c", script])
            .output()
            .expect("sudo runs");
        assert!(
            output.status.success(),
            "{script}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// The directory of the server (its data directory is `data/` in it).
    pub fn dir(&self) -> &str {
        &self.dir
    }

    /// A new connection to the `postgres` database as the superuser.
    pub fn connect(&self) -> Client {
        self.connect_db("postgres")
    }

    /// A new connection once the server accepts them again (after a crash restart, or a
    /// backend's kill -9 and the reinitialisation that follows), within a minute.
    pub fn reconnect(&self) -> Client {
        let mut client = None;
        wait_until(
            Duration::from_secs(60),
            "the server to accept connections",
            || {
                client = Client::connect(&self.conninfo("postgres"), NoTls).ok();
                client.is_some()
            },
        );
        client.unwrap()
    }

    /// A new connection to database `dbname` as the superuser.
    pub fn connect_db(&self, dbname: &str) -> Client {
        Client::connect(&self.conninfo(dbname), NoTls)
            .unwrap_or_else(|e| panic!("connecting to {dbname} on port {}: {e}", self.port))
    }

    /// A new connection to the `postgres` database as role `user`.
    pub fn connect_as(&self, user: &str) -> Client {
        Client::connect(&self.conninfo_as(user, "postgres"), NoTls).unwrap_or_else(|e| {
            panic!(
                "connecting as {user} to the server on port {}: {e}",
                self.port
            )
        })
    }

    /// A libpq connection string for database `dbname` as the superuser, for postgres_fdw,
    /// subscriptions and the client programs.
    pub fn conninfo(&self, dbname: &str) -> String {
        self.conninfo_as("postgres", dbname)
    }

    /// A libpq connection string for database `dbname` as role `user`.
    pub fn conninfo_as(&self, user: &str, dbname: &str) -> String {
        format!(
            "host=127.0.0.1 port={} user={user} dbname={dbname}",
            self.port
        )
    }

    /// Runs SQL on a new connection; panics on error.
    pub fn execute(&self, sql: &str) {
        self.connect()
            .batch_execute(sql)
            .unwrap_or_else(|e| panic!("{sql}: {}", describe(&e)));
    }

    /// The first column of the first row of a query on a new connection.
    pub fn query_one<T: for<'a> postgres::types::FromSql<'a>>(&self, sql: &str) -> T {
        one(&mut self.connect(), sql)
    }

    /// Seconds the server's clock (`now()`, fake or not) is behind the real one.
    pub fn clock_behind_s(&self) -> f64 {
        let server_now: f64 = self.query_one("SELECT extract(epoch FROM now())::float8");
        let real_now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        real_now - server_now
    }

    /// The server log, for failure messages.
    pub fn log(&self) -> String {
        String::from_utf8_lossy(&pgserver(&["log", &self.dir]).stdout).into_owned()
    }
}

/// How much of each server's log a failed test prints: its last lines.
const LOG_LINES_OF_A_FAILED_TEST: usize = 400;

impl Server {
    /// Prints the server's log (its last `LOG_LINES_OF_A_FAILED_TEST` lines) to stderr,
    /// between lines naming the server, its port and its directory; never panics (it runs while
    /// a failed test unwinds, where a second panic would abort the whole test process).
    fn print_log_of_a_failed_test(&self) {
        let (name, port, dir) = (&self.name, self.port, &self.dir);
        let read = Command::new(repo_root().join("scripts/serve/pgserver"))
            .args(["log", dir])
            .output();
        let log = match read {
            Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).into_owned(),
            Ok(out) => {
                let said = String::from_utf8_lossy(&out.stderr);
                eprintln!("==== server {name} (port {port}, {dir}): its log unreadable: {said}");
                return;
            }
            Err(e) => {
                eprintln!(
                    "==== server {name} (port {port}, {dir}): scripts/serve/pgserver log: {e}"
                );
                return;
            }
        };
        let lines: Vec<&str> = log.lines().collect();
        let shown = &lines[lines.len().saturating_sub(LOG_LINES_OF_A_FAILED_TEST)..];
        let whole = if shown.len() == lines.len() {
            format!("its whole log, {} lines", lines.len())
        } else {
            format!(
                "the last {} of its log's {} lines",
                shown.len(),
                lines.len()
            )
        };
        eprintln!(
            "==== the test failed: server {name} (port {port}, {dir}), {whole}:\n{}\n\
             ==== end of the log of server {name} (port {port})",
            shown.join("\n")
        );
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.print_log_of_a_failed_test();
        }
        let _ = run_pgserver(&["destroy", &self.dir], &[]);
    }
}

/// Starts one server per node id at once (each preloaded, with that node id and the extra
/// settings), named `{name}{node}`: a deployment of shards in a few seconds.
pub fn start_cluster(name: &str, nodes: &[i32], settings: &[&str]) -> Vec<Server> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = nodes
            .iter()
            .map(|&node| {
                scope.spawn(move || {
                    let config = settings
                        .iter()
                        .fold(Config::node(node), |config, line| config.setting(line));
                    Server::start(&format!("{name}{node}"), config)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[cfg(test)]
mod crash_tests {
    use super::*;

    /// After [`Server::crash`] the directory names no pid, so that no later `pg_ctl stop` (the
    /// drop's `destroy`, [`Server::stop`]) can signal a process that took the dead postmaster's
    /// pid; and the server still starts again, recovering from the crash.
    #[test]
    fn a_crashed_server_leaves_no_pid_behind_and_starts_again() {
        let server = Server::start("crashpid", Config::default());
        server.execute("CREATE TABLE t AS SELECT 1 AS one");
        let pid_file = server.data_file("postmaster.pid");
        let exists = |path: &str| {
            Command::new("sudo")
                .args(["-u", "postgres", "test", "-e", path])
                .status()
                .expect("sudo runs")
                .success()
        };
        assert!(exists(&pid_file), "a running server has its {pid_file}");
        server.crash();
        assert!(!exists(&pid_file), "{pid_file} left after the crash");
        server.start_again();
        assert_eq!(server.query_one::<i32>("SELECT one FROM t"), 1);
        assert!(
            server.log().contains("was not properly shut down"),
            "no crash recovery at the restart:\n{}",
            server.log()
        );
    }

    /// After [`Server::crash`] nothing of the server's shared memory is left, as after the power
    /// cut it stands for: neither the dynamic segments its processes mapped (in /dev/shm) nor the
    /// System V segment its pid file named. A crashed server dropped without a restart would
    /// otherwise keep them, in RAM, until the machine restarts.
    #[test]
    fn a_crashed_server_leaves_no_shared_memory_behind() {
        let server = Server::start("crashshm", Config::default());
        let pid = server.postmaster_pid();
        let segments: Vec<String> = server
            .output_as_postgres(&format!("cat /proc/{pid}/maps"))
            .lines()
            .filter_map(|line| line.split_whitespace().nth(5))
            .filter(|path| path.starts_with("/dev/shm/PostgreSQL."))
            .map(str::to_string)
            .collect();
        assert!(
            !segments.is_empty(),
            "the postmaster maps its control segment"
        );
        let pid_file =
            server.output_as_postgres(&format!("cat {}", server.data_file("postmaster.pid")));
        let shmid = pid_file
            .lines()
            .nth(6)
            .and_then(|line| line.split_whitespace().nth(1));
        let shmid = shmid.expect("line 7 of postmaster.pid: the key and id of its segment");
        // `ipcs -m -i ID` exits 0 on an id it does not find: the list is read instead.
        let segment_exists = |id: &str| {
            server
                .output_as_postgres("ipcs -m")
                .lines()
                .any(|line| line.split_whitespace().nth(1) == Some(id))
        };
        assert!(
            segment_exists(shmid),
            "the running server's segment {shmid}"
        );
        server.crash();
        for segment in &segments {
            let left =
                server.output_as_postgres(&format!("test -e {segment} && echo left || true"));
            assert!(left.is_empty(), "{segment} left after the crash");
        }
        assert!(
            !segment_exists(shmid),
            "segment {shmid} left after the crash"
        );
    }
}
