//! Node-id leases for application processes (docs/FLEETS.md, "Applications"), on real servers:
//! a registry, members that make IDs, and applications that make their own through the reference
//! clients (examples/python/snowflake_lease.py, examples/js/snowflake-lease.mjs,
//! examples/go/snowflakelease and examples/java/SnowflakeLease.java, each run as a
//! process of its own by its check program) or through the SQL protocol driven from here. Every
//! case counts every ID made, by applications and servers: none twice.

use snowflake_it::registry::{
    both, member_config, registry_rows, registry_server, registry_standby, LEASE_MS,
};
use snowflake_it::{
    assert_error, describe, repo_root, take_ids, wait_until, Config, Proxy, Server, SetOnDrop,
};
use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The members' clock margin (`member_config`: 2 s).
const MARGIN_MS: i64 = 2_000;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A Python with psycopg 3: `PGSF_PYTHON`, or the virtualenv `scripts/test/clients` makes, or
/// else one made here once (in target/), with psycopg as examples/python/requirements.txt pins it.
fn python() -> String {
    if let Ok(python) = std::env::var("PGSF_PYTHON") {
        return python;
    }
    let home = std::env::var("HOME").unwrap_or_default();
    let cache = std::env::var("CLIENTS_CACHE")
        .unwrap_or_else(|_| format!("{home}/.cache/pg_snowflake/clients"));
    let clients = format!("{cache}/python/bin/python");
    if std::path::Path::new(&clients).exists() {
        return clients;
    }
    static MADE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    MADE.get_or_init(|| {
        let venv = repo_root().join("target/lease-python");
        let python = venv.join("bin/python");
        if !python.exists() {
            let requirements =
                std::fs::read_to_string(repo_root().join("examples/python/requirements.txt"))
                    .expect("examples/python/requirements.txt");
            let psycopg = requirements
                .lines()
                .find(|l| l.starts_with("psycopg"))
                .expect("psycopg pinned in requirements.txt");
            let run = |program: &std::path::Path, args: &[&str]| {
                let status = Command::new(program).args(args).status();
                assert!(
                    status.is_ok_and(|s| s.success()),
                    "{} {args:?} (Debian's python3-venv)",
                    program.display()
                );
            };
            run("python3".as_ref(), &["-m", "venv", &venv.to_string_lossy()]);
            run(&python, &["-m", "pip", "install", "--quiet", psycopg]);
        }
        python.to_string_lossy().into_owned()
    })
    .clone()
}

/// Node.js, with examples/js/node_modules installed: by `scripts/test/clients node-pg`, or here,
/// as it does (`npm ci` from examples/js/package-lock.json), once per test process.
fn node() -> String {
    static INSTALLED: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    INSTALLED.get_or_init(|| {
        let dir = repo_root().join("examples/js");
        if dir.join("node_modules/pg").exists() {
            return;
        }
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&dir)
            .status()
            .expect("npm runs (Debian's npm)");
        assert!(status.success(), "npm ci in {}", dir.display());
    });
    "node".into()
}

/// The Go client's check, built once per test process in GOPATH mode with Debian's Go and pgx
/// (what `scripts/test/clients go` installs): the package linked into a GOPATH of its own in target/.
fn go_check() -> String {
    static BUILT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let work = repo_root().join("target/lease-go");
            let src = work.join("gopath/src");
            std::fs::create_dir_all(&src).unwrap();
            let link = src.join("snowflakelease");
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(repo_root().join("examples/go/snowflakelease"), &link)
                .unwrap();
            let binary = work.join("check");
            let status = Command::new("go")
                .args(["build", "-o", &binary.to_string_lossy(), "snowflakelease/check"])
                .env("GO111MODULE", "off")
                .env("GOPATH", format!("{}:/usr/share/gocode", work.join("gopath").display()))
                .env("GOPROXY", "off")
                .env("GOFLAGS", "")
                .env("GOCACHE", work.join("cache"))
                .status();
            assert!(
                status.is_ok_and(|s| s.success()),
                "building examples/go/snowflakelease/check: needs Debian's golang-go and \
                 golang-github-jackc-pgx-v4-dev (apt-get install them, or run scripts/test/clients go)"
            );
            binary.to_string_lossy().into_owned()
        })
        .clone()
}

/// Debian's PostgreSQL JDBC driver (`scripts/test/clients java` installs it).
const JDBC_JAR: &str = "/usr/share/java/postgresql.jar";

/// The Java client and its check, compiled once per test process into target/lease-java.
fn java_classes() -> String {
    static BUILT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let classes = repo_root().join("target/lease-java");
            let dir = repo_root().join("examples/java");
            let status = Command::new("javac")
                .arg("-d")
                .arg(&classes)
                .args(["-cp", JDBC_JAR])
                .arg(dir.join("SnowflakeLease.java"))
                .arg(dir.join("SnowflakeLeaseCheck.java"))
                .status();
            assert!(
                status.is_ok_and(|s| s.success()) && std::path::Path::new(JDBC_JAR).exists(),
                "compiling examples/java/SnowflakeLease*.java: needs a JDK (17 or later: Debian's \
                 default-jdk-headless) and libpostgresql-jdbc-java (apt-get install them, or run \
                 scripts/test/clients java)"
            );
            format!("{}:{JDBC_JAR}", classes.display())
        })
        .clone()
}

/// A reference client.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Lang {
    Python,
    Node,
    Go,
    Java,
}

const LANGS: [Lang; 4] = [Lang::Python, Lang::Node, Lang::Go, Lang::Java];

