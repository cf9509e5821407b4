//! The Grafana dashboard pg_snowflake ships (`packaging/monitoring/pg_snowflake-dashboard.json`):
//! its shape (Grafana 10's schema, a Prometheus data source variable every panel uses, a job
//! variable and a per-server variable within the job that every metric of every query filters
//! on, rates over `$__rate_interval` rather than a fixed window), and every panel's query, read
//! from the file, `$__rate_interval` worked out as Grafana does, evaluated by a real Prometheus
//! scraping real postgres_exporters with the queries file over real servers: a plain one, a
//! member of a node-id registry, and one without a node id that refuses IDs. Each query must
//! return series (a panel that shows nothing fails the test, named by its title), and where a
//! panel shows a number of `snowflake_stats()` or `snowflake_registry()` (or the exporter's
//! health) the value must be the one the server shows.

use serde_json::Value;
use snowflake_it::exporter::{unix_s, Exporter};
use snowflake_it::prometheus::{Prometheus, Series};
use snowflake_it::registry::{claimed_node, member_config, registry_server, LEASE_MS};
use snowflake_it::stats::{layout_node_bits, stats, Stats};
use snowflake_it::{repo_root, take_ids, wait_until, Config, Server};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

const DASHBOARD: &str = "packaging/monitoring/pg_snowflake-dashboard.json";
const QUERIES: &str = "packaging/monitoring/pg_snowflake-queries.yaml";

/// The panel types a dashboard of Grafana 10 and later draws (rows hold no query).
const PANEL_TYPES: [&str; 6] = [
    "timeseries",
    "stat",
    "table",
    "gauge",
    "bargauge",
    "state-timeline",
];

/// What every panel and query names as its data source: the `datasource` variable.
const DATASOURCE: &str = "${datasource}";

/// The filters every metric of every query carries: the `job` and `instance` variables.
const JOB_FILTER: &str = "job=~\"$job\"";
const INSTANCE_FILTER: &str = "instance=~\"$instance\"";

/// Grafana's macro for the window of `rate()` and `increase()`, which grows with the scrape
/// interval: a fixed `[1m]` holds one sample at Prometheus' default 1-minute scrape, and a rate
/// of one sample is no series.
const RATE_INTERVAL: &str = "$__rate_interval";

/// The one fixed window a query may have: a count over the last hour, in a panel whose title
/// says so.
const LAST_HOUR: (&str, &str) = ("[1h]", ", last hour");

/// The data points Grafana asks of a panel (its "Max data points", by default the panel's width
/// in pixels): a panel about 1,000 pixels wide.
const MAX_DATA_POINTS: u32 = 1000;

/// How often the tests' Prometheus scrapes.
const SCRAPE_INTERVAL: Duration = Duration::from_secs(1);

/// The clock check's limit of the registry's members in these tests
/// (`snowflake_it::registry::member_config`), in seconds.
const MAX_CLOCK_SKEW_S: f64 = 2.0;

/// The states of a node id in `snowflake_registry()` (docs/FLEETS.md), each a series of
/// `pg_snowflake_registry_node_ids`.
const NODE_STATES: [&str; 5] = ["live", "lost", "retired", "free", "stray"];

const YEAR_S: f64 = 365.25 * 86400.0;

// --- The dashboard file ------------------------------------------------------------------

fn dashboard() -> Value {
    let path = repo_root().join(DASHBOARD);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{DASHBOARD} is not JSON: {e}"))
}

/// A panel that draws data: its title, type, data source, and its queries.
#[derive(Debug)]
struct Panel {
    title: String,
    kind: String,
    id: i64,
    datasource: Value,
    targets: Vec<Target>,
}

/// One query of a panel.
#[derive(Debug)]
struct Target {
    ref_id: String,
    expr: String,
    datasource: Value,
}

/// The dashboard's panels in order, rows left out (a collapsed row's panels included).
fn panels(dashboard: &Value) -> Vec<Panel> {
    let mut all = vec![];
    for panel in dashboard["panels"].as_array().expect("a list of panels") {
        let nested = panel["panels"].as_array().into_iter().flatten();
        for panel in std::iter::once(panel).chain(nested) {
            if panel["type"] == "row" {
                continue;
            }
            let targets = panel["targets"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| Target {
                    ref_id: t["refId"].as_str().unwrap_or_default().to_string(),
                    expr: t["expr"].as_str().unwrap_or_default().to_string(),
                    datasource: t["datasource"].clone(),
                })
                .collect();
            all.push(Panel {
                title: panel["title"].as_str().unwrap_or_default().to_string(),
                kind: panel["type"].as_str().unwrap_or_default().to_string(),
                id: panel["id"].as_i64().unwrap_or(-1),
                datasource: panel["datasource"].clone(),
                targets,
            });
        }
    }
    all
}

