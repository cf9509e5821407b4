//! A harness for out-of-process tests: real PostgreSQL servers on 127.0.0.1, each with its own
//! data directory, started, stopped, crashed and promoted through `scripts/serve/pgserver` (the same
//! script the demo uses), with pg_snowflake installed in the PostgreSQL they run.
//!
//! Which PostgreSQL: the one of `PG_CONFIG`, which `./dev test --pg N` exports from
//! `scripts/lib/trees.sh` (the one place that knows where each major lives); a test that crosses
//! majors asks for another tree by name ([`pg_config_of`]), from the `PGSF_PG_CONFIG_<TREE>`
//! variables the same script exports. No file here names a PostgreSQL directory.
//!
//! A server can run on a fake clock: libfaketime (Debian's `faketime`, at the path
//! `PGSF_LIBFAKETIME` that `scripts/lib/trees.sh` exports) preloaded into it, reading
//! its offset from a file in the server's directory that tests rewrite while the server runs.
//! Only the wall clock is faked; the monotonic clock keeps real time, as on a real machine whose
//! clock is stepped.
//!
//! A server can run on a slow disk: the shim `pgrx-tests/fsync-delay.c`, built here with `cc`
//! on first use, preloaded into it, makes every fsync and fdatasync sleep for as many
//! milliseconds as a file in the server's directory says; tests rewrite it while the server runs.
//!
//! The parts: [`server`] (Config, Server), [`checks`] (what tests do with one), [`paths`] (where
//! the PostgreSQL under test and the repository are), [`ports`] (port leases), [`proxy`] (a TCP
//! forwarder whose link a test cuts and heals), [`registry`] (a fleet with a node-id registry),
//! [`exporter`] (postgres_exporter against a server, scraped over HTTP), [`prometheus`] (a
//! Prometheus server scraping exporters, queried over its HTTP API).

pub mod checks;
pub mod exporter;
pub mod paths;
mod ports;
pub mod prometheus;
pub mod proxy;
pub mod registry;
pub mod server;
pub mod stats;

pub use checks::*;
pub use paths::*;
pub use ports::PortBlock;
pub use proxy::Proxy;
pub use server::*;