/// The command that runs a client's check (its arguments follow), and the folder it runs in.
fn check_command(lang: Lang) -> Command {
    let (mut command, dir) = match lang {
        Lang::Python => {
            let mut c = Command::new(python());
            c.arg("snowflake_lease_check.py");
            (c, "examples/python")
        }
        Lang::Node => {
            let mut c = Command::new(node());
            c.arg("snowflake-lease-check.mjs");
            (c, "examples/js")
        }
        Lang::Go => (Command::new(go_check()), "examples/go"),
        Lang::Java => {
            let mut c = Command::new("java");
            c.args(["-cp", &java_classes(), "SnowflakeLeaseCheck"]);
            (c, "examples/java")
        }
    };
    command.current_dir(repo_root().join(dir));
    command
}

/// An application process: a client's check in one mode, its output lines gathered, and when
/// its first error line came (read as it comes, not when a test looks).
struct App {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    first_error_at: Arc<Mutex<Option<Instant>>>,
}

impl App {
    fn start(conninfo: &str, label: &str, mode: &[&str]) -> App {
        App::start_in(Lang::Python, conninfo, label, mode)
    }

    fn start_in(lang: Lang, conninfo: &str, label: &str, mode: &[&str]) -> App {
        let mut child = check_command(lang)
            .args([conninfo, label])
            .args(mode)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("the {lang:?} client starts: {e}"));
        let lines = Arc::new(Mutex::new(Vec::new()));
        let first_error_at = Arc::new(Mutex::new(None));
        let out = child.stdout.take().unwrap();
        let (gathered, error_at) = (Arc::clone(&lines), Arc::clone(&first_error_at));
        thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if line.starts_with("error: ") {
                    error_at.lock().unwrap().get_or_insert_with(Instant::now);
                }
                gathered.lock().unwrap().push(line);
            }
        });
        App {
            child,
            lines,
            first_error_at,
        }
    }

    /// When its first error line came, if one did.
    fn first_error_at(&self) -> Option<Instant> {
        *self.first_error_at.lock().unwrap()
    }

    /// Runs to its end; panics unless it exited 0.
    fn finish(mut self) -> App {
        let status = self.child.wait().unwrap();
        thread::sleep(Duration::from_millis(100));
        assert!(status.success(), "the client failed: {:?}", self.lines());
        self
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// The node id its lease holds, once it says.
    fn node(&self) -> i32 {
        wait_until(Duration::from_secs(20), "the client's lease", || {
            self.lines().iter().any(|l| l.starts_with("lease "))
        });
        let line = self
            .lines()
            .into_iter()
            .find(|l| l.starts_with("lease "))
            .unwrap();
        line.split(' ').nth(1).unwrap().parse().unwrap()
    }

    fn ids(&self) -> Vec<i64> {
        self.said("id ")
    }

    /// The IDs its recipe made under a lease of its own (mode `make`).
    fn keys(&self) -> Vec<i64> {
        self.said("key ")
    }

    fn said(&self, prefix: &str) -> Vec<i64> {
        self.lines()
            .iter()
            .filter_map(|l| l.strip_prefix(prefix))
            .map(|id| id.parse().unwrap())
            .collect()
    }

    fn errors(&self) -> Vec<String> {
        self.lines()
            .into_iter()
            .filter(|l| l.starts_with("error: "))
            .collect()
    }

    /// kill -9.
    fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for App {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The fleet's layout (the default): the node id and the time (Unix ms) of an ID.
fn node_of(id: i64) -> i32 {
    ((id >> 12) & 1023) as i32
}

fn time_of(id: i64) -> i64 {
    (id >> 22) + 1_704_067_200_000
}

/// A registry and a member with node id `node`, its table made.
fn fleet(name: &str, node: i32) -> (Server, Server) {
    fleet_leased(name, node, LEASE_MS)
}

/// [`fleet`] with the member's lease, the one its applications' leases take, of `lease_ms`.
fn fleet_leased(name: &str, node: i32, lease_ms: i64) -> (Server, Server) {
    let registry = registry_server(&format!("{name}-registry"));
    let lease = format!("pg_snowflake.registry_lease_ms = {lease_ms}");
    let member = Server::start(
        name,
        member_config(&registry.conninfo("postgres"), Some(node)).setting(&lease),
    );
    member.execute("SELECT snowflake_registry_create()");
    assert_eq!(snowflake_it::registry::claimed_node(&member), node);
    (registry, member)
}

/// Every ID once: panics naming the first made twice.
fn all_distinct(ids: impl IntoIterator<Item = i64>) -> usize {
    let mut seen = HashSet::new();
    for id in ids {
        assert!(seen.insert(id), "ID {id} made twice");
    }
    seen.len()
}

/// A lease taken over SQL: node id, token, generation, floor, ceiling.
fn acquire(member: &Server, label: &str) -> (i32, String, i64, Option<i64>, i64) {
    let row = member
        .connect()
        .query_one(
            "SELECT node_id, token, generation, floor_ms, ceiling_ms \
             FROM snowflake_lease_acquire($1)",
            &[&label],
        )
        .unwrap_or_else(|e| panic!("snowflake_lease_acquire: {}", describe(&e)));
    (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4))
}

#[test]
fn applications_and_servers_share_one_registry_each_its_own_id() {
    let (registry, first) = fleet("apps-a", 900);
    let second = Server::start(
        "apps-b",
        member_config(&registry.conninfo("postgres"), None),
    );
    let assigned = snowflake_it::registry::claimed_node(&second);
    // Two processes with the same label, a third through the other member, and the other
    // clients: Node and Go through the first member, Java through the second.
    let apps = [
        App::start(&first.conninfo("postgres"), "orders", &["make", "30000"]),
        App::start(&first.conninfo("postgres"), "orders", &["make", "30000"]),
        App::start(&second.conninfo("postgres"), "billing", &["make", "30000"]),
        App::start_in(
            Lang::Node,
            &first.conninfo("postgres"),
            "orders",
            &["make", "30000"],
        ),
        App::start_in(
            Lang::Go,
            &first.conninfo("postgres"),
            "orders",
            &["make", "30000"],
        ),
        App::start_in(
            Lang::Java,
            &second.conninfo("postgres"),
            "billing",
            &["make", "30000"],
        ),
    ];
    let servers: Vec<Vec<i64>> = [&first, &second]
        .iter()
        .map(|m| take_ids(&mut m.connect(), 50_000, 10_000))
        .collect();
    let apps: Vec<App> = apps.into_iter().map(App::finish).collect();
    let mut nodes: Vec<i32> = apps.iter().map(App::node).collect();
    for (app, node) in apps.iter().zip(&nodes) {
        let ids = app.ids();
        assert_eq!(ids.len(), 30_000);
        assert!(
            ids.iter().all(|&id| node_of(id) == *node),
            "IDs of node {node}"
        );
    }
    nodes.extend([900, assigned]);
    // Each maker's IDs as one span. A node id may pass from a process that released it (or whose
    // lease ran out) to one that started later, as on a loaded machine where one finishes before
    // another starts; two makers of one node id must never hold it at once: sorted by node id
    // and first ID, each span ends below the next one's start.
    let mut spans: Vec<(i32, i64, i64, usize)> = apps
        .iter()
        .map(App::ids)
        .chain(servers.iter().cloned())
        .zip(&nodes)
        .enumerate()
        .map(|(maker, (ids, &node))| {
            let (first, last) = (*ids.iter().min().unwrap(), *ids.iter().max().unwrap());
            (node, first, last, maker)
        })
        .collect();
    spans.sort();
    for pair in spans.windows(2) {
        let ((node, _, last, a), (next, first, _, b)) = (pair[0], pair[1]);
        assert!(
            node != next || last < first,
            "makers {a} and {b} held node id {node} at once: {spans:?}\n{}",
            registry_rows(&registry)
        );
    }
    assert!(
        !nodes[6..].iter().any(|server| nodes[..6].contains(server)),
        "an application holds a running server's node id: {nodes:?}"
    );
    let made = all_distinct(
        apps.iter()
            .flat_map(|app| app.ids().into_iter().chain(app.keys()))
            .chain(servers.concat()),
    );
    assert_eq!(made, 6 * (30_000 + 2) + 2 * 50_000);
    // Released (each process's and its recipe's twelve leases): no application's row is left
    // held, and each names its label. Twelve rows when no id passed from one process to a later
    // one; fewer, all released, when some did.
    let (released, held): (i64, i64) = {
        let row = registry
            .connect()
            .query_one(
                "SELECT count(*) FILTER (WHERE released_at IS NOT NULL \
                                         AND holder_label LIKE '% (application via %'), \
                        count(*) FILTER (WHERE state = 'live' AND released_at IS NULL) \
                 FROM snowflake_nodes WHERE system_identifier = '0'",
                &[],
            )
            .unwrap();
        (row.get(0), row.get(1))
    };
    assert!(
        held == 0 && (1..=12).contains(&released),
        "{released} released, {held} held\n{}",
        registry_rows(&registry)
    );
}

#[test]
fn a_killed_application_is_recycled_after_its_lease_and_the_margin_above_its_ids() {
    let (registry, member) = fleet("apps-kill", 900);
    // One process of each client, each killed with -9.
    let mut apps: Vec<App> = LANGS
        .iter()
        .map(|&lang| App::start_in(lang, &member.conninfo("postgres"), "killed", &["hold"]))
        .collect();
    let nodes: Vec<i32> = apps.iter().map(App::node).collect();
    // Two leases of IDs, so that the IDs killed with them lie under renewals' marks.
    thread::sleep(Duration::from_millis(2 * LEASE_MS as u64));
    let mut killed = Vec::new(); // (node, killed at, last ID's time)
    let mut killed_ids = Vec::new();
    for (app, &node) in apps.iter_mut().zip(&nodes) {
        wait_until(Duration::from_secs(10), "IDs", || app.ids().len() > 500);
        app.kill();
        let ids = app.ids();
        killed.push((
            node,
            now_ms(),
            ids.iter().map(|&id| time_of(id)).max().unwrap(),
        ));
        killed_ids.extend(ids);
    }
    // Leases taken every 300 ms (and released, but for a killed id's) until each killed id is
    // handed out again: the lowest free id comes first.
    let first_kill = killed[0].1;
    let mut recycled = Vec::new(); // (node, at, floor)
    while recycled.len() < killed.len() {
        let (got, token, generation, floor, ceiling) = acquire(&member, "next");
        let at = now_ms();
        if nodes.contains(&got) {
            recycled.push((got, at, floor.expect("a recycled id's floor")));
            continue;
        }
        member.execute(&format!(
            "SELECT snowflake_lease_release({got}, '{token}', {generation}, {ceiling}, {at})"
        ));
        assert!(
            at - first_kill < 30_000,
            "node ids {nodes:?} not all recycled in 30 s\n{}",
            registry_rows(&registry)
        );
        thread::sleep(Duration::from_millis(300));
    }
    for (lang, (node, killed_at, last)) in LANGS.iter().zip(killed) {
        let &(_, recycled_at, floor) = recycled.iter().find(|r| r.0 == node).unwrap();
        println!(
            "{lang:?} killed: last ID at {last}, recycled after {} ms, floor {floor}",
            recycled_at - killed_at
        );
        assert!(
            floor >= last,
            "{lang:?}: the next holder's floor {floor} below the killed one's ID at {last}"
        );
        // Not before the lease ran out and the clock passed the mark by the margin.
        assert!(
            recycled_at > floor + MARGIN_MS && recycled_at - killed_at >= LEASE_MS,
            "{lang:?}: recycled at {recycled_at}, floor {floor}, killed at {killed_at}"
        );
    }
    // The next holder's IDs (the client's) lie above.
    let next = App::start(&member.conninfo("postgres"), "after", &["make", "1000"]).finish();
    all_distinct(killed_ids.into_iter().chain(next.ids()).chain(next.keys()));
}

#[test]
fn applications_cut_off_from_their_member_stop_at_their_ceiling() {
    let (registry, member) = fleet("apps-cut", 900);
    let proxy = Proxy::to(member.port);
    // One process of each client behind one proxy.
    let apps: Vec<App> = LANGS
        .iter()
        .map(|&lang| App::start_in(lang, &proxy.conninfo("postgres"), "cut", &["hold"]))
        .collect();
    let nodes: Vec<i32> = apps.iter().map(App::node).collect();
    for app in &apps {
        wait_until(Duration::from_secs(10), "IDs", || app.ids().len() > 200);
    }
    proxy.cut();
    let cut_at = Instant::now();
    let mut all = Vec::new();
    for ((app, &node), lang) in apps.iter().zip(&nodes).zip(LANGS) {
        wait_until(
            Duration::from_secs(3 * LEASE_MS as u64 / 1000),
            "the client to stop",
            || !app.errors().is_empty(),
        );
        // When it said so, not when this loop, after the clients before it, looked.
        let stopped_after = app.first_error_at().unwrap().duration_since(cut_at);
        let mark: i64 = registry.query_one(&format!(
            "SELECT high_water_ms FROM snowflake_nodes WHERE node_id = {node}"
        ));
        let highest = app.ids().iter().map(|&id| time_of(id)).max().unwrap();
        println!(
            "{lang:?} stopped {stopped_after:?} after the cut: {:?}",
            app.errors()[0]
        );
        assert!(
            highest <= mark,
            "{lang:?}: an ID at {highest}, past the mark {mark}"
        );
        // Its lease ran out on its own monotonic clock (timed from before the renewal was sent)
        // no later than its ceiling (the member's clock when it answered, plus the lease).
        let errors = app.errors();
        assert!(
            errors[0].starts_with("error: LeaseExpired: "),
            "{lang:?}: {:?}",
            &errors[..errors.len().min(2)]
        );
        assert!(
            stopped_after <= Duration::from_millis(LEASE_MS as u64 + 500),
            "{lang:?}"
        );
    }
    thread::sleep(Duration::from_millis(500));
    let stopped: Vec<usize> = apps.iter().map(|app| app.ids().len()).collect();
    thread::sleep(Duration::from_millis(500));
    for ((app, stopped), lang) in apps.iter().zip(stopped).zip(LANGS) {
        let ids = app.ids();
        assert_eq!(
            ids.len(),
            stopped,
            "{lang:?}: IDs while cut off: {:?}",
            app.errors()
        );
        all.extend(ids);
    }
    // The ids go to the next application only above every ID the cut-off ones made.
    let next = App::start(&member.conninfo("postgres"), "next", &["make", "1000"]).finish();
    all_distinct(all.into_iter().chain(next.ids()).chain(next.keys()));
    // Its acquisitions retired their lapsed rows, or handed their ids out again: reconnected,
    // each client is told its lease is lost, and makes no ID again.
    proxy.heal();
    for (app, lang) in apps.iter().zip(LANGS) {
        wait_until(
            Duration::from_secs(10),
            "the client to find its lease lost",
            || {
                app.errors()
                    .iter()
                    .any(|e| e.starts_with("error: LeaseLost: "))
            },
        );
        let lines = app.lines();
        let lost = lines
            .iter()
            .position(|l| l.starts_with("error: LeaseLost: "))
            .unwrap();
        assert!(
            !lines[lost..].iter().any(|l| l.starts_with("id ")),
            "{lang:?}: an ID after its lease was lost"
        );
    }
}

/// A release whose registry session ends under it is tried once more on a new connection: the
/// registry ends a release's transaction idle past a quarter second, which a busy machine's
/// stall between two statements reaches (a whole run's app lease test failed so). Here the
/// registry's backend is ended while the release waits for the table's lock.
#[test]
fn a_release_whose_registry_session_ends_under_it_is_tried_again() {
    let (registry, member) = fleet("apps-release", 900);
    let (node, token, generation, _, ceiling) = acquire(&member, "released");
    let mut holder = registry.connect();
    let mut lock = holder.transaction().unwrap();
    lock.batch_execute("LOCK TABLE snowflake_nodes IN ACCESS EXCLUSIVE MODE")
        .unwrap();
    let mut app = member.connect();
    let release = thread::spawn(move || {
        app.query_one(
            "SELECT snowflake_lease_release($1, $2, $3, $4, $5)",
            &[&node, &token, &generation, &ceiling, &(ceiling - 1_000)],
        )
        .map(|row| row.get::<_, bool>(0))
        .map_err(|e| describe(&e))
    });
    // Every session waiting for the lock ended (the member's heartbeat's too: it tries again).
    let waiting = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'";
    wait_until(
        Duration::from_secs(5),
        "the release waiting for the lock",
        || registry.query_one::<i64>(waiting) > 0,
    );
    registry.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event_type = 'Lock'",
    );
    lock.commit().unwrap();
    assert_eq!(
        release.join().unwrap(),
        Ok(true),
        "the release, tried again"
    );
    // The mark came down to the last ID the application said it made.
    let mark: i64 = registry.query_one(&format!(
        "SELECT high_water_ms FROM snowflake_nodes WHERE node_id = {node}"
    ));
    assert_eq!(mark, ceiling - 1_000);
    assert!(member.log().contains("could not release a node-id lease"));
}

