//! postgres_exporter (Debian's `prometheus-postgres-exporter`) run against a test server with a
//! custom queries file, and its `/metrics` read over plain HTTP: what Prometheus would scrape.

use crate::ports::{lease_port, PortLease};
use crate::server::Server;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The exporter's program, as Debian installs it.
pub const EXPORTER: &str = "prometheus-postgres-exporter";

/// The program `name` on PATH, or a panic naming the Debian package that has it: a missing tool
/// fails the test, it never skips it.
pub fn program_on_path(name: &str, package: &str) -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
        .unwrap_or_else(|| {
            panic!(
                "{name} is not installed: install the Debian package {package} \
                 (./dev setup --for-tests installs it)"
            )
        })
}

/// A running exporter, stopped on drop.
pub struct Exporter {
    child: Child,
    pub port: u16,
    _port_lease: PortLease,
    log: PathBuf,
}

/// The exporter's built-in collectors that run by default and are not the tests' to read: the
/// database's and the background writer's (`bgwriter` up to postgres_exporter 0.14, Debian
/// 12's 0.11; `stat_bgwriter` since, sid's 0.19 in the sid root), as its `--help` names them.
fn collectors_off(program: &Path) -> [String; 2] {
    let help = Command::new(program)
        .arg("--help")
        .output()
        .unwrap_or_else(|e| panic!("{} --help: {e}", program.display()));
    let help = String::from_utf8_lossy(&help.stdout) + String::from_utf8_lossy(&help.stderr);
    let bgwriter = if help.contains("--collector.stat_bgwriter") {
        "stat_bgwriter"
    } else {
        "bgwriter"
    };
    [
        "--no-collector.database".to_string(),
        format!("--no-collector.{bgwriter}"),
    ]
}

impl Exporter {
    /// Starts the exporter against `server`'s `postgres` database with the queries file
    /// `queries`, on a free port of 127.0.0.1, and returns once it answers a scrape with
    /// `pg_up 1` (it connected).
    pub fn start(server: &Server, queries: &Path) -> Exporter {
        let program = program_on_path(EXPORTER, EXPORTER);
        let lease = lease_port();
        let log = std::env::temp_dir().join(format!("pgsf-exporter-{}.log", lease.number));
        let log_file = std::fs::File::create(&log).expect("the exporter's log file");
        let child = Command::new(&program)
            .env(
                "DATA_SOURCE_NAME",
                format!("{} sslmode=disable", server.conninfo("postgres")),
            )
            .arg(format!("--web.listen-address=127.0.0.1:{}", lease.number))
            .arg(format!("--extend.query-path={}", queries.display()))
            // Only the queries file's metrics and the exporter's own: the tests read those.
            .args(["--disable-default-metrics", "--disable-settings-metrics"])
            .args(collectors_off(&program))
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .unwrap_or_else(|e| panic!("{} runs: {e}", program.display()));
        let exporter = Exporter {
            child,
            port: lease.number,
            _port_lease: lease,
            log,
        };
        let started = std::time::Instant::now();
        loop {
            let answer = exporter.try_scrape();
            if matches!(&answer, Ok(scrape) if scrape.value("pg_up", &[]) == Some(1.0)) {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the exporter did not scrape the server within 30 s (last answer: {answer:?}); \
                 its log:\n{}",
                exporter.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        exporter
    }

    /// `GET /metrics`, parsed; panics with the exporter's log when it does not answer.
    pub fn scrape(&self) -> Scrape {
        self.try_scrape()
            .unwrap_or_else(|e| panic!("scraping the exporter: {e}\n{}", self.log()))
    }

    fn try_scrape(&self) -> Result<Scrape, String> {
        let text = http_get(self.port, "/metrics")?;
        Ok(Scrape::parse(&text))
    }

    /// What the exporter logged (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// The body of `GET path` on 127.0.0.1:`port` over HTTP/1.0 (the server closes the connection
/// after the response, so the body is everything after the headers).
pub(crate) fn http_get(port: u16, path: &str) -> Result<String, String> {
    let timeout = Some(Duration::from_secs(10));
    let mut stream = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(timeout)
        .map_err(|e| e.to_string())?;
    stream
        .set_write_timeout(timeout)
        .map_err(|e| e.to_string())?;
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .map_err(|e| e.to_string())?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("no end of headers in {response:?}"))?;
    let status = head.lines().next().unwrap_or_default();
    if status.split_whitespace().nth(1) != Some("200") {
        return Err(format!("GET {path}: {status}\n{body}"));
    }
    Ok(body.to_string())
}

/// One sample of the text exposition format: `name{label="value",…} value`.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// A scrape: its samples, and each metric's `# HELP` text and `# TYPE`.
#[derive(Clone, Debug, Default)]
pub struct Scrape {
    pub samples: Vec<Sample>,
    pub help: BTreeMap<String, String>,
    pub types: BTreeMap<String, String>,
}

impl Scrape {
    /// Parses Prometheus' text format (version 0.0.4), as the exporter writes it.
    pub fn parse(text: &str) -> Scrape {
        let mut scrape = Scrape::default();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
                scrape.help.insert(name.into(), unescape(help));
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
                scrape.types.insert(name.into(), kind.into());
            } else if !line.is_empty() && !line.starts_with('#') {
                scrape.samples.push(parse_sample(line));
            }
        }
        scrape
    }

