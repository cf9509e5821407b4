//! The packaging metadata agrees with the build: META.json (for PGXN) names the version,
//! licence and PostgreSQL major version that Cargo.toml builds, and the files it points at exist.

use serde_json::Value;
use snowflake_it::{cargo_package_field, cargo_version, repo_root};
use std::collections::BTreeSet;
use std::process::Command;

fn read(path: &str) -> String {
    std::fs::read_to_string(repo_root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn meta() -> Value {
    serde_json::from_str(&read("META.json")).expect("META.json is valid JSON")
}

#[test]
fn meta_json_versions_match_cargo_toml() {
    let (meta, version) = (meta(), cargo_version());
    assert_eq!(meta["name"], "pg_snowflake");
    assert_eq!(meta["version"], version.as_str(), "META.json version");
    assert_eq!(
        meta["provides"]["pg_snowflake"]["version"],
        version.as_str(),
        "META.json provides.pg_snowflake.version"
    );
    assert_eq!(meta["meta-spec"]["version"], "1.0.0");
    assert_eq!(
        read("pg_snowflake.control")
            .lines()
            .find_map(|line| line.strip_prefix("default_version = ")),
        Some("'@CARGO_VERSION@'"),
        "the control file takes its version from Cargo.toml"
    );
}

#[test]
fn meta_json_describes_what_cargo_toml_builds() {
    let meta = meta();
    assert_eq!(
        meta["abstract"],
        cargo_package_field("description").as_str()
    );
    assert_eq!(
        meta["license"],
        cargo_package_field("license").to_lowercase().as_str(),
        "PGXN spells licences in lower case"
    );
    assert_eq!(meta["maintainer"], "pg_snowflake developers");
    // Cargo.toml's default feature pgNN is the one PostgreSQL major version built for.
    let default_pg = read("Cargo.toml")
        .lines()
        .find_map(|line| line.strip_prefix("default = [\"pg"))
        .and_then(|rest| rest.split('"').next().map(str::to_string))
        .expect("Cargo.toml has default = [\"pgNN\"]");
    assert_eq!(
        meta["prereqs"]["runtime"]["requires"]["PostgreSQL"],
        format!("{default_pg}.0.0").as_str()
    );
    for key in ["file", "docfile"] {
        let path = meta["provides"]["pg_snowflake"][key]
            .as_str()
            .unwrap_or_else(|| panic!("provides.pg_snowflake.{key} is a string"));
        assert!(repo_root().join(path).is_file(), "{key} {path} exists");
    }
}

/// `pg_config --flag` as a path relative to `/`, as it appears in the package tree.
fn pg_dir(flag: &str) -> String {
    let pg_config = std::env::var("PG_CONFIG")
        .unwrap_or_else(|_| "/usr/lib/postgresql/15/bin/pg_config".into());
    let out = Command::new(pg_config)
        .arg(flag)
        .output()
        .expect("pg_config runs");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .trim_start_matches('/')
        .to_string()
}

#[test]
fn dev_package_packs_the_library_the_control_file_and_every_script() {
    let root = repo_root();
    let out = Command::new(root.join("dev"))
        .args(["package", "--debug"])
        .output()
        .expect("./dev runs");
    let printed =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "./dev package --debug failed:\n{printed}"
    );

    let version = cargo_version();
    let arch = std::env::consts::ARCH;
    let tarball = root.join(format!(
        "target/debug/pg_snowflake-{version}-pg15-{arch}-linux.tar.gz"
    ));
    assert!(
        tarball.is_file(),
        "{} was not made:\n{printed}",
        tarball.display()
    );
    let unpacked = std::env::temp_dir().join(format!("pgsf-package-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&unpacked);
    std::fs::create_dir_all(&unpacked).unwrap();
    let status = Command::new("tar")
        .arg("-xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(&unpacked)
        .status()
        .expect("tar runs");
    assert!(status.success());

    // Exactly the library, the control file, the generated install script of this version and
    // every script of sql/, those byte for byte.
    let (lib, ext) = (pg_dir("--pkglibdir"), pg_dir("--sharedir") + "/extension");
    let mut expected: BTreeSet<String> = [
        format!("{lib}/pg_snowflake.so"),
        format!("{ext}/pg_snowflake.control"),
        format!("{ext}/pg_snowflake--{version}.sql"),
    ]
    .into();
    for entry in std::fs::read_dir(root.join("sql")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.starts_with("pg_snowflake--") && name.ends_with(".sql") {
            let packed = std::fs::read(unpacked.join(&ext).join(&name))
                .unwrap_or_else(|e| panic!("{name} is not in the package: {e}"));
            assert!(
                packed == std::fs::read(root.join("sql").join(&name)).unwrap(),
                "{name} in the package differs from sql/{name}"
            );
            expected.insert(format!("{ext}/{name}"));
        }
    }
    let listing = Command::new("tar")
        .arg("-tzf")
        .arg(&tarball)
        .output()
        .expect("tar runs");
    let files: BTreeSet<String> = String::from_utf8_lossy(&listing.stdout)
        .lines()
        .filter(|line| !line.ends_with('/'))
        .map(str::to_string)
        .collect();
    assert_eq!(files, expected, "the files in {}", tarball.display());
    let control =
        std::fs::read_to_string(unpacked.join(&ext).join("pg_snowflake.control")).unwrap();
    assert!(
        control.contains(&format!("default_version = '{version}'")),
        "{control}"
    );
    std::fs::remove_dir_all(&unpacked).unwrap();
}