/// The template variable named `name`.
fn variable<'d>(dashboard: &'d Value, name: &str) -> &'d Value {
    dashboard["templating"]["list"]
        .as_array()
        .expect("a list of template variables")
        .iter()
        .find(|v| v["name"] == name)
        .unwrap_or_else(|| panic!("no template variable {name}"))
}

/// A variable's query as text (Grafana 10 writes `{"query": …}`, older ones a string).
fn variable_query(variable: &Value) -> &str {
    variable["query"]["query"]
        .as_str()
        .or(variable["query"].as_str())
        .unwrap_or_default()
}

/// `label_values(selector, label)`'s two parts.
fn label_values_parts(query: &str) -> (&str, &str) {
    query
        .strip_prefix("label_values(")
        .and_then(|q| q.strip_suffix(')'))
        .and_then(|q| q.rsplit_once(','))
        .map(|(selector, label)| (selector.trim(), label.trim()))
        .unwrap_or_else(|| panic!("not label_values(selector, label): {query}"))
}

/// A data source reference to the `datasource` variable: `"${datasource}"`, or an object whose
/// `uid` is it.
fn is_the_variable(datasource: &Value) -> bool {
    datasource == DATASOURCE || datasource["uid"] == DATASOURCE
}

/// Words of PromQL that are neither metrics nor functions.
const KEYWORDS: [&str; 11] = [
    "and",
    "or",
    "unless",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "bool",
    "offset",
];

/// The selectors of the metrics an expression reads: each metric's name with what follows it
/// in braces ("" without braces). Label names (in braces, or in the parentheses of `by`,
/// `without`, `on`…), strings, numbers, range windows and function names are not metrics.
fn selectors(expr: &str) -> Vec<(String, String)> {
    let chars: Vec<char> = expr.chars().collect();
    let closing = |from: usize, close: char| {
        (from..chars.len())
            .find(|&j| chars[j] == close)
            .unwrap_or(chars.len())
    };
    let (mut found, mut i) = (vec![], 0);
    while i < chars.len() {
        let c = chars[i];
        if c == '"' {
            i = closing(i + 1, '"') + 1;
        } else if c == '[' {
            i = closing(i, ']') + 1;
        } else if c.is_ascii_digit() {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':')
            {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let mut next = i;
            while next < chars.len() && chars[next] == ' ' {
                next += 1;
            }
            let follows = chars.get(next).copied();
            let rest: String = chars[next..].iter().collect();
            // `sum by (…) (…)`: an aggregation with its grouping first.
            let grouped = ["by ", "by(", "without ", "without("]
                .iter()
                .any(|g| rest.starts_with(g));
            if KEYWORDS.contains(&word.as_str()) {
                // `by (instance)` and the like: label names.
                if follows == Some('(') {
                    i = closing(next, ')') + 1;
                }
            } else if follows == Some('(') || grouped {
                // A function or an aggregation.
            } else if follows == Some('{') {
                let end = closing(next, '}');
                found.push((word, chars[next + 1..end].iter().collect()));
                i = end + 1;
            } else {
                found.push((word, String::new()));
            }
        } else {
            i += 1;
        }
    }
    found
}

/// The range windows of an expression, brackets included (`[$__rate_interval]`, `[1h]`).
fn windows(expr: &str) -> Vec<&str> {
    expr.match_indices('[')
        .map(|(start, _)| {
            let end = expr[start..]
                .find(']')
                .map_or(expr.len(), |e| start + e + 1);
            &expr[start..end]
        })
        .collect()
}

// --- Grafana's intervals --------------------------------------------------------------------

/// Grafana's rounding of a computed interval to a round figure (`roundInterval` of its
/// `rangeutil`), up to a minute; a longer one is left as it is here (the live test's stays under
/// a minute, and `$__rate_interval` holds four scrapes whatever the rounding).
fn round_interval(interval: Duration) -> Duration {
    let ms = interval.as_millis();
    let rounded = [
        (15, 10),
        (35, 20),
        (75, 50),
        (150, 100),
        (350, 200),
        (750, 500),
        (1_500, 1_000),
        (3_500, 2_000),
        (7_500, 5_000),
        (12_500, 10_000),
        (17_500, 15_000),
        (25_000, 20_000),
        (45_000, 30_000),
        (90_000, 60_000),
    ]
    .iter()
    .find(|(below, _)| ms < *below)
    .map(|(_, to)| *to);
    rounded.map_or(interval, |ms| Duration::from_millis(ms as u64))
}

