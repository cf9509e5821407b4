//! The monitoring pg_snowflake ships (`packaging/monitoring/`): a real postgres_exporter with
//! the queries file, against real servers, scraped over HTTP like Prometheus does. Every metric
//! of the file is there with the value `snowflake_stats()` shows at that moment (and nothing
//! else under `pg_snowflake_`), with the file's help text and type; the IDs counter moves when
//! IDs are made; with a registry, stopping it moves the lease down to 0 and the refusal state to
//! "lease expired", and starting it again moves them back. And the alerting rules: `promtool
//! check rules`, `promtool test rules`, a firing and a silent unit test for every alert, and
//! every runbook_url pointing at a section that exists.

use snowflake_it::exporter::{program_on_path, unix_s, Exporter, Sample, Scrape};
use snowflake_it::registry::{claimed_node, member_config, registry_server, LEASE_MS};
use snowflake_it::stats::{layout_node_bits, stats, Stats};
use snowflake_it::{repo_root, run, take_ids, Config, Server};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

const QUERIES: &str = "packaging/monitoring/pg_snowflake-queries.yaml";
const RULES: &str = "packaging/monitoring/pg_snowflake-alerts.yaml";
const RULE_TESTS: &str = "pgrx-tests/monitoring/alerts.test.yaml";

/// The clock check's limit the registry's members of these tests run with
/// (`snowflake_it::registry::member_config`), in seconds.
const MAX_CLOCK_SKEW_S: f64 = 2.0;

/// Every reason `snowflake_stats().refusing` gives (docs/GUIDE.md).
const REFUSALS: [&str; 8] = [
    "node id unset",
    "awaiting the old state file",
    "awaiting the registry claim",
    "claim refused",
    "claim lost",
    "lease expired",
    "awaiting a fenced lease",
    "clock skew",
];

/// The states of a node id in `snowflake_registry()` (docs/FLEETS.md).
const NODE_STATES: [&str; 5] = ["live", "lost", "retired", "free", "stray"];

fn path(relative: &str) -> PathBuf {
    repo_root().join(relative)
}

// --- The queries file ---------------------------------------------------------------------

/// A metric of the queries file: its name (section, "_", column), usage and description.
#[derive(Debug)]
struct FileMetric {
    name: String,
    usage: String,
    description: String,
}

/// The metrics of the queries file. It is read line by line, in the one shape the file uses
/// (sections at the margin, `    - column:` under `metrics:`, then `usage:` and `description:`),
/// not as YAML in general: the exporter itself parses it (and the tests check it loaded it).
fn file_metrics() -> Vec<FileMetric> {
    let text = std::fs::read_to_string(path(QUERIES)).expect("the queries file");
    let (mut section, mut metrics) = (String::new(), Vec::<FileMetric>::new());
    for line in text.lines() {
        let quoted = |prefix: &str| {
            line.strip_prefix(prefix)
                .map(|rest| rest.trim_matches('"').to_string())
        };
        if let Some(name) = line
            .strip_suffix(':')
            .filter(|l| !l.starts_with([' ', '#']))
        {
            section = name.to_string();
        } else if let Some(column) = line
            .strip_prefix("    - ")
            .and_then(|rest| rest.strip_suffix(':'))
        {
            metrics.push(FileMetric {
                name: format!("{section}_{column}"),
                usage: String::new(),
                description: String::new(),
            });
        } else if let Some(usage) = quoted("        usage: ") {
            metrics.last_mut().expect("a metric").usage = usage;
        } else if let Some(description) = quoted("        description: ") {
            metrics.last_mut().expect("a metric").description = description;
        }
    }
    metrics.retain(|m| m.usage != "LABEL");
    assert!(
        metrics.iter().all(|m| !m.description.is_empty()),
        "{metrics:?}"
    );
    metrics
}

// --- What snowflake_stats() shows -----------------------------------------------------------

/// A series: its name and labels (without the exporter's `server`).
type Series = (&'static str, Vec<(&'static str, String)>);

