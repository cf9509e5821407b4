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
    // The Meta Spec's form, "name <address>": PGXN shows the address, and the spec asks for one.
    let maintainer = meta["maintainer"].as_str().expect("maintainer: a String");
    let address = maintainer
        .strip_prefix("pg_snowflake developers <")
        .and_then(|rest| rest.strip_suffix('>'))
        .unwrap_or_else(|| {
            panic!("maintainer {maintainer:?}: not \"pg_snowflake developers <address>\"")
        });
    assert!(
        address.contains('@') && !address.contains(' '),
        "maintainer's address {address:?}"
    );
    // The PostgreSQL majors Cargo.toml builds for (its features pgNN): the lowest is the
    // default, and the range ends before the major after the highest.
    let majors: Vec<u32> = read("Cargo.toml")
        .lines()
        .filter_map(|line| line.strip_prefix("pg"))
        .filter_map(|rest| rest.split(' ').next()?.parse().ok())
        .collect();
    let (lowest, highest) = (majors.iter().min().unwrap(), majors.iter().max().unwrap());
    assert!(
        read("Cargo.toml").contains(&format!("default = [\"pg{lowest}\"]")),
        "Cargo.toml's default is the lowest major, pg{lowest}"
    );
    let range = format!(">= {lowest}.0.0, < {}.0.0", highest + 1);
    for phase in ["build", "runtime"] {
        assert_eq!(
            meta["prereqs"][phase]["requires"]["PostgreSQL"],
            range.as_str(),
            "prereqs.{phase}.requires.PostgreSQL"
        );
    }
    assert_eq!(
        meta["x_build_tools"]["cargo-pgrx"],
        format!("== {}", cargo_dependency_version("pgrx")).as_str(),
        "the cargo-pgrx META.json names is the pgrx Cargo.toml pins"
    );
    assert_eq!(
        meta["x_build_tools"]["rustc"],
        format!(">= {}.0", toolchain_value("PGSF_RUST_MIN")).as_str(),
        "the Rust META.json names is scripts/lib/toolchain.sh's PGSF_RUST_MIN"
    );
    for key in ["file", "docfile"] {
        let path = meta["provides"]["pg_snowflake"][key]
            .as_str()
            .unwrap_or_else(|| panic!("provides.pg_snowflake.{key} is a string"));
        assert!(repo_root().join(path).is_file(), "{key} {path} exists");
    }
}

/// The version Cargo.toml pins for dependency `name` (`name = "=X.Y.Z"`).
fn cargo_dependency_version(name: &str) -> String {
    read("Cargo.toml")
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{name} = \"=")))
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("Cargo.toml pins {name} = \"=X.Y.Z\""))
        .to_string()
}

/// The value scripts/lib/toolchain.sh assigns to `name` (`NAME=value`).
fn toolchain_value(name: &str) -> String {
    read("scripts/lib/toolchain.sh")
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("scripts/lib/toolchain.sh sets {name}"))
        .to_string()
}

/// Whether `s` is a PGXN Meta Spec 1.0.0 "Term": at least two characters, none of them a slash,
/// a backslash, white space or a control character.
fn is_term(s: &str) -> bool {
    s.chars().count() >= 2
        && !s
            .chars()
            .any(|c| c == '/' || c == '\\' || c.is_whitespace() || c.is_control())
}

/// Whether `s` is a "Version" of the spec: a semantic version, MAJOR.MINOR.PATCH without
/// leading zeros (a pre-release suffix is allowed).
fn is_semver(s: &str) -> bool {
    let core = s.split(['-', '+']).next().unwrap();
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts.iter().all(|part| {
            !part.is_empty()
                && part.chars().all(|c| c.is_ascii_digit())
                && (part.len() == 1 || !part.starts_with('0'))
        })
}