/// An acquisition whose registry session ends under it is tried once more on a new connection,
/// for the same reason as a release (a whole run's app lease test failed so); its first session
/// ended while it waits for the table's lock.
#[test]
fn an_acquisition_whose_registry_session_ends_under_it_is_tried_again() {
    let (registry, member) = fleet("apps-acquire", 900);
    let mut holder = registry.connect();
    let mut lock = holder.transaction().unwrap();
    lock.batch_execute("LOCK TABLE snowflake_nodes IN ACCESS EXCLUSIVE MODE")
        .unwrap();
    let mut app = member.connect();
    let acquire = thread::spawn(move || {
        app.query_one("SELECT node_id FROM snowflake_lease_acquire('again')", &[])
            .map(|row| row.get::<_, i32>(0))
            .map_err(|e| describe(&e))
    });
    let waiting = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'";
    wait_until(
        Duration::from_secs(5),
        "the acquisition waiting for the lock",
        || registry.query_one::<i64>(waiting) > 0,
    );
    registry.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE wait_event_type = 'Lock'",
    );
    lock.commit().unwrap();
    let node = acquire
        .join()
        .unwrap()
        .expect("the acquisition, tried again");
    let holder: String = registry.query_one(&format!(
        "SELECT holder_label FROM snowflake_nodes WHERE node_id = {node}"
    ));
    assert!(holder.starts_with("again (application via "), "{holder}");
    assert!(member.log().contains("could not acquire a node-id lease"));
}