/// What each series must show, stated apart from the queries file: every metric's meaning in
/// terms of `snowflake_stats()`, in Prometheus' base units. `None`: the series must be absent.
fn expected(s: &Stats, node_bits: u32) -> BTreeMap<Series, Option<f64>> {
    let ms = |v: i64| v as f64 / 1000.0;
    let registry = s.registry_nodes.is_some();
    let mut series = vec![
        ("pg_snowflake_ids_issued_total", s.ids_issued as f64),
        ("pg_snowflake_lead_seconds", ms(s.lead_ms)),
        ("pg_snowflake_borrowed_seconds", ms(s.borrowed_ms)),
        (
            "pg_snowflake_clock_regressions_total",
            s.clock_regressions as f64,
        ),
        (
            "pg_snowflake_sequence_exhausted_seconds_total",
            ms(s.exhausted_ms),
        ),
        ("pg_snowflake_overload_waits_total", s.overload_waits as f64),
        ("pg_snowflake_reservations_total", s.reservations as f64),
        (
            "pg_snowflake_reservation_waits_total",
            s.reservation_waits as f64,
        ),
        (
            "pg_snowflake_renewal_failures_total",
            s.renewal_failures as f64,
        ),
        ("pg_snowflake_clock_jumps_total", s.clock_jumps as f64),
        ("pg_snowflake_ids_past_mark_total", s.ids_past_mark as f64),
        ("pg_snowflake_renewing", f64::from(u8::from(s.renewing))),
        ("pg_snowflake_layout_node_ids", 2f64.powi(node_bits as i32)),
        (
            "pg_snowflake_time_field_end_timestamp_seconds",
            unix_s(s.time_field_ends),
        ),
    ]
    .into_iter()
    .map(|(name, value)| (name, vec![], Some(value)))
    .collect::<Vec<_>>();
    let optional = [
        ("pg_snowflake_node_id", s.node_id.map(f64::from)),
        (
            "pg_snowflake_last_issued_timestamp_seconds",
            s.last_issued.map(unix_s),
        ),
        (
            "pg_snowflake_reserved_until_timestamp_seconds",
            s.reserved_until.map(unix_s),
        ),
        (
            "pg_snowflake_registry_lease_seconds",
            registry.then_some(LEASE_MS as f64 / 1000.0),
        ),
        (
            "pg_snowflake_registry_max_clock_skew_seconds",
            registry.then_some(MAX_CLOCK_SKEW_S),
        ),
        (
            "pg_snowflake_registry_claim_generation",
            s.registry_generation.map(|g| g as f64),
        ),
        (
            "pg_snowflake_registry_lease_remaining_seconds",
            s.lease_remaining_ms.map(ms),
        ),
        (
            "pg_snowflake_registry_clock_offset_seconds",
            s.registry_clock_offset_ms.map(ms),
        ),
    ];
    series.extend(optional.map(|(name, value)| (name, vec![], value)));
    let mut reasons: BTreeSet<&str> = REFUSALS.into();
    reasons.extend(s.refusing.as_deref());
    for reason in reasons {
        let on = s.refusing.as_deref() == Some(reason);
        series.push((
            "pg_snowflake_refusal_state",
            vec![("reason", reason.to_string())],
            Some(f64::from(u8::from(on))),
        ));
    }
    // No registry, or one that could not list its node ids (the exporter's query fails too):
    // no series.
    let nodes = s.registry_nodes.as_ref().filter(|n| !n.is_empty());
    for state in NODE_STATES {
        series.push((
            "pg_snowflake_registry_node_ids",
            vec![("state", state.to_string())],
            nodes.map(|n| n.get(state).copied().unwrap_or(0) as f64),
        ));
    }
    series
        .into_iter()
        .map(|(name, labels, value)| ((name, labels), value))
        .collect()
}

/// How far a value that moves with the clock (the lease left, the lead) may drift between the
/// queries that bracket a scrape, in seconds.
const DRIFT_S: f64 = 0.25;