/// Whether `value` is a "Version Range" of the spec: 0, a version (at least it), or
/// comma-separated clauses of an operator (==, !=, <, <=, >, >=) and a version.
fn is_version_range(value: &Value) -> bool {
    if value == &Value::from(0) || value == "0" {
        return true;
    }
    let Some(range) = value.as_str() else {
        return false;
    };
    range.split(',').all(|clause| {
        let clause = clause.trim();
        let version = ["==", "!=", "<=", ">=", "<", ">"]
            .iter()
            .find_map(|op| clause.strip_prefix(op))
            .unwrap_or(clause)
            .trim();
        is_semver(version)
    })
}

/// META.json against the rules of the PGXN Meta Spec 1.0.0 (https://pgxn.org/spec/), each
/// check under the name of the spec's section that states it.
#[test]
fn meta_json_follows_the_pgxn_meta_spec_1_0_0() {
    let meta = meta();
    let map = meta.as_object().expect("META.json is a Map");
    // "Structure", "Required Fields".
    let required = [
        "abstract",
        "maintainer",
        "license",
        "meta-spec",
        "name",
        "provides",
        "version",
    ];
    for key in required {
        assert!(map.contains_key(key), "Required Fields: {key} is missing");
    }
    // "Optional Fields", and "Custom Fields" (x_ or X_ and a name): nothing else.
    let optional = [
        "description",
        "generated_by",
        "no_index",
        "prereqs",
        "release_status",
        "resources",
        "tags",
    ];
    for key in map.keys() {
        let custom = (key.starts_with("x_") || key.starts_with("X_")) && key.len() > 2;
        assert!(
            custom || optional.contains(&key.as_str()) || required.contains(&key.as_str()),
            "Structure: {key} is neither a field of the spec nor a custom x_ field"
        );
    }
    // "name": a Term. "version": a Version (semantic). "abstract": a non-empty String.
    assert!(is_term(meta["name"].as_str().unwrap()), "name: a Term");
    assert!(
        is_semver(meta["version"].as_str().unwrap()),
        "version: a SemVer"
    );
    assert!(!meta["abstract"].as_str().unwrap().is_empty(), "abstract");
    // "maintainer": a String or a List of Strings.
    assert!(
        meta["maintainer"].as_str().is_some_and(|m| !m.is_empty())
            || meta["maintainer"]
                .as_array()
                .is_some_and(|list| list.iter().all(Value::is_string)),
        "maintainer: a String or a List of Strings"
    );
    // "license": a License String of the spec's list (lower case), a List of them, or a Map.
    assert!(
        [
            "mit",
            "postgresql",
            "bsd",
            "apache_2_0",
            "gpl_3",
            "open_source"
        ]
        .contains(&meta["license"].as_str().unwrap_or("")),
        "license: one of the spec's License Strings"
    );
    // "meta-spec": version 1.0.0, url optional.
    assert_eq!(meta["meta-spec"]["version"], "1.0.0", "meta-spec: version");
    // "provides": each key an extension's name (a Term) mapped to file (required: a path that
    // exists in the distribution) and version (required: a Version); docfile and abstract
    // optional.
    let provides = meta["provides"].as_object().expect("provides: a Map");
    assert!(!provides.is_empty(), "provides: at least one extension");
    for (extension, entry) in provides {
        assert!(is_term(extension), "provides: {extension} is a Term");
        for key in entry.as_object().unwrap().keys() {
            assert!(
                ["file", "version", "abstract", "docfile"].contains(&key.as_str())
                    || key.starts_with("x_"),
                "provides.{extension}: {key} is not a field of the spec"
            );
        }
        for key in ["file", "docfile"] {
            if let Some(path) = entry[key].as_str() {
                assert!(
                    repo_root().join(path).is_file(),
                    "provides.{extension}.{key}: {path}"
                );
            }
        }
        assert!(
            entry["file"].is_string(),
            "provides.{extension}.file is required"
        );
        assert!(
            is_semver(entry["version"].as_str().unwrap_or("")),
            "provides.{extension}.version: a Version"
        );
        assert!(
            repo_root().join(format!("{extension}.control")).is_file(),
            "provides.{extension}: its control file {extension}.control"
        );
    }
    // "release_status": stable, testing or unstable.
    assert!(
        ["stable", "testing", "unstable"].contains(&meta["release_status"].as_str().unwrap()),
        "release_status"
    );
    // "prereqs", "Prereq Spec": phases configure, build, test, runtime, develop; relationships
    // requires, recommends, suggests, conflicts; each a Map of Terms to Version Ranges.
    for (phase, relationships) in meta["prereqs"].as_object().expect("prereqs: a Map") {
        assert!(
            ["configure", "build", "test", "runtime", "develop"].contains(&phase.as_str()),
            "Phases: {phase}"
        );
        for (relationship, prereqs) in relationships.as_object().unwrap() {
            assert!(
                ["requires", "recommends", "suggests", "conflicts"]
                    .contains(&relationship.as_str()),
                "Relationships: {phase}.{relationship}"
            );
            for (name, range) in prereqs.as_object().unwrap() {
                assert!(
                    is_term(name),
                    "prereqs.{phase}.{relationship}: {name} is a Term"
                );
                assert!(
                    is_version_range(range),
                    "Version Ranges: prereqs.{phase}.{relationship}.{name} = {range}"
                );
            }
        }
    }
    // "resources" (optional): homepage (a URI), bugtracker, repository; nothing else but x_
    // keys. None may be PGXN's own page for the dist, which exists only after an upload.
    let no_resources = serde_json::Map::new();
    let resources = match meta.get("resources") {
        Some(value) => value.as_object().expect("resources: a Map"),
        None => &no_resources,
    };
    for (key, value) in resources {
        assert!(
            !value.to_string().contains("pgxn.org/dist/"),
            "resources.{key} points at PGXN's page for the dist: {value}"
        );
        assert!(
            ["homepage", "bugtracker", "repository"].contains(&key.as_str())
                || key.starts_with("x_"),
            "resources: {key}"
        );
        if key == "homepage" {
            assert!(
                value.as_str().unwrap().starts_with("https://"),
                "resources.homepage"
            );
        }
    }
    // "tags": a List of Tags, each 1 to 255 characters, no slash, backslash or control
    // character.
    for tag in meta["tags"].as_array().expect("tags: a List") {
        let tag = tag.as_str().unwrap();
        assert!(
            (1..=255).contains(&tag.chars().count())
                && !tag.chars().any(|c| c == '/' || c == '\\' || c.is_control()),
            "Tag: {tag}"
        );
    }
    // "no_index": file and directory lists of paths that exist.
    for (key, paths) in meta["no_index"].as_object().expect("no_index: a Map") {
        assert!(
            ["file", "directory"].contains(&key.as_str()),
            "no_index: {key}"
        );
        for path in paths.as_array().unwrap() {
            assert!(
                repo_root().join(path.as_str().unwrap()).exists(),
                "no_index: {path}"
            );
        }
    }
}