#[test]
fn an_application_goes_on_through_a_registry_restart() {
    goes_on_through_a_restart(Restarted::Registry);
}

#[test]
fn an_application_goes_on_through_its_members_restart() {
    goes_on_through_a_restart(Restarted::Member);
}

#[derive(Clone, Copy, Debug)]
enum Restarted {
    Registry,
    Member,
}

fn goes_on_through_a_restart(restarted: Restarted) {
    let (registry, member) = fleet(&format!("apps-restart-{restarted:?}").to_lowercase(), 900);
    let app = App::start(&member.conninfo("postgres"), "through", &["hold"]);
    app.node();
    wait_until(Duration::from_secs(10), "IDs", || app.ids().len() > 200);
    let server = match restarted {
        Restarted::Registry => &registry,
        Restarted::Member => &member,
    };
    server.stop();
    server.start_again();
    let after = app.ids().len();
    wait_until(Duration::from_secs(10), "IDs after the restart", || {
        app.ids().len() > after + 1_000
    });
    // Well past a lease: the lease was renewed after the restart. A restart longer than the
    // lease less a renewal's interval stops the IDs for a moment (fenced, as a server), never
    // for good: the lease is not lost, and IDs come after the last refusal.
    thread::sleep(Duration::from_millis(2 * LEASE_MS as u64));
    let lines = app.lines();
    let errors = app.errors();
    assert!(
        errors
            .iter()
            .all(|e| e.starts_with("error: LeaseExpired: ")
                || e.starts_with("error: CeilingReached: ")),
        "{errors:?}"
    );
    let last_error = lines.iter().rposition(|l| l.starts_with("error: "));
    let after_errors = lines[last_error.map_or(0, |i| i + 1)..]
        .iter()
        .filter(|l| l.starts_with("id "))
        .count();
    println!(
        "{} refusals during the restart, {after_errors} IDs after the last",
        errors.len()
    );
    assert!(
        after_errors > 500,
        "{after_errors} IDs after the last refusal"
    );
    let server_ids = take_ids(&mut member.connect(), 10_000, 10_000);
    all_distinct(app.ids().into_iter().chain(server_ids));
}