/// Compares a scrape with `snowflake_stats()` read just before and just after it: every series
/// of the queries file present with a value between the two (a series absent in both absent),
/// nothing else under `pg_snowflake_`, the file's help texts and types. Returns what differs.
fn mismatches(scrape: &Scrape, before: &Stats, after: &Stats, node_bits: u32) -> Vec<String> {
    let mut wrong = vec![];
    let key = |name: &str, labels: &[(&str, String)]| {
        format!(
            "{name}{{{}}}",
            labels
                .iter()
                .map(|(k, v)| format!("{k}={v:?}"))
                .collect::<Vec<_>>()
                .join(",")
        )
    };
    let (early, late) = (expected(before, node_bits), expected(after, node_bits));
    let all: BTreeSet<&Series> = early.keys().chain(late.keys()).collect();
    for series @ (name, labels) in all {
        let wanted: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let got = scrape.value(name, &wanted);
        let (a, b) = (
            early.get(series).copied().flatten(),
            late.get(series).copied().flatten(),
        );
        let what = key(name, labels);
        match (got, a, b) {
            (None, None, None) => {}
            (Some(v), Some(a), Some(b)) => {
                let slack = if name.ends_with("_lease_remaining_seconds")
                    || name.ends_with("_lead_seconds")
                    || name.ends_with("_borrowed_seconds")
                {
                    DRIFT_S
                } else if name.ends_with("_timestamp_seconds") {
                    // float8 seconds since 1970 keep microseconds to within a few.
                    1e-4
                } else {
                    1e-9
                };
                if !(a.min(b) - slack <= v && v <= a.max(b) + slack) {
                    wrong.push(format!(
                        "{what} = {v}, snowflake_stats() shows {a} then {b}"
                    ));
                }
            }
            // Appearing or vanishing between the two readings: either is right.
            (_, a, b) if a.is_none() != b.is_none() => {}
            (got, a, _) => wrong.push(format!("{what} = {got:?}, expected {a:?}")),
        }
    }
    for sample in scrape.samples.iter().filter(is_ours) {
        let labels: Vec<(&str, String)> = sample
            .labels
            .iter()
            .filter(|(k, _)| k.as_str() != "server")
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        let known = early
            .keys()
            .chain(late.keys())
            .any(|(name, l)| *name == sample.name && *l == labels);
        if !known {
            wrong.push(format!("an unexpected series: {sample:?}"));
        }
    }
    for metric in file_metrics() {
        if !scrape.samples.iter().any(|s| s.name == metric.name) {
            continue;
        }
        let kind = metric.usage.to_lowercase();
        if scrape.types.get(&metric.name) != Some(&kind) {
            wrong.push(format!("{} is not a {kind}", metric.name));
        }
        if scrape.help.get(&metric.name) != Some(&metric.description) {
            wrong.push(format!("{}'s help is not the file's", metric.name));
        }
    }
    for (name, expected) in [("pg_up", 1.0), ("pg_exporter_user_queries_load_error", 0.0)] {
        if scrape.value(name, &[]) != Some(expected) {
            wrong.push(format!("{name} = {:?}", scrape.value(name, &[])));
        }
    }
    wrong
}

fn is_ours(sample: &&Sample) -> bool {
    sample.name.starts_with("pg_snowflake_")
}

/// Scrapes until a scrape agrees with `snowflake_stats()` around it (at most three tries: a
/// heartbeat or a renewal between the readings can put a moving value just outside them);
/// panics with the differences otherwise. Returns the scrape and the reading after it.
fn scrape_matching_stats(server: &Server, exporter: &Exporter, registry: bool) -> (Scrape, Stats) {
    let node_bits = layout_node_bits(server);
    let mut wrong = vec![];
    for _ in 0..3 {
        let before = stats(server, registry);
        let scrape = exporter.scrape();
        let after = stats(server, registry);
        wrong = mismatches(&scrape, &before, &after, node_bits);
        if wrong.is_empty() {
            return (scrape, after);
        }
    }
    panic!(
        "the exporter's metrics differ from snowflake_stats():\n{}\nthe exporter's log:\n{}",
        wrong.join("\n"),
        exporter.log()
    );
}

