//! A real Prometheus (Debian's `prometheus`) scraping exporters on 127.0.0.1, and its HTTP API
//! (`/api/v1/query`) read over plain HTTP: what a Grafana dashboard asks of it.

use crate::exporter::{http_get, program_on_path};
use crate::ports::{lease_port, PortLease};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Prometheus' program, as Debian installs it.
pub const PROMETHEUS: &str = "prometheus";

/// A running Prometheus with a data directory of its own, stopped and deleted on drop.
pub struct Prometheus {
    child: Child,
    pub port: u16,
    _port_lease: PortLease,
    /// Its configuration, its time series database (`data/`) and its log.
    dir: PathBuf,
    /// The job its one scrape configuration is named after.
    pub job: String,
    /// The targets it scrapes, as their `instance` label shows them.
    pub instances: Vec<String>,
}

/// One series of a query's answer: its labels and its value at the query's time.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

impl Series {
    /// The value of label `name`, "" without it.
    pub fn label(&self, name: &str) -> &str {
        self.labels
            .get(name)
            .map(String::as_str)
            .unwrap_or_default()
    }
}

impl Prometheus {
    /// Starts Prometheus on a free port of 127.0.0.1, scraping the exporters on `ports` (of
    /// 127.0.0.1) every `interval` under the job name `job`, and returns once it is ready to
    /// answer queries.
    pub fn start(job: &str, ports: &[u16], interval: Duration) -> Prometheus {
        let program = program_on_path(PROMETHEUS, PROMETHEUS);
        let lease = lease_port();
        let dir = std::env::temp_dir().join(format!("pgsf-prometheus-{}", lease.number));
        // A directory left by a killed run is replaced.
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("data")).expect("Prometheus' directory");
        let instances: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        let ms = interval.as_millis();
        let config = format!(
            "global:\n  scrape_interval: {ms}ms\n  scrape_timeout: {ms}ms\n\
             scrape_configs:\n  - job_name: {job}\n    static_configs:\n      - targets: [{}]\n",
            instances
                .iter()
                .map(|i| format!("'{i}'"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        std::fs::write(dir.join("prometheus.yml"), config).expect("prometheus.yml");
        let log_file = std::fs::File::create(dir.join("prometheus.log")).expect("its log file");
        let child = Command::new(&program)
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{}", lease.number))
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .unwrap_or_else(|e| panic!("{} runs: {e}", program.display()));
        let prometheus = Prometheus {
            child,
            port: lease.number,
            _port_lease: lease,
            dir,
            job: job.to_string(),
            instances,
        };
        let started = Instant::now();
        loop {
            let answer = http_get(prometheus.port, "/-/ready");
            if answer.is_ok() {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "Prometheus was not ready within 30 s (last answer: {answer:?}); its log:\n{}",
                prometheus.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        prometheus
    }

    /// The instant query `expr` evaluated now: its series, or Prometheus' error (a query it
    /// cannot parse, say).
    pub fn try_query(&self, expr: &str) -> Result<Vec<Series>, String> {
        self.get_result(&format!("/api/v1/query?query={}", url_encode(expr)))
    }

    /// The instant query `expr` evaluated at `time` (Unix seconds): its series, or Prometheus'
    /// error.
    pub fn try_query_at(&self, expr: &str, time: f64) -> Result<Vec<Series>, String> {
        self.get_result(&format!(
            "/api/v1/query?query={}&time={time:.3}",
            url_encode(expr)
        ))
    }

    /// [`Prometheus::try_query`], panicking with the error and Prometheus' log.
    pub fn query(&self, expr: &str) -> Vec<Series> {
        self.try_query(expr)
            .unwrap_or_else(|e| panic!("the query {expr}: {e}\nPrometheus' log:\n{}", self.log()))
    }

    /// The values of label `label` over the series that match `selector` (`/api/v1/label/…/values`,
    /// what Grafana's `label_values(selector, label)` asks).
    pub fn label_values(&self, selector: &str, label: &str) -> Vec<String> {
        let path = format!(
            "/api/v1/label/{label}/values?match[]={}",
            url_encode(selector)
        );
        let data = self
            .get_data(&path)
            .unwrap_or_else(|e| panic!("{path}: {e}\nPrometheus' log:\n{}", self.log()));
        data.as_array()
            .unwrap_or_else(|| panic!("{path}: not a list: {data}"))
            .iter()
            .map(|v| v.as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// Waits until Prometheus holds at least `scrapes` successful scrapes of each of its targets
    /// (`count_over_time(up[1h])`, and `up` 1 at the last), at most `timeout`; panics with what
    /// it has and its log otherwise.
    pub fn wait_for_scrapes(&self, scrapes: usize, timeout: Duration) {
        let job = &self.job;
        let counted =
            format!("count_over_time(up{{job=\"{job}\"}}[1h]) and up{{job=\"{job}\"}} == 1");
        let started = Instant::now();
        loop {
            let answer = self.try_query(&counted);
            let done = answer.as_ref().is_ok_and(|series| {
                self.instances.iter().all(|instance| {
                    series
                        .iter()
                        .any(|s| s.label("instance") == instance && s.value >= scrapes as f64)
                })
            });
            if done {
                return;
            }
            assert!(
                started.elapsed() < timeout,
                "timed out after {timeout:?} waiting for {scrapes} scrapes of each of {:?} \
                 ({counted}: {answer:?}); the targets: {:?}\nPrometheus' log:\n{}",
                self.instances,
                http_get(self.port, "/api/v1/targets"),
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// What Prometheus logged (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    /// A query's result as series: a vector's series, or a scalar as one series without labels.
    fn get_result(&self, path: &str) -> Result<Vec<Series>, String> {
        let data = self.get_data(path)?;
        let result = &data["result"];
        let series = match data["resultType"].as_str() {
            Some("vector") => result
                .as_array()
                .ok_or_else(|| format!("a vector that is no list: {data}"))?
                .iter()
                .map(|s| {
                    let labels = s["metric"]
                        .as_object()
                        .into_iter()
                        .flatten()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                        .collect();
                    Ok(Series {
                        labels,
                        value: sample_value(&s["value"])?,
                    })
                })
                .collect::<Result<Vec<_>, String>>()?,
            Some("scalar") => vec![Series {
                labels: BTreeMap::new(),
                value: sample_value(result)?,
            }],
            other => return Err(format!("a result of type {other:?}: {data}")),
        };
        Ok(series)
    }

    /// The `data` of an API answer whose `status` is `success`.
    fn get_data(&self, path: &str) -> Result<serde_json::Value, String> {
        let body = http_get(self.port, path)?;
        let answer: serde_json::Value =
            serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
        if answer["status"] != "success" {
            return Err(format!("GET {path}: {answer}"));
        }
        Ok(answer["data"].clone())
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A sample as the API writes it, `[time, "value"]`: the value ("NaN" and "+Inf" included).
fn sample_value(sample: &serde_json::Value) -> Result<f64, String> {
    sample[1]
        .as_str()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("a sample without a value: {sample}"))
}

/// `text` as a URL's query value: every byte other than a letter, a digit or `-._~`
/// percent-encoded.
fn url_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_is_percent_encoded_but_for_unreserved_characters() {
        assert_eq!(
            url_encode("rate(a{instance=~\"$i\"}[1m]) / 2"),
            "rate%28a%7Binstance%3D~%22%24i%22%7D%5B1m%5D%29%20%2F%202"
        );
    }

    #[test]
    fn a_sample_value_is_read_with_special_values() {
        let value = |text: &str| sample_value(&serde_json::json!([1.5, text]));
        assert_eq!(value("12.5"), Ok(12.5));
        assert_eq!(value("+Inf"), Ok(f64::INFINITY));
        assert!(value("NaN").unwrap().is_nan());
        assert!(sample_value(&serde_json::json!([1.5])).is_err());
    }
}