/// Each client's clock stepped in its process: Python and Node through the module's one reading
/// of the wall clock, Go and Java through the clock given at construction (libfaketime cannot
/// step Go's: its runtime reads the clock through the vDSO, past LD_PRELOAD). A lease of 10 s:
/// what is checked (a second held, an hour behind and ahead refused) is the same under any lease
/// shorter than the hour, and four clients side by side on a loaded machine once went 3.4 s
/// without a renewal under the 3 s one, which ended a client's lease before its checks.
#[test]
fn an_application_clock_stepped_back_holds_and_ahead_is_refused() {
    let (_registry, member) = fleet_leased("apps-clock", 900, 10_000);
    let apps: Vec<App> = LANGS
        .iter()
        .map(|&lang| App::start_in(lang, &member.conninfo("postgres"), "clock", &["clock"]))
        .collect();
    for (app, lang) in apps.into_iter().zip(LANGS) {
        let app = app.finish();
        let errors = app.errors();
        assert!(
            errors[0].starts_with("error: ClockBehind: "),
            "{lang:?}: {errors:?}"
        );
        assert!(
            errors[1].starts_with("error: CeilingReached: "),
            "{lang:?}: {errors:?}"
        );
        all_distinct(app.ids());
    }
}

#[test]
fn leases_need_the_right_and_their_token() {
    let (registry, member) = fleet("apps-right", 900);
    member.execute("CREATE ROLE app LOGIN");
    let refused = member
        .connect_as("app")
        .query_one("SELECT * FROM snowflake_lease_acquire('x')", &[]);
    let err = refused.expect_err("refused");
    // Each client says so, and fails.
    for lang in LANGS {
        let out = check_command(lang)
            .args([&member.conninfo_as("app", "postgres"), "x", "make", "1"])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success()
                && said.contains(
                    "role \"app\" may not take a node-id lease from the pg_snowflake registry"
                ),
            "{lang:?}: {said}"
        );
    }
    assert_error(
        &err,
        "42501",
        "role \"app\" may not take a node-id lease from the pg_snowflake registry",
        Some("A node-id lease lets its holder make IDs under one of the fleet's node ids: only members of the role snowflake_lease may take, renew or release one."),
        Some("A superuser may grant it: GRANT snowflake_lease TO the application's role."),
    );
    member.execute("GRANT snowflake_lease TO app");
    let mut app = member.connect_as("app");
    let row = app
        .query_one(
            "SELECT node_id, token, generation, ceiling_ms FROM snowflake_lease_acquire('x')",
            &[],
        )
        .unwrap();
    let (node, token, generation, ceiling): (i32, String, i64, i64) =
        (row.get(0), row.get(1), row.get(2), row.get(3));
    // Renewed with its token; not with another, nor with one that is none.
    let renewed: i64 = app
        .query_one(
            "SELECT ceiling_ms FROM snowflake_lease_renew($1, $2, $3, $4)",
            &[&node, &token, &generation, &ceiling],
        )
        .unwrap()
        .get(0);
    assert!(renewed >= ceiling);
    let other = format!("{:032x}", 7);
    let err = app
        .query_one(
            "SELECT * FROM snowflake_lease_renew($1, $2, $3, $4)",
            &[&node, &other, &generation, &ceiling],
        )
        .expect_err("another token");
    assert_error(
        &err,
        "55000",
        &format!("the lease on node id {node} is lost: the registry's row is another lease's, \"x (application via …"),
        None,
        Some("Stop making IDs under this node id and acquire a new lease with snowflake_lease_acquire()."),
    );
    let err = app
        .query_one(
            "SELECT snowflake_lease_release($1, 'nonsense', $2)",
            &[&node, &generation],
        )
        .expect_err("no token");
    assert_error(
        &err,
        "22023",
        "invalid node-id lease argument: the token is not 32 hex digits",
        None,
        None,
    );
    let released: bool = app
        .query_one(
            "SELECT snowflake_lease_release($1, $2, $3)",
            &[&node, &token, &generation],
        )
        .unwrap()
        .get(0);
    assert!(released);
    // The registry out of reach: said without its address, which only the server log shows.
    registry.stop();
    let err = app
        .query_one("SELECT * FROM snowflake_lease_acquire('x')", &[])
        .expect_err("no registry");
    let db = assert_error(
        &err,
        "08006",
        "could not acquire a node-id lease: the pg_snowflake registry did not answer",
        None,
        None,
    );
    let port = registry.port.to_string();
    let said = format!("{} {:?} {:?}", db.message(), db.detail(), db.hint());
    assert!(
        !said.contains(&port) && !said.contains("127.0.0.1"),
        "{said}"
    );
    assert!(member
        .log()
        .contains("could not acquire a node-id lease: \""));
}

