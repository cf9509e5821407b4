//! Node-id leases for application processes (docs/FLEETS.md, "Applications"), on real servers:
//! a registry, members that make IDs, and applications that make their own through the reference
//! clients (examples/python/snowflake_lease.py, examples/js/snowflake-lease.mjs,
//! examples/go/snowflakelease and examples/java/SnowflakeLease.java, each run as a
//! process of its own by its check program) or through the SQL protocol driven from here. Every
//! case counts every ID made, by applications and servers: none twice.

use snowflake_it::registry::{member_config, registry_rows, registry_server, LEASE_MS};
use snowflake_it::{assert_error, describe, repo_root, take_ids, wait_until, Proxy, Server};
use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
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
#[derive(Clone, Copy, Debug)]
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

/// An application process: a client's check in one mode, its output lines gathered.
struct App {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
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
        let out = child.stdout.take().unwrap();
        let gathered = Arc::clone(&lines);
        thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                gathered.lock().unwrap().push(line);
            }
        });
        App { child, lines }
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
    let registry = registry_server(&format!("{name}-registry"));
    let member = Server::start(
        name,
        member_config(&registry.conninfo("postgres"), Some(node)),
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
    assert_eq!(
        nodes.iter().collect::<HashSet<_>>().len(),
        8,
        "one node id each: {nodes:?}\n{}",
        registry_rows(&registry)
    );
    let made = all_distinct(
        apps.iter()
            .flat_map(|app| app.ids().into_iter().chain(app.keys()))
            .chain(servers.concat()),
    );
    assert_eq!(made, 6 * (30_000 + 2) + 2 * 50_000);
    // Released (each process's and its recipe's): the registry says so, and each application's
    // row names its label.
    let released: i64 = registry.query_one(
        "SELECT count(*) FROM snowflake_nodes WHERE system_identifier = '0' \
         AND released_at IS NOT NULL AND holder_label LIKE '% (application via %'",
    );
    assert_eq!(released, 12, "{}", registry_rows(&registry));
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
        let stopped_after = cut_at.elapsed();
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
/// step Go's: its runtime reads the clock through the vDSO, past LD_PRELOAD).
#[test]
fn an_application_clock_stepped_back_holds_and_ahead_is_refused() {
    let (_registry, member) = fleet("apps-clock", 900);
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