/// Scrapes every 100 ms until `done` holds for a scrape, at most `timeout`; returns it.
fn scrape_until(
    exporter: &Exporter,
    timeout: Duration,
    what: &str,
    done: impl Fn(&Scrape) -> bool,
) -> Scrape {
    let started = Instant::now();
    loop {
        let scrape = exporter.scrape();
        if done(&scrape) {
            return scrape;
        }
        assert!(
            started.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}; the last scrape:\n{:#?}\n\
             the exporter's log:\n{}",
            scrape.samples.iter().filter(is_ours).collect::<Vec<_>>(),
            exporter.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn ids_issued(scrape: &Scrape) -> f64 {
    scrape
        .value("pg_snowflake_ids_issued_total", &[])
        .expect("pg_snowflake_ids_issued_total")
}

/// The same metric names in the queries file as in [`expected`]: a metric added to one needs
/// the other.
#[test]
fn every_metric_of_the_queries_file_has_an_expectation_here() {
    let stats = Stats {
        node_id: None,
        ids_issued: 0,
        last_issued: None,
        lead_ms: 0,
        borrowed_ms: 0,
        clock_regressions: 0,
        exhausted_ms: 0,
        overload_waits: 0,
        reservations: 0,
        reserved_until: None,
        time_field_ends: SystemTime::UNIX_EPOCH,
        reservation_waits: 0,
        renewal_failures: 0,
        renewing: false,
        clock_jumps: 0,
        refusing: None,
        registry_generation: None,
        lease_remaining_ms: None,
        registry_clock_offset_ms: None,
        ids_past_mark: 0,
        registry_nodes: None,
    };
    let here: BTreeSet<&str> = expected(&stats, 10).keys().map(|(name, _)| *name).collect();
    let metrics = file_metrics();
    let in_file: BTreeSet<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(in_file, here);
    for metric in &metrics {
        let unit_ok = match metric.usage.as_str() {
            "COUNTER" => metric.name.ends_with("_total"),
            "GAUGE" => !metric.name.ends_with("_total"),
            other => panic!("{}: usage {other}", metric.name),
        };
        assert!(unit_ok, "{} is a {}", metric.name, metric.usage);
        assert!(
            !metric.name.contains("_ms") && !metric.name.contains("milliseconds"),
            "{}: Prometheus' base unit of time is the second",
            metric.name
        );
    }
}

#[test]
fn the_exporter_shows_snowflake_stats_and_the_ids_counter_moves() {
    // Reservations of 10 minutes: one write covers the test, so the counters stand still
    // between the readings around a scrape unless the test moves them. 8 node bits, not the
    // default 10: the node-id capacity must follow the layout (256), not a constant.
    let server = Server::start(
        "monitoring",
        Config::node(7)
            .setting("pg_snowflake.reservation_ms = 600000")
            .setting("pg_snowflake.node_bits = 8"),
    );
    let mut client = server.connect();
    take_ids(&mut client, 1_000, 1_000);
    let exporter = Exporter::start(&server, &path(QUERIES));

    let (scrape, stats) = scrape_matching_stats(&server, &exporter, false);
    assert_eq!(stats.node_id, Some(7));
    assert_eq!(
        scrape.value("pg_snowflake_layout_node_ids", &[]),
        Some(256.0)
    );
    assert_eq!(
        scrape.value("pg_exporter_last_scrape_error", &[]),
        Some(0.0),
        "without a registry every query runs (none calls snowflake_registry()):\n{}",
        exporter.log()
    );
    let before = ids_issued(&scrape);
    assert!(before >= 1_000.0, "{before}");

    take_ids(&mut client, 5_000, 1_000);
    let moved = scrape_until(
        &exporter,
        Duration::from_secs(30),
        "the IDs counter to move by 5,000",
        |scrape| ids_issued(scrape) >= before + 5_000.0,
    );
    assert_eq!(ids_issued(&moved), before + 5_000.0);
    scrape_matching_stats(&server, &exporter, false);
}

#[test]
fn with_a_registry_the_exporter_shows_the_lease_run_out_when_the_registry_stops() {
    let registry = registry_server("monitoring-registry");
    let member = Server::start(
        "monitoring-member",
        member_config(&registry.conninfo("postgres"), None)
            .setting("pg_snowflake.reservation_ms = 600000"),
    );
    member.execute("SELECT snowflake_registry_create()");
    let node = claimed_node(&member);
    take_ids(&mut member.connect(), 1_000, 1_000);
    let exporter = Exporter::start(&member, &path(QUERIES));

    let (scrape, shown) = scrape_matching_stats(&member, &exporter, true);
    assert_eq!(shown.node_id, Some(node));
    assert_eq!(
        scrape.value("pg_snowflake_registry_node_ids", &[("state", "live")]),
        Some(1.0)
    );
    let lease = |scrape: &Scrape| {
        scrape
            .value("pg_snowflake_registry_lease_remaining_seconds", &[])
            .expect("the lease left")
    };
    let expired = |scrape: &Scrape| {
        scrape.value("pg_snowflake_refusal_state", &[("reason", "lease expired")]) == Some(1.0)
    };
    assert!(lease(&scrape) > 0.0 && !expired(&scrape));

    // Fenced (the default): the lease runs out within its 3 s of the last heartbeat.
    registry.stop();
    let out = scrape_until(
        &exporter,
        Duration::from_secs(30),
        "the lease to run out with the registry stopped",
        |scrape| expired(scrape) && lease(scrape) == 0.0,
    );
    assert_eq!(
        stats(&member, false).refusing.as_deref(),
        Some("lease expired")
    );
    assert!(
        out.value("pg_snowflake_registry_node_ids", &[("state", "live")])
            .is_none(),
        "the registry's view cannot be listed while it is down"
    );
    scrape_matching_stats(&member, &exporter, true);

    registry.start_again();
    scrape_until(
        &exporter,
        Duration::from_secs(30),
        "the lease extended with the registry back",
        |scrape| !expired(scrape) && lease(scrape) > 0.0,
    );
    scrape_matching_stats(&member, &exporter, true);
}

// --- The alerting rules ------------------------------------------------------------------

#[test]
fn promtool_checks_the_rules_and_passes_their_unit_tests() {
    let promtool = program_on_path("promtool", "prometheus");
    let checked = run(
        &promtool,
        &["check", "rules", path(RULES).to_str().unwrap()],
    );
    assert!(checked.contains("SUCCESS"), "{checked}");
    let tested = run(
        &promtool,
        &["test", "rules", path(RULE_TESTS).to_str().unwrap()],
    );
    assert!(tested.contains("SUCCESS"), "{tested}");
}

/// A heading's anchor as GitHub makes it: lower case, punctuation other than `-` dropped,
/// spaces made hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[test]
fn every_alert_has_a_firing_and_a_silent_test_and_a_runbook_section_that_exists() {
    let rules = std::fs::read_to_string(path(RULES)).unwrap();
    let mut runbooks: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut alert = String::new();
    for line in rules.lines().map(str::trim) {
        // Alertmanager's and Grafana's templates read runbook_url; a `runbook` would link nowhere.
        assert!(
            !line.starts_with("runbook:"),
            "{alert}: a runbook annotation, not runbook_url"
        );
        if let Some(name) = line.strip_prefix("- alert: ") {
            alert = name.to_string();
            runbooks.insert(alert.clone(), vec![]);
        } else if let Some(link) = line.strip_prefix("runbook_url: ") {
            runbooks
                .get_mut(&alert)
                .expect("a runbook_url inside an alert")
                .push(link.trim_matches('"').to_string());
        }
    }
    assert!(runbooks.len() >= 10, "{runbooks:?}");
    for (alert, links) in &runbooks {
        let [link] = links.as_slice() else {
            panic!("{alert} has {} runbook_url annotations", links.len());
        };
        let (doc, section) = link
            .split_once('#')
            .unwrap_or_else(|| panic!("{alert}: {link} names no section"));
        assert!(
            doc == "docs/SAFETY.md" || doc == "docs/FLEETS.md",
            "{alert}: {link}"
        );
        let text = std::fs::read_to_string(path(doc)).unwrap();
        let anchors: BTreeSet<String> = text
            .lines()
            .filter_map(|line| line.strip_prefix('#'))
            .map(|heading| anchor(heading.trim_start_matches('#')))
            .collect();
        assert!(
            anchors.contains(section),
            "{alert}: {link}: no such section in {doc} ({anchors:?})"
        );
    }

    // In the tests file each `alertname:` is followed by its `exp_alerts:`, empty or not.
    let tests = std::fs::read_to_string(path(RULE_TESTS)).unwrap();
    let (mut firing, mut silent) = (BTreeSet::new(), BTreeSet::new());
    let mut current = None;
    for line in tests.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix("alertname: ") {
            current = Some(name.to_string());
        } else if let Some(rest) = line.strip_prefix("exp_alerts:") {
            let name = current.take().expect("exp_alerts after an alertname");
            if rest.trim() == "[]" {
                silent.insert(name);
            } else {
                firing.insert(name);
            }
        }
    }
    let alerts: BTreeSet<String> = runbooks.keys().cloned().collect();
    assert_eq!(firing, alerts, "the alerts with a test that fires them");
    assert_eq!(
        silent, alerts,
        "the alerts with a test that keeps them silent"
    );
}