/// An error's wording, its numbers left out.
fn wording(error: &str) -> String {
    error.chars().filter(|c| !c.is_ascii_digit()).collect()
}

/// One maker of IDs in the shared table: a client's process or a server, its name in the
/// table's `maker` column.
struct Maker {
    name: String,
    node: i32,
}

/// The landing condition of application leases: a Python, a Node, a Go and a Java process each
/// hold a node id leased from the registry of three servers, the registry a primary with a
/// synchronous standby that every member names in its multi-host `pg_snowflake.registry`. The
/// clients' IDs go in batches into one table on the first member (copied there from their
/// output by this test, as they come); each server inserts rows with
/// `DEFAULT snowflake_nextval()` into a table of its own from a thread, collected into the
/// first member's at the end. Meanwhile the Go process is killed with -9 and a fresh one
/// started, then the registry's primary is killed with -9 and its standby promoted: every client
/// and server makes IDs again (a client that does not within two leases is killed and started
/// afresh; the output says which). At the end, no ID is in the table twice, every process's
/// and server's IDs carry its node id, and no two makers with one node id made IDs in the same
/// span of time.
#[test]
fn four_clients_and_three_servers_share_tables_through_a_kill_and_a_registry_failover() {
    let primary = Server::start("appfo-primary", Config::default());
    let standby = registry_standby(&primary, "appfo-standby");
    primary.make_standby_synchronous();
    let conninfo = both(&primary, &standby);
    let first = Server::start("appfo-m0", member_config(&conninfo, None));
    first.execute("SELECT snowflake_registry_create()");
    let members = [
        first,
        Server::start("appfo-m1", member_config(&conninfo, None)),
        Server::start("appfo-m2", member_config(&conninfo, None)),
    ];
    let mut makers: Vec<Maker> = Vec::new();
    for (i, member) in members.iter().enumerate() {
        member.execute(
            "CREATE TABLE made (id bigint NOT NULL DEFAULT snowflake_nextval(), \
             maker text NOT NULL)",
        );
        makers.push(Maker {
            name: format!("server m{i}"),
            node: snowflake_it::registry::claimed_node(member),
        });
    }
    let through = |lang: Lang| {
        let i = LANGS.iter().position(|&l| l == lang).unwrap();
        members[i % members.len()].conninfo("postgres")
    };

    // The clients' outputs this test copies into the shared table: maker, lines, lines copied.
    type Feed = (String, Arc<Mutex<Vec<String>>>, usize);
    let feeds: Mutex<Vec<Feed>> = Mutex::default();
    let stop = AtomicBool::new(false);
    let server_calls: Vec<(AtomicUsize, Mutex<Vec<String>>)> = members
        .iter()
        .map(|_| (AtomicUsize::new(0), Mutex::default()))
        .collect();
    let started = Instant::now();
    let mut apps: Vec<(Lang, String, App)> = Vec::new();
    let mut restarted = Vec::new();
    thread::scope(|scope| {
        let _stop_on_panic = SetOnDrop(&stop);
        for (i, (member, (answered, errors))) in members.iter().zip(&server_calls).enumerate() {
            let stop = &stop;
            scope.spawn(move || {
                let mut client = member.connect();
                let maker = format!("server m{i}");
                while !stop.load(Ordering::Relaxed) {
                    match client.execute(
                        "INSERT INTO made (maker) SELECT $1::text FROM generate_series(1, 100)",
                        &[&maker],
                    ) {
                        Ok(_) => {
                            answered.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) => errors.lock().unwrap().push(describe(&e)),
                    }
                    thread::sleep(Duration::from_millis(5));
                }
            });
        }
        let (feeds, stop) = (&feeds, &stop);
        let table = &members[0];
        scope.spawn(move || {
            let mut client = table.connect();
            loop {
                let stopping = stop.load(Ordering::Relaxed);
                for (maker, lines, copied) in feeds.lock().unwrap().iter_mut() {
                    let batch: Vec<i64> = {
                        let lines = lines.lock().unwrap();
                        let new = lines[*copied..]
                            .iter()
                            .filter_map(|l| l.strip_prefix("id "))
                            .map(|id| id.parse().unwrap())
                            .collect();
                        *copied = lines.len();
                        new
                    };
                    if !batch.is_empty() {
                        client
                            .execute(
                                "INSERT INTO made (id, maker) SELECT unnest($1::bigint[]), $2",
                                &[&batch, maker],
                            )
                            .unwrap_or_else(|e| panic!("the shared table: {}", describe(&e)));
                    }
                }
                if stopping {
                    break;
                }
                thread::sleep(Duration::from_millis(200));
            }
        });
        let start = |lang: Lang, name: String, apps: &mut Vec<(Lang, String, App)>| {
            let app = App::start_in(lang, &through(lang), "landing", &["hold"]);
            feeds
                .lock()
                .unwrap()
                .push((name.clone(), Arc::clone(&app.lines), 0));
            apps.push((lang, name, app));
        };
        for lang in LANGS {
            start(lang, format!("{lang:?}").to_lowercase(), &mut apps);
        }
        for (_, _, app) in &apps {
            app.node();
            wait_until(Duration::from_secs(20), "IDs", || app.ids().len() > 200);
        }

        // The Go process killed with -9, and a fresh one started at once: the killed one's id
        // is still leased, so the fresh one gets another, or the same only above its IDs.
        let go = apps.iter().position(|a| a.0 == Lang::Go).unwrap();
        apps[go].2.kill();
        let killed_node = apps[go].2.node();
        let killed_last = apps[go]
            .2
            .ids()
            .iter()
            .map(|&id| time_of(id))
            .max()
            .unwrap();
        start(Lang::Go, "go (after the kill)".into(), &mut apps);
        let fresh = apps.last().unwrap();
        wait_until(Duration::from_secs(20), "the fresh Go's IDs", || {
            fresh.2.ids().len() > 200
        });
        let fresh_first = fresh.2.ids().iter().map(|&id| time_of(id)).min().unwrap();
        println!(
            "Go killed with -9 holding node id {killed_node}; the fresh process holds {}",
            fresh.2.node()
        );
        assert!(
            fresh.2.node() != killed_node || fresh_first > killed_last,
            "the fresh Go process makes IDs under node id {killed_node} from {fresh_first}, \
             the killed one's last at {killed_last}"
        );

        // The registry's primary killed with -9 and its standby promoted.
        primary.crash();
        let failed_over = Instant::now();
        standby.promote();
        let promoted = Instant::now();
        let before = apps.len();
        let answered: Vec<usize> = server_calls
            .iter()
            .map(|c| c.0.load(Ordering::Relaxed))
            .collect();
        let promoted_ms = now_ms();
        // Gone on: IDs a lease past the promotion, which only a renewal through the new
        // primary allows (a lease taken before the failover runs out by then).
        let resumed = |app: &App| {
            app.ids()
                .iter()
                .any(|&id| time_of(id) > promoted_ms + LEASE_MS)
        };
        // A killed process (the Go one) stays killed; each other one goes on within three
        // leases, or is killed and started afresh.
        let live: Vec<usize> = (0..apps.len()).filter(|&i| i != go).collect();
        let deadline = promoted + Duration::from_millis(3 * LEASE_MS as u64);
        while Instant::now() < deadline && !live.iter().all(|&i| resumed(&apps[i].2)) {
            thread::sleep(Duration::from_millis(100));
        }
        for &i in &live {
            if !resumed(&apps[i].2) {
                let (lang, name) = (apps[i].0, apps[i].1.clone());
                println!(
                    "{name}: no ID a lease past the promotion within three leases ({:?}): \
                     killed and started afresh",
                    apps[i].2.errors().last()
                );
                apps[i].2.kill();
                start(lang, format!("{name} (after the failover)"), &mut apps);
                restarted.push(name);
            }
        }
        for (_, name, app) in &apps[before..] {
            wait_until(
                Duration::from_secs(20),
                "the restarted client's IDs",
                || app.ids().len() > 100,
            );
            println!("{name} holds node id {}", app.node());
        }
        wait_until(
            Duration::from_secs(20),
            "every server's IDs after the failover",
            || {
                server_calls
                    .iter()
                    .zip(&answered)
                    .all(|(c, &before)| c.0.load(Ordering::Relaxed) > before + 10)
            },
        );
        println!(
            "the registry's primary killed, its standby promoted {:?} later; every client made \
             an ID a lease past the promotion, and every server IDs, {:?} after the promotion",
            promoted - failed_over,
            promoted.elapsed()
        );
        thread::sleep(Duration::from_millis(500));
        for (_, _, app) in &mut apps {
            app.kill();
        }
        thread::sleep(Duration::from_millis(200));
        stop.store(true, Ordering::Relaxed);
    });
    println!("made for {:?}", started.elapsed());

    // The servers' tables collected into the first member's.
    let mut table = members[0].connect();
    for member in &members[1..] {
        let rows = member
            .connect()
            .query("SELECT id, maker FROM made", &[])
            .unwrap();
        let ids: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
        let names: Vec<String> = rows.iter().map(|r| r.get(1)).collect();
        table
            .execute(
                "INSERT INTO made SELECT * FROM unnest($1::bigint[], $2::text[])",
                &[&ids, &names],
            )
            .unwrap();
    }
    for (_, name, app) in &apps {
        makers.push(Maker {
            name: name.clone(),
            node: app.node(),
        });
    }
    let rows = table.query("SELECT id, maker FROM made", &[]).unwrap();
    let mut by_maker: std::collections::HashMap<String, Vec<i64>> = Default::default();
    for row in &rows {
        by_maker.entry(row.get(1)).or_default().push(row.get(0));
    }
    let twice: i64 = members[0].query_one("SELECT count(*) - count(DISTINCT id) FROM made");
    // Each maker's IDs carry its node id; its span of time (first and last ID's).
    let mut spans = Vec::new();
    for maker in &makers {
        let ids = by_maker.get(&maker.name).cloned().unwrap_or_default();
        assert!(!ids.is_empty(), "no ID of {}", maker.name);
        // Every ID a client said it made is in the table.
        if let Some((_, _, app)) = apps.iter().find(|a| a.1 == maker.name) {
            assert_eq!(
                ids.len(),
                app.ids().len(),
                "{}'s IDs in the table",
                maker.name
            );
        }
        let wrong: Vec<&i64> = ids
            .iter()
            .filter(|&&id| node_of(id) != maker.node)
            .collect();
        assert!(
            wrong.is_empty(),
            "{} (node id {}) made {} IDs under another node id, the first {}",
            maker.name,
            maker.node,
            wrong.len(),
            wrong[0]
        );
        let times = ids.iter().map(|&id| time_of(id));
        spans.push((
            maker.node,
            times.clone().min().unwrap(),
            times.max().unwrap(),
            &maker.name,
        ));
        println!("{}: node id {}, {} IDs", maker.name, maker.node, ids.len());
    }
    for ((answered, errors), member) in server_calls.iter().zip(["m0", "m1", "m2"]) {
        let mut wordings: Vec<String> = errors.lock().unwrap().iter().map(|e| wording(e)).collect();
        wordings.dedup();
        println!(
            "server {member}: {} inserts of 100, {} refused: {wordings:?}",
            answered.load(Ordering::Relaxed),
            errors.lock().unwrap().len()
        );
    }
    // Each client's pause (the longest time between two of its IDs) and refusals.
    for (_, name, app) in &apps {
        let mut times: Vec<i64> = app.ids().iter().map(|&id| time_of(id)).collect();
        times.sort();
        let pause = times.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
        let mut wordings: Vec<String> = app.errors().iter().map(|e| wording(e)).collect();
        wordings.dedup();
        println!(
            "{name}: longest pause {pause} ms, {} refusals: {wordings:?}",
            app.errors().len()
        );
    }
    println!("restarted after the failover: {restarted:?}; IDs in the table twice: {twice}");
    // No two holders of one node id at once.
    spans.sort();
    for pair in spans.windows(2) {
        let ((node, _, last, earlier), (next, first, _, later)) = (pair[0], pair[1]);
        assert!(
            node != next || last < first,
            "node id {node}: {earlier} made IDs until {last}, {later} from {first}"
        );
    }
    assert_eq!(twice, 0, "IDs made twice");
    all_distinct(rows.iter().map(|r| r.get::<_, i64>(0)));
    println!(
        "{} IDs in the shared table, none twice\nthe registry:\n{}",
        rows.len(),
        registry_rows(&standby)
    );
}
