//! Where things are: the PostgreSQL under test (from the environment `scripts/lib/trees.sh`
//! exports), its client programs, the repository and its Cargo.toml.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's top directory.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("pgrx-tests/ lies inside the repository")
        .to_path_buf()
}

/// Where the test servers' directories go: `PGSF_SERVERS_DIR`, else `/dev/shm` where it is a
/// directory (a tmpfs on Linux), else `/tmp`. On ext4 a server's initdb, start, stop and removal
/// took 1.4 CPU-seconds, most of it kernel time, ext4's inode allocation foremost (perf); on a
/// tmpfs 0.55. A crash a test makes kills the server's processes, not the machine,
/// so what a test proves about durability holds on either.
pub fn servers_root() -> String {
    std::env::var("PGSF_SERVERS_DIR").unwrap_or_else(|_| {
        let shm = Path::new("/dev/shm");
        if shm.is_dir() { "/dev/shm" } else { "/tmp" }.to_string()
    })
}

/// The pg_config of the PostgreSQL under test (`PG_CONFIG`, exported by `./dev test`).
pub fn pg_config() -> PathBuf {
    PathBuf::from(std::env::var("PG_CONFIG").expect(
        "PG_CONFIG is not set: run the tests through ./dev test --pg N, which sets it for major N",
    ))
}

/// The pg_config of PostgreSQL tree `tree` ("15", "18", "15-vanilla"…), from the variable
/// `PGSF_PG_CONFIG_<TREE>` that `./dev test` exports for every tree that is set up.
pub fn pg_config_of(tree: &str) -> PathBuf {
    let var = format!("PGSF_PG_CONFIG_{}", tree.replace('-', "_").to_uppercase());
    PathBuf::from(std::env::var(&var).unwrap_or_else(|_| {
        panic!("{var} is not set: run the tests through ./dev test, which sets it")
    }))
}

/// `pg_config FLAG` (e.g. `--pkglibdir`) of the given pg_config.
pub fn pg_config_value(pg_config: &Path, flag: &str) -> PathBuf {
    let out = Command::new(pg_config)
        .arg(flag)
        .output()
        .unwrap_or_else(|e| panic!("{} {flag}: {e}", pg_config.display()));
    assert!(
        out.status.success(),
        "{} {flag} failed",
        pg_config.display()
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// The major version of the given pg_config's PostgreSQL (`PostgreSQL 18.6` → 18, a release
/// candidate's `PostgreSQL 19rc1` → 19).
pub fn pg_major_of(pg_config: &Path) -> u32 {
    let version = pg_config_value(pg_config, "--version");
    let version = version.to_string_lossy();
    let digits: String = version
        .trim_start_matches("PostgreSQL ")
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("cannot read a major version from {version:?}"))
}

/// The major version under test.
pub fn pg_major() -> u32 {
    pg_major_of(&pg_config())
}

/// The path of a client program (pg_dump, pg_restore, psql) of the PostgreSQL under test.
pub fn pg_bin(program: &str) -> PathBuf {
    pg_config_value(&pg_config(), "--bindir").join(program)
}

/// The extension's version: `version` in the repository's Cargo.toml, which pgrx substitutes
/// for `@CARGO_VERSION@` in pg_snowflake.control.
pub fn cargo_version() -> String {
    cargo_package_field("version")
}

/// A `key = "value"` line of the [package] section of the repository's Cargo.toml.
pub fn cargo_package_field(key: &str) -> String {
    let manifest = std::fs::read_to_string(repo_root().join("Cargo.toml")).expect("Cargo.toml");
    manifest
        .lines()
        .skip_while(|line| line.trim() != "[package]")
        .find_map(|line| line.strip_prefix(&format!("{key} = ")))
        .map(|quoted| quoted.trim().trim_matches('"').to_string())
        .unwrap_or_else(|| panic!("Cargo.toml's [package] has no {key}"))
}