/// Grafana's `$__interval` (a range query's step): the time range over the panel's data
/// points, rounded, and never under the data source's scrape interval (the panel's "Min
/// interval" when it sets none, as no panel of the dashboard does).
fn grafana_interval(range: Duration, max_data_points: u32, scrape: Duration) -> Duration {
    round_interval(range / max_data_points).max(scrape)
}

/// Grafana's `$__rate_interval`: max(`$__interval` + scrape interval, 4 × scrape interval).
fn grafana_rate_interval(interval: Duration, scrape: Duration) -> Duration {
    (interval + scrape).max(4 * scrape)
}

/// A Grafana relative time such as `now-6h` as the range it covers to now.
fn relative_range(from: &str) -> Duration {
    let span = from
        .strip_prefix("now-")
        .unwrap_or_else(|| panic!("not now-N: {from}"));
    let (number, unit) = span.split_at(span.len() - 1);
    let number: u64 = number.parse().unwrap_or_else(|_| panic!("{from}"));
    let unit_s = match unit {
        "m" => 60,
        "h" => 3600,
        "d" => 86400,
        _ => panic!("{from}: unit {unit}"),
    };
    Duration::from_secs(number * unit_s)
}

/// A duration as PromQL writes it: whole milliseconds.
fn promql_duration(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

/// Grafana's worked examples, and why a fixed one-minute window shows nothing at Prometheus'
/// default one-minute scrape where `$__rate_interval` does: a rate needs two samples in its
/// window.
#[test]
fn the_rate_interval_holds_at_least_two_scrapes_where_a_fixed_minute_does_not() {
    let s = Duration::from_secs;
    assert_eq!(round_interval(Duration::from_millis(21_600)), s(20));
    assert_eq!(
        round_interval(Duration::from_millis(300)),
        Duration::from_millis(200)
    );
    // The dashboard's default range over 1,000 points at the data source's default 15 s.
    assert_eq!(grafana_interval(s(6 * 3600), 1000, s(15)), s(20));
    assert_eq!(grafana_rate_interval(s(20), s(15)), s(60));
    for scrape in [s(1), s(15), s(30), s(60), s(120)] {
        for range in [s(300), s(6 * 3600), s(7 * 86400)] {
            let interval = grafana_interval(range, MAX_DATA_POINTS, scrape);
            let window = grafana_rate_interval(interval, scrape);
            assert!(window >= 2 * scrape, "{window:?} at a {scrape:?} scrape");
        }
    }
    assert!(s(60) < 2 * s(60), "[1m] at a 1-minute scrape: one sample");
}

/// `expr` as Grafana sends it with every job and server selected: `$job` and `$instance`
/// replaced by the variables' values for "All", and `$__rate_interval` by `rate_interval`.
fn as_sent(expr: &str, all_value: &str, rate_interval: Duration) -> String {
    expr.replace("$job", all_value)
        .replace("$instance", all_value)
        .replace(RATE_INTERVAL, &promql_duration(rate_interval))
}

/// Whether a query as written in the file keeps to the dashboard's rules; returns what breaks
/// them: every metric filtered by the job and instance variables, every range window
/// `$__rate_interval` (or the last hour in a panel that counts over it), no other variable or
/// macro (the queries run as they are in Prometheus).
fn query_faults(title: &str, expr: &str) -> Vec<String> {
    let mut faults = vec![];
    let metrics = selectors(expr);
    if metrics.is_empty() {
        faults.push(format!("{expr} reads no metric"));
    }
    for (metric, braces) in metrics {
        for filter in [JOB_FILTER, INSTANCE_FILTER] {
            if !braces.split(',').any(|m| m.trim() == filter) {
                faults.push(format!("{metric} in {expr} is not filtered by {filter}"));
            }
        }
    }
    for window in windows(expr) {
        let last_hour = window == LAST_HOUR.0 && title.ends_with(LAST_HOUR.1);
        if window != format!("[{RATE_INTERVAL}]") && !last_hour {
            faults.push(format!(
                "{expr} has the fixed window {window}, not [{RATE_INTERVAL}]"
            ));
        }
    }
    if as_sent(expr, ".*", Duration::from_secs(1)).contains('$') {
        faults.push(format!(
            "{expr} uses a variable or macro other than $job, $instance and {RATE_INTERVAL}"
        ));
    }
    faults
}

/// The check of each query catches what it must: a fixed window back, a job filter missing.
#[test]
fn a_fixed_window_or_a_missing_job_filter_is_caught() {
    let good = "rate(pg_snowflake_ids_issued_total{job=~\"$job\",instance=~\"$instance\"}[$__rate_interval])";
    assert_eq!(query_faults("IDs per second", good), Vec::<String>::new());
    let fixed = good.replace("$__rate_interval", "1m");
    assert_eq!(query_faults("IDs per second", &fixed).len(), 1, "{fixed}");
    let hour = good.replace("$__rate_interval", "1h");
    assert_eq!(query_faults("IDs per second", &hour).len(), 1);
    assert!(query_faults("IDs, last hour", &hour).is_empty());
    let no_job = good.replace("job=~\"$job\",", "");
    assert_eq!(query_faults("IDs per second", &no_job).len(), 1, "{no_job}");
    let bare = "up - pg_snowflake_renewing{job=~\"$job\",instance=~\"$instance\"}";
    assert_eq!(query_faults("Up", bare).len(), 2, "{bare}");
    // Label names in by (…), strings and numbers are not metrics.
    let labels =
        "sum by (instance, job) (up{job=~\"$job\",instance=~\"$instance\",x=\"a b\"}) * 1e3";
    assert_eq!(
        selectors(labels),
        vec![(
            "up".to_string(),
            "job=~\"$job\",instance=~\"$instance\",x=\"a b\"".to_string()
        )]
    );
}

/// The shape of the dashboard, without servers: Grafana 10's schema; a Prometheus data source
/// variable that every panel and every query uses; a job variable from
/// `label_values(pg_snowflake_ids_issued_total, job)` and a per-server variable from the same
/// metric within the chosen jobs, several or all selectable, that filter every metric of every
/// query; rates over `$__rate_interval`; unique titles and ids.
#[test]
fn the_dashboard_is_grafana_10_json_whose_every_query_uses_its_three_variables() {
    let dashboard = dashboard();
    let schema = dashboard["schemaVersion"].as_i64().unwrap_or(0);
    assert!(
        schema >= 38,
        "schemaVersion {schema}: Grafana 10 writes 38 and later"
    );

    let datasource = variable(&dashboard, "datasource");
    assert_eq!(datasource["type"], "datasource", "{datasource}");
    assert_eq!(datasource["query"], "prometheus", "{datasource}");

    for (name, query) in [
        ("job", "label_values(pg_snowflake_ids_issued_total, job)"),
        (
            "instance",
            "label_values(pg_snowflake_ids_issued_total{job=~\"$job\"}, instance)",
        ),
    ] {
        let v = variable(&dashboard, name);
        assert_eq!(v["type"], "query", "{v}");
        assert_eq!(variable_query(v), query);
        assert!(is_the_variable(&v["datasource"]), "{v}");
        assert_eq!(v["multi"], true, "{v}");
        assert_eq!(v["includeAll"], true, "{v}");
        assert_eq!(v["allValue"], ".*", "{v}");
        // Asked again when the time range changes: a server that went away leaves the list.
        assert_eq!(v["refresh"], 2, "{v}");
    }
    let names: Vec<&str> = dashboard["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap_or_default())
        .collect();
    // Grafana resolves the variables in order: the job before the servers within it.
    assert_eq!(names, ["datasource", "job", "instance"]);

    let panels = panels(&dashboard);
    assert!(panels.len() >= 23, "{} panels", panels.len());
    let titles: BTreeSet<&str> = panels.iter().map(|p| p.title.as_str()).collect();
    assert_eq!(titles.len(), panels.len(), "every title once: {titles:?}");
    let ids: BTreeSet<i64> = panels.iter().map(|p| p.id).collect();
    assert_eq!(ids.len(), panels.len(), "every panel id once");
    let mut faults = vec![];
    for panel in &panels {
        let title = &panel.title;
        assert!(!title.is_empty(), "a panel without a title: {panel:?}");
        assert!(
            PANEL_TYPES.contains(&panel.kind.as_str()),
            "{title}: type {}",
            panel.kind
        );
        assert!(
            is_the_variable(&panel.datasource),
            "{title}: its data source is {}, not {DATASOURCE}",
            panel.datasource
        );
        assert!(!panel.targets.is_empty(), "{title}: no query");
        for target in &panel.targets {
            let expr = &target.expr;
            assert!(
                is_the_variable(&target.datasource),
                "{title}: the data source of {expr} is {}",
                target.datasource
            );
            for fault in query_faults(title, expr) {
                faults.push(format!("{title} ({}): {fault}", target.ref_id));
            }
        }
    }
    assert!(faults.is_empty(), "{}", faults.join("\n"));
}

// --- What the servers show -----------------------------------------------------------------

/// A server of the test, with its exporter.
struct Scraped {
    server: Server,
    exporter: Exporter,
    registry: bool,
}

impl Scraped {
    fn start(server: Server, registry: bool) -> Scraped {
        let exporter = Exporter::start(&server, &repo_root().join(QUERIES));
        Scraped {
            server,
            exporter,
            registry,
        }
    }

    /// The `instance` label Prometheus gives its exporter's series.
    fn instance(&self) -> String {
        format!("127.0.0.1:{}", self.exporter.port)
    }
}

/// What each server showed just before the panels' queries ran and just after: a panel's value
/// of a number that moves (the lease left) must lie between the two, give or take.
struct Readings {
    before: BTreeMap<String, Stats>,
    after: BTreeMap<String, Stats>,
    /// The time the queries were evaluated at (Unix seconds).
    at: f64,
    /// The node ids the registry member's layout holds (2^node_bits, from its
    /// `snowflake_stats().layout`).
    node_ids: f64,
}

/// How far the lead and the clock offset may move between a scrape and the readings, in
/// seconds.
const DRIFT_S: f64 = 0.25;

/// Compares `series` (one per instance) with `expected` (per instance the values the server
/// showed before and after, or None where it must have no series), within `slack`.
fn per_instance(
    series: &[Series],
    expected: &BTreeMap<String, Option<(f64, f64)>>,
    slack: f64,
) -> Vec<String> {
    let mut wrong = vec![];
    let got: BTreeMap<&str, f64> = series
        .iter()
        .map(|s| (s.label("instance"), s.value))
        .collect();
    if got.len() != series.len() {
        wrong.push(format!("more than one series of an instance: {series:?}"));
    }
    for (instance, range) in expected {
        match (got.get(instance.as_str()), range) {
            (None, None) => {}
            (Some(v), Some((a, b))) => {
                if !(a.min(*b) - slack <= *v && *v <= a.max(*b) + slack) {
                    wrong.push(format!(
                        "{instance} shows {v}, the server {a} (then {b}), give or take {slack}"
                    ));
                }
            }
            (Some(v), None) => wrong.push(format!("{instance} shows {v}, expected no series")),
            (None, Some((a, _))) => wrong.push(format!("{instance} has no series, expected {a}")),
        }
    }
    for instance in got.keys() {
        if !expected.contains_key(*instance) {
            wrong.push(format!("a series of an unknown instance {instance}"));
        }
    }
    wrong
}

impl Readings {
    /// `value` of each server's readings before and after, per instance (None: no series).
    fn each(&self, value: impl Fn(&Stats) -> Option<f64>) -> BTreeMap<String, Option<(f64, f64)>> {
        self.before
            .iter()
            .map(|(instance, before)| {
                let after = &self.after[instance];
                let range = match (value(before), value(after)) {
                    (Some(a), Some(b)) => Some((a, b)),
                    (Some(a), None) | (None, Some(a)) => Some((a, a)),
                    (None, None) => None,
                };
                (instance.clone(), range)
            })
            .collect()
    }

    /// The registry's node ids per state, as a member listed them before and after (the same
    /// on every member).
    fn registry_nodes(&self, state: &str) -> (f64, f64) {
        let count = |all: &BTreeMap<String, Stats>| {
            let member = all
                .values()
                .find_map(|s| s.registry_nodes.as_ref().filter(|nodes| !nodes.is_empty()));
            let nodes = member.expect("a member listed the registry");
            nodes.get(state).copied().unwrap_or(0) as f64
        };
        (count(&self.before), count(&self.after))
    }
}

/// What a panel's queries must show beyond having series, for the panels that show a number of
/// `snowflake_stats()` or `snowflake_registry()` (or count servers by it); returns what
/// differs. `results` are the panel's queries' series in order; `all` every panel's, by title.
fn check_values(
    title: &str,
    results: &[Vec<Series>],
    all: &BTreeMap<String, Vec<Vec<Series>>>,
    r: &Readings,
) -> Option<Vec<String>> {
    let one = |series: &[Series]| -> Result<f64, String> {
        match series {
            [s] => Ok(s.value),
            _ => Err(format!("expected one series, got {series:?}")),
        }
    };
    let mut wrong = vec![];
    match title {
        "Servers making IDs" => {
            let making = r.after.values().filter(|s| s.refusing.is_none()).count() as f64;
            match one(&results[0]) {
                Ok(v) if v == making => {}
                Ok(v) => wrong.push(format!("{v}, but {making} servers refuse nothing")),
                Err(e) => wrong.push(e),
            }
        }
        "Servers refusing IDs (and why)" => {
            let shown: BTreeSet<(String, String)> = results[0]
                .iter()
                .map(|s| (s.label("instance").into(), s.label("reason").into()))
                .collect();
            let refusing: BTreeSet<(String, String)> = r
                .after
                .iter()
                .filter_map(|(i, s)| Some((i.clone(), s.refusing.clone()?)))
                .collect();
            if shown != refusing {
                wrong.push(format!(
                    "{shown:?}, but snowflake_stats() shows {refusing:?}"
                ));
            }
        }
        "Node id per server" => {
            wrong = per_instance(&results[0], &r.each(|s| s.node_id.map(f64::from)), 0.0);
        }
        "Years left in the time field" => {
            let years = |s: &Stats| Some((unix_s(s.time_field_ends) - r.at) / YEAR_S);
            wrong = per_instance(&results[0], &r.each(years), 1e-6);
        }
        "IDs per second, per server" => {
            for (instance, stats) in &r.after {
                let rate = results[0]
                    .iter()
                    .find(|s| s.label("instance") == instance)
                    .map(|s| s.value);
                let moving = stats.ids_issued > 0;
                if !matches!(rate, Some(v) if (v > 0.0) == moving) {
                    wrong.push(format!(
                        "{instance}: {rate:?} IDs per second, having issued {}",
                        stats.ids_issued
                    ));
                }
            }
        }
        "IDs per second, fleet" => {
            let per_server: f64 = all["IDs per second, per server"][0]
                .iter()
                .map(|s| s.value)
                .sum();
            match one(&results[0]) {
                Ok(v) if v > 0.0 && (v - per_server).abs() <= 1e-9 * per_server => {}
                Ok(v) => wrong.push(format!("{v}, the servers' sum {per_server}")),
                Err(e) => wrong.push(e),
            }
        }
        "Lead over the clock (s)" => {
            let lead = r.each(|s| Some(s.lead_ms as f64 / 1000.0));
            let borrowed = r.each(|s| Some(s.borrowed_ms as f64 / 1000.0));
            wrong = per_instance(&results[0], &lead, DRIFT_S);
            wrong.extend(per_instance(&results[1], &borrowed, DRIFT_S));
        }
        "Time since the last ID" => {
            let since = |s: &Stats| s.last_issued.map(|t| r.at - unix_s(t));
            wrong = per_instance(&results[0], &r.each(since), 1e-3);
        }
        "Lease left, as a share of the lease" => {
            // A heartbeat extends the lease every third of it, and the sample Prometheus holds
            // is up to a scrape interval older than the readings.
            let lease_s = LEASE_MS as f64 / 1000.0;
            let slack = (lease_s / 3.0 + SCRAPE_INTERVAL.as_secs_f64()) / lease_s;
            let share = |s: &Stats| s.lease_remaining_ms.map(|ms| ms as f64 / LEASE_MS as f64);
            wrong = per_instance(&results[0], &r.each(share), slack);
            if let Some(s) = results[0]
                .iter()
                .find(|s| !(s.value > 0.0 && s.value <= 1.0))
            {
                wrong.push(format!("a share outside (0, 1]: {s:?}"));
            }
        }
        "Clock offset from the registry, as a share of the limit" => {
            let share = |s: &Stats| {
                s.registry_clock_offset_ms
                    .map(|ms| ms as f64 / 1000.0 / MAX_CLOCK_SKEW_S)
            };
            wrong = per_instance(&results[0], &r.each(share), DRIFT_S / MAX_CLOCK_SKEW_S);
        }
        "Claim generation and re-claims, last hour" => {
            let generation = r.each(|s| s.registry_generation.map(|g| g as f64));
            // No member claimed again during the test: no change to show.
            let unchanged = r.each(|s| s.registry_generation.map(|_| 0.0));
            wrong = per_instance(&results[0], &unchanged, 0.0);
            wrong.extend(per_instance(&results[1], &generation, 0.0));
        }
        "Node ids by state (fleet)" => {
            let shown: BTreeMap<&str, f64> = results[0]
                .iter()
                .map(|s| (s.label("state"), s.value))
                .collect();
            let states: BTreeSet<&str> = shown.keys().copied().collect();
            if states != NODE_STATES.into() {
                wrong.push(format!("the states {states:?}, not {NODE_STATES:?}"));
            }
            for state in NODE_STATES {
                let (a, b) = r.registry_nodes(state);
                match shown.get(state) {
                    Some(v) if *v == a || *v == b => {}
                    v => wrong.push(format!("{state}: {v:?}, snowflake_registry() lists {a}")),
                }
            }
        }
        "Node ids left to assign" => {
            let held = |at: fn(&(f64, f64)) -> f64| {
                ["live", "lost", "retired", "stray"]
                    .iter()
                    .map(|state| at(&r.registry_nodes(state)))
                    .sum::<f64>()
            };
            let (a, b) = (r.node_ids - held(|p| p.0), r.node_ids - held(|p| p.1));
            match one(&results[0]) {
                Ok(v) if v == a || v == b => {}
                Ok(v) => wrong.push(format!("{v}, snowflake_registry() leaves {a}")),
                Err(e) => wrong.push(e),
            }
        }
        "Reservation write in progress (disk stall)" => {
            // A write lasts milliseconds but may be under way at a scrape, up to a scrape
            // interval before the readings: each server's series is 0 or 1, not its reading.
            let either = r
                .after
                .keys()
                .map(|instance| (instance.clone(), Some((0.0, 1.0))))
                .collect();
            wrong = per_instance(&results[0], &either, 0.0);
            if let Some(s) = results[0].iter().find(|s| s.value != 0.0 && s.value != 1.0) {
                wrong.push(format!("neither 0 nor 1: {s:?}"));
            }
        }
        "Exporter scraped / PostgreSQL reachable" => {
            let up = r.each(|_| Some(1.0));
            wrong = per_instance(&results[0], &up, 0.0);
            wrong.extend(per_instance(&results[1], &up, 0.0));
        }
        "Exporter query errors" => {
            // No query of the exporter fails: the registry answers, and the servers without
            // one never call snowflake_registry().
            let none = r.each(|_| Some(0.0));
            wrong = per_instance(&results[0], &none, 0.0);
            wrong.extend(per_instance(&results[1], &none, 0.0));
        }
        _ => return None,
    }
    Some(wrong)
}

/// The panels [`check_values`] checks the values of: each must still be on the dashboard.
const VALUES_CHECKED: [&str; 16] = [
    "Servers making IDs",
    "Servers refusing IDs (and why)",
    "Node id per server",
    "Years left in the time field",
    "IDs per second, per server",
    "IDs per second, fleet",
    "Lead over the clock (s)",
    "Time since the last ID",
    "Lease left, as a share of the lease",
    "Clock offset from the registry, as a share of the limit",
    "Claim generation and re-claims, last hour",
    "Node ids by state (fleet)",
    "Node ids left to assign",
    "Reservation write in progress (disk stall)",
    "Exporter scraped / PostgreSQL reachable",
    "Exporter query errors",
];

#[test]
fn every_panel_shows_series_from_a_real_prometheus_that_agree_with_snowflake_stats() {
    let dashboard = dashboard();
    let panels = panels(&dashboard);
    let all_value = variable(&dashboard, "instance")["allValue"]
        .as_str()
        .unwrap_or(".*")
        .to_string();
    // $__rate_interval as Grafana works it out for the dashboard's default time range, with the
    // data source's scrape interval set to the test Prometheus' own.
    let range = relative_range(dashboard["time"]["from"].as_str().unwrap_or_default());
    let interval = grafana_interval(range, MAX_DATA_POINTS, SCRAPE_INTERVAL);
    let rate_interval = grafana_rate_interval(interval, SCRAPE_INTERVAL);

    // A member of a registry, a plain server with node id 7, and a server without a node id,
    // which refuses IDs ("node id unset"): every panel has something to show. The member's
    // layout has 8 node bits, not the default 10: the node ids left must follow it.
    let registry = registry_server("dashboard-registry");
    let member = Server::start(
        "dashboard-member",
        member_config(&registry.conninfo("postgres"), None).setting("pg_snowflake.node_bits = 8"),
    );
    member.execute("SELECT snowflake_registry_create()");
    claimed_node(&member);
    let node_ids = 2f64.powi(layout_node_bits(&member) as i32);
    assert_eq!(node_ids, 256.0);
    // A row of another layout (as a server of another fleet would write it): `stray`, a state
    // of its own, and a node id no member of this fleet is handed.
    let fleet: String = member.query_one("SELECT layout FROM snowflake_stats()");
    let other = fleet.replace("8 bits node", "7 bits node");
    assert_ne!(other, fleet, "the layout names its node bits: {fleet}");
    registry.execute(&format!(
        "INSERT INTO snowflake_nodes (node_id, state, owner_token, generation, holder_label, \
         layout, claimed_at, last_seen, lease_until) VALUES (200, 'live', \
         'feedfeedfeedfeedfeedfeedfeedfeed', 1, 'elsewhere', '{other}', clock_timestamp(), \
         clock_timestamp(), clock_timestamp() + interval '1 day')"
    ));
    let servers = [
        Scraped::start(member, true),
        Scraped::start(Server::start("dashboard-plain", Config::node(7)), false),
        Scraped::start(
            Server::start(
                "dashboard-unset",
                Config {
                    preload: true,
                    ..Config::default()
                },
            ),
            false,
        ),
    ];
    // Not `postgres`, the docs' job: the queries must not depend on it.
    let ports: Vec<u16> = servers.iter().map(|s| s.exporter.port).collect();
    let prometheus = Prometheus::start("pg_snowflake_dashboard", &ports, SCRAPE_INTERVAL);
    prometheus.wait_for_scrapes(2, Duration::from_secs(30));

    // IDs on the two servers that make them, after two scrapes: the rates have a sample before
    // and (once Prometheus shows the counters as the servers do) one after.
    for scraped in &servers[..2] {
        take_ids(&mut scraped.server.connect(), 1_000, 1_000);
    }
    let counters = |scraped: &Scraped| {
        let expr = format!(
            "pg_snowflake_ids_issued_total{{instance=\"{}\"}}",
            scraped.instance()
        );
        let shown = prometheus.query(&expr).first().map(|s| s.value);
        shown == Some(stats(&scraped.server, false).ids_issued as f64)
    };
    wait_until(
        Duration::from_secs(30),
        "Prometheus to scrape the IDs counters as the servers show them",
        || servers.iter().all(counters),
    );

    // The job variable lists the test's job, and the instance variable, within it, every server.
    let listed = |name: &str, job: &str| -> BTreeSet<String> {
        let query = variable_query(variable(&dashboard, name)).replace("$job", job);
        let (selector, label) = label_values_parts(&query);
        prometheus
            .label_values(selector, label)
            .into_iter()
            .collect()
    };
    let jobs = listed("job", &all_value);
    assert_eq!(
        jobs,
        BTreeSet::from([prometheus.job.clone()]),
        "the job variable's values"
    );
    let instances: BTreeSet<String> = servers.iter().map(Scraped::instance).collect();
    assert_eq!(
        listed("instance", &prometheus.job),
        instances,
        "the instance variable's values"
    );
    assert!(
        listed("instance", "another_job").is_empty(),
        "the instance variable lists the servers of the chosen job only"
    );

    // Every panel's queries at one time, between two readings of every server.
    let read = || -> BTreeMap<String, Stats> {
        servers
            .iter()
            .map(|s| (s.instance(), stats(&s.server, s.registry)))
            .collect()
    };
    let before = read();
    let at = unix_s(SystemTime::now());
    let mut results: BTreeMap<String, Vec<Vec<Series>>> = BTreeMap::new();
    let (mut failures, mut table) = (vec![], vec![]);
    for panel in &panels {
        let mut answers = vec![];
        for target in &panel.targets {
            let expr = as_sent(&target.expr, &all_value, rate_interval);
            let answer = prometheus.try_query_at(&expr, at).unwrap_or_else(|e| {
                failures.push(format!(
                    "panel \"{}\" (query {}): {expr} fails: {e}",
                    panel.title, target.ref_id
                ));
                vec![]
            });
            if answer.is_empty() {
                failures.push(format!(
                    "panel \"{}\" (query {}): {expr} returns no series",
                    panel.title, target.ref_id
                ));
            }
            for series in answer.iter().filter(|s| !s.value.is_finite()) {
                failures.push(format!(
                    "panel \"{}\" (query {}): {expr} returns {series:?}",
                    panel.title, target.ref_id
                ));
            }
            // A row of a Markdown table: a `|` of the query escaped.
            let query = target.expr.replace('|', "\\|");
            table.push(format!(
                "| {} | `{query}` | {} |",
                panel.title,
                answer.len()
            ));
            answers.push(answer);
        }
        results.insert(panel.title.clone(), answers);
    }
    let readings = Readings {
        before,
        after: read(),
        at,
        node_ids,
    };
    println!(
        "$__interval {interval:?} ({range:?} over {MAX_DATA_POINTS} points, scraped every \
         {SCRAPE_INTERVAL:?}), $__rate_interval {rate_interval:?}\n\
         The dashboard's queries (job=~\"{all_value}\", instance=~\"{all_value}\") at {at:.3}:\n\
         | panel | query | series |\n|---|---|---|\n{}",
        table.join("\n")
    );
    assert!(
        failures.is_empty(),
        "{} of the dashboard's queries show nothing right:\n{}\nPrometheus' log:\n{}",
        failures.len(),
        failures.join("\n"),
        prometheus.log()
    );

    for title in VALUES_CHECKED {
        assert!(
            results.contains_key(title),
            "no panel \"{title}\" on the dashboard"
        );
    }
    let mut wrong = vec![];
    for panel in &panels {
        let checked = check_values(&panel.title, &results[&panel.title], &results, &readings);
        for what in checked.into_iter().flatten() {
            wrong.push(format!("panel \"{}\": {what}", panel.title));
        }
    }
    assert!(
        wrong.is_empty(),
        "the dashboard's values differ from what the servers show:\n{}\n\
         the readings before: {:#?}\nafter: {:#?}",
        wrong.join("\n"),
        readings.before,
        readings.after
    );
}
