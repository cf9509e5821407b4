//! The packaging metadata agrees with the build: META.json (for PGXN) names the version,
//! licence and lowest PostgreSQL major version that Cargo.toml builds, and the files it points at
//! exist. `./dev package --pg N` makes a tarball and a lintian-clean .deb for major N, both in
//! Debian's layout for that major.

use serde_json::Value;
use snowflake_it::{
    cargo_package_field, cargo_version, pg_config_value, pg_major, pg_major_of, repo_root, run,
};
use std::collections::BTreeSet;

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

/// The top level the product's design card names, which tools outside the project look for: a
/// rename (0.5.0 called the test crate `integration/`) fails here rather than in someone's CI.
#[test]
fn the_top_level_has_the_names_the_design_card_gives() {
    for name in [
        "Cargo.toml",
        "src",
        "sql",
        "pgrx-tests",
        ".cargo",
        "README.md",
    ] {
        assert!(
            repo_root().join(name).exists(),
            "{name} is missing at the top level"
        );
    }
    assert_eq!(
        repo_root().join("pgrx-tests/Cargo.toml"),
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"),
        "the tests against real servers live in pgrx-tests/"
    );
}

/// Debian's layout for an extension of PostgreSQL `major` (the postgresql-N packages of Debian
/// and apt.postgresql.org): library directory and extension directory, relative to `/`.
/// Written out here apart from scripts/lib.sh, which builds the packages, on purpose: the test's
/// expectation must not come from the code under test.
fn debian_layout(major: u32) -> (String, String) {
    (
        format!("usr/lib/postgresql/{major}/lib"),
        format!("usr/share/postgresql/{major}/extension"),
    )
}

#[test]
fn debian_layout_is_what_debians_own_pg_config_says() {
    // Debian's own PostgreSQL is on this machine (15; in the sid root, 19): its pg_config is
    // the reference for the layout the packages of every major use.
    let debian = std::path::PathBuf::from(std::env::var("PGSF_DEBIAN_PG_CONFIG").expect(
        "PGSF_DEBIAN_PG_CONFIG is not set: run the tests through ./dev test, which sets it",
    ));
    let relative = |flag: &str| {
        pg_config_value(&debian, flag)
            .to_string_lossy()
            .trim_start_matches('/')
            .to_string()
    };
    assert_eq!(
        debian_layout(pg_major_of(&debian)),
        (
            relative("--pkglibdir"),
            relative("--sharedir") + "/extension"
        )
    );
}

#[test]
fn dev_package_packs_the_library_the_control_file_and_every_script_in_debians_layout() {
    let root = repo_root();
    let major = pg_major();
    // Builds both packages and fails unless lintian passes the .deb without errors or warnings.
    run(
        root.join("dev"),
        &["package", "--pg", &major.to_string(), "--debug"],
    );

    let version = cargo_version();
    let arch = std::env::consts::ARCH;
    // Where cargo builds (the sid root's builds: target/sid).
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root.join("target"), std::path::PathBuf::from)
        .join("debug");
    let tarball = target.join(format!(
        "pg_snowflake-{version}-pg{major}-{arch}-linux.tar.gz"
    ));
    let name = format!("postgresql-{major}-pg-snowflake");
    let deb = target.join(format!("{name}_{version}-1_amd64.deb"));
    let unpacked = std::env::temp_dir().join(format!("pgsf-package-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&unpacked);
    std::fs::create_dir_all(&unpacked).unwrap();
    run(
        "tar",
        &[
            "-xzf",
            tarball.to_str().unwrap(),
            "-C",
            unpacked.to_str().unwrap(),
        ],
    );

    // Exactly the library, the control file, the generated install script of this version and
    // every script of sql/, those byte for byte, at Debian's paths for this major.
    let (lib, ext) = debian_layout(major);
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
    let files = |listing: &str, column: usize| -> BTreeSet<String> {
        listing
            .lines()
            .filter_map(|line| line.split_whitespace().nth(column))
            .map(|path| path.trim_start_matches("./").to_string())
            .filter(|path| !path.is_empty() && !path.ends_with('/'))
            .collect()
    };
    let in_tarball = files(&run("tar", &["-tzf", tarball.to_str().unwrap()]), 0);
    assert_eq!(in_tarball, expected, "the files in {}", tarball.display());
    let control =
        std::fs::read_to_string(unpacked.join(&ext).join("pg_snowflake.control")).unwrap();
    assert!(
        control.contains(&format!("default_version = '{version}'")),
        "{control}"
    );

    // The .deb: the same files plus its copyright, changelog and lintian override, and the
    // monitoring files as examples, for postgresql-N.
    let doc = format!("usr/share/doc/{name}");
    expected.insert(format!("{doc}/copyright"));
    expected.insert(format!("{doc}/changelog.Debian.gz"));
    for example in ["pg_snowflake-queries.yaml", "pg_snowflake-alerts.yaml"] {
        expected.insert(format!("{doc}/examples/{example}"));
    }
    expected.insert(format!("usr/share/lintian/overrides/{name}"));
    let in_deb = files(&run("dpkg-deb", &["--contents", deb.to_str().unwrap()]), 5);
    assert_eq!(in_deb, expected, "the files in {}", deb.display());
    let field = |field: &str| run("dpkg-deb", &["--field", deb.to_str().unwrap(), field]);
    assert_eq!(field("Package").trim(), name);
    assert_eq!(field("Version").trim(), format!("{version}-1"));
    // The server, and libpq: the library links it for the node-id registry's connection.
    for needed in [format!("postgresql-{major}"), "libpq5".to_string()] {
        assert!(
            field("Depends")
                .split(", ")
                .any(|dependency| dependency.trim() == needed),
            "{needed} in Depends: {}",
            field("Depends")
        );
    }
    std::fs::remove_dir_all(&unpacked).unwrap();
}