    /// The value of the one sample named `name` whose labels include `labels`, None without one.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let found: Vec<&Sample> = self
            .samples
            .iter()
            .filter(|s| s.name == name)
            .filter(|s| {
                labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .collect();
        assert!(
            found.len() <= 1,
            "more than one {name}{labels:?}: {found:?}"
        );
        found.first().map(|s| s.value)
    }
}

fn parse_sample(line: &str) -> Sample {
    let (series, value) = line
        .rsplit_once(' ')
        .unwrap_or_else(|| panic!("a sample without a value: {line:?}"));
    let value = value
        .parse::<f64>()
        .unwrap_or_else(|e| panic!("the value of {line:?}: {e}"));
    let (name, labels) = match series.split_once('{') {
        Some((name, rest)) => (name, parse_labels(rest.trim_end_matches('}'))),
        None => (series, BTreeMap::new()),
    };
    Sample {
        name: name.to_string(),
        labels,
        value,
    }
}

/// `a="x",b="y \"z\""` → {a: x, b: y "z"}.
fn parse_labels(text: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut rest = text;
    while let Some((key, after)) = rest.split_once("=\"") {
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, other)) => value.push(other),
                    None => {}
                },
                '"' => {
                    end = i + 1;
                    break;
                }
                _ => value.push(c),
            }
        }
        labels.insert(key.trim_start_matches(',').trim().to_string(), value);
        rest = &after[end..];
    }
    labels
}

fn unescape(text: &str) -> String {
    text.replace("\\n", "\n").replace("\\\\", "\\")
}

/// Seconds since 1970 of `t`, as Prometheus writes times.
pub fn unix_s(t: std::time::SystemTime) -> f64 {
    t.duration_since(std::time::SystemTime::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_format_is_read_with_labels_escapes_and_special_values() {
        let scrape = Scrape::parse(
            "# HELP a_total A help.\n# TYPE a_total counter\na_total 12\n\
             b{reason=\"lease expired\",server=\"h:1\"} NaN\nc{x=\"q\\\"uote\"} +Inf\n",
        );
        assert_eq!(scrape.help["a_total"], "A help.");
        assert_eq!(scrape.types["a_total"], "counter");
        assert_eq!(scrape.value("a_total", &[]), Some(12.0));
        assert!(scrape
            .value("b", &[("reason", "lease expired")])
            .unwrap()
            .is_nan());
        assert_eq!(scrape.value("c", &[("x", "q\"uote")]), Some(f64::INFINITY));
        assert_eq!(scrape.value("b", &[("reason", "other")]), None);
    }
}