/// The rules above can fail: each helper refuses what the spec refuses.
#[test]
fn the_pgxn_rules_refuse_what_the_spec_refuses() {
    assert!(!is_term("a") && !is_term("pg snowflake") && !is_term("a/b"));
    assert!(!is_semver("0.5") && !is_semver("01.2.3") && !is_semver("1.2.x"));
    assert!(!is_version_range(&Value::from(">= 15, < 20")));
    assert!(!is_version_range(&Value::from("=> 15.0.0")));
    assert!(is_version_range(&Value::from(">= 15.0.0, < 20.0.0")));
    assert!(is_version_range(&Value::from(0)));
}

/// `./dev package --pgxn` writes pg_snowflake-<version>.zip as PGXN expects: one top folder
/// pg_snowflake-<version>/, META.json at its top, and every file git tracks under what a user of
/// the zip needs: the build (the extension, its core, the SQL), make's targets (the Makefile,
/// scripts/package/pgxn-make, the regression test), the README's install recipe (dev and the scripts it
/// runs) and the docs the README links to, with the licence; nothing else (the README's install
/// from the zip is a stage of ./dev test, so a file left out fails there). The list is written
/// out here, apart from scripts/package/pgxn's, on purpose.
#[test]
fn dev_package_pgxn_zips_every_tracked_file_a_user_needs_under_one_top_folder() {
    let root = repo_root();
    let version = cargo_version();
    run(root.join("dev"), &["package", "--pgxn"]);
    let zip = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| root.join("target"), std::path::PathBuf::from)
        .join(format!("pg_snowflake-{version}.zip"));
    let top = format!("pg_snowflake-{version}/");
    let listing = run("unzip", &["-Z1", zip.to_str().unwrap()]);
    let files: BTreeSet<String> = listing
        .lines()
        .map(|entry| {
            entry
                .strip_prefix(&top)
                .unwrap_or_else(|| panic!("{entry} is outside the top folder {top}"))
                .to_string()
        })
        .filter(|path| !path.is_empty() && !path.ends_with('/'))
        .collect();
    let shipped = [
        "META.json",
        "LICENSE",
        "README.md",
        "CHANGELOG.md",
        "docs/",
        "Makefile",
        "pg_snowflake.control",
        "pg_snowflake_read.control",
        "Cargo.toml",
        "Cargo.lock",
        ".cargo/",
        "src/",
        "sql/",
        "test/",
        "core/Cargo.toml",
        "core/src/",
        "core/benches/",
        "pgrx-tests/Cargo.toml",
        "pgrx-tests/src/",
        "dev",
        "scripts/lib/",
        "scripts/setup/setup.sh",
        "scripts/test/stages.sh",
        "scripts/test/steps.sh",
        "bench/suite.sh",
        "scripts/package/pgxn-make",
        "scripts/test/install-section",
        "scripts/serve/pgserver",
        "scripts/serve/new-system-id",
    ];
    let tracked: BTreeSet<String> = run("git", &["-C", root.to_str().unwrap(), "ls-files"])
        .lines()
        .filter(|path| {
            shipped
                .iter()
                .any(|s| *path == *s || (s.ends_with('/') && path.starts_with(s)))
        })
        .map(str::to_string)
        .collect();
    assert_eq!(
        files, tracked,
        "the zip's files and git's, under what it ships"
    );
    let meta_in_zip = run(
        "unzip",
        &["-p", zip.to_str().unwrap(), &format!("{top}META.json")],
    );
    assert_eq!(meta_in_zip, read("META.json"), "the zip's META.json");
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
/// Written out here apart from scripts/lib/package.sh, which builds the packages, on purpose: the
/// test's expectation must not come from the code under test.
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
    // every script of sql/ (the SQL-only read extension's too, with its control file), those byte
    // for byte, at Debian's paths for this major.
    let (lib, ext) = debian_layout(major);
    let mut expected: BTreeSet<String> = [
        format!("{lib}/pg_snowflake.so"),
        format!("{ext}/pg_snowflake.control"),
        format!("{ext}/pg_snowflake--{version}.sql"),
        format!("{ext}/pg_snowflake_read.control"),
    ]
    .into();
    assert!(
        std::fs::read(unpacked.join(&ext).join("pg_snowflake_read.control")).unwrap()
            == std::fs::read(root.join("pg_snowflake_read.control")).unwrap(),
        "pg_snowflake_read.control in the package differs from the checkout's"
    );
    for entry in std::fs::read_dir(root.join("sql")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if (name.starts_with("pg_snowflake--") || name.starts_with("pg_snowflake_read--"))
            && name.ends_with(".sql")
        {
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
    for example in [
        "pg_snowflake-queries.yaml",
        "pg_snowflake-alerts.yaml",
        "pg_snowflake-dashboard.json",
    ] {
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
