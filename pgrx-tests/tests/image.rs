//! The extension image for CloudNativePG (`./dev package --pg N --image`, scripts/package/image):
//! built from scratch with buildah, unpacked with umoci as the kubelet would mount it, and served
//! by a PostgreSQL 18 that finds the extension through nothing but `extension_control_path` and
//! `dynamic_library_path` pointing into that folder, with the library preloaded from there. The
//! archive's tags, its configuration's labels and user and its manifest's annotations are those
//! of CloudNativePG's postgres-extensions-containers, read from the archive itself. An image of
//! another major is refused with PostgreSQL's own magic-block error; without buildah, the build
//! says which package to install.
//!
//! #[ignore]d: its own stage runs it (`./dev test`, on the highest major outside the sid root,
//! 18 or later: extension_control_path is new in 18), with --include-ignored.

use serde_json::Value;
use snowflake_it::exporter::program_on_path;
use snowflake_it::server::{Config, Server};
use snowflake_it::{cargo_version, pg_config, pg_major, repo_root, run};
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// This machine's distribution (the `<distro>` of the tags) and architecture.
fn distro_and_arch() -> (String, String) {
    let distro = run(
        "sh",
        &[
            "-c",
            ". /etc/os-release && echo \"${VERSION_CODENAME:-$ID}\"",
        ],
    )
    .trim()
    .to_string();
    let arch = run("dpkg", &["--print-architecture"]).trim().to_string();
    (distro, arch)
}

/// The last commit's time in UTC, in git's `format-local` `format` (strftime).
fn commit_time(format: &str) -> String {
    let output = Command::new("git")
        .args([
            "log",
            "-1",
            &format!("--date=format-local:{format}"),
            "--format=%cd",
        ])
        .current_dir(repo_root())
        .env("TZ", "UTC")
        .output()
        .unwrap();
    assert!(output.status.success(), "git log: {output:?}");
    String::from_utf8(output.stdout).unwrap().trim().to_string()
}

/// What `./dev package --pg N --image` writes, and its two tags: the rolling
/// `<version>-<major>-<distro>` and the immutable `<version>-<YYYYMMDDhhmm>-<major>-<distro>`
/// (CloudNativePG's postgres-extensions-containers), the time the last commit's.
fn archive_and_tags(major: u32, profile: &str) -> (PathBuf, [String; 2]) {
    let version = cargo_version();
    let (distro, arch) = distro_and_arch();
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| repo_root().join("target"), PathBuf::from)
        .join(profile);
    let stamp = commit_time("%Y%m%d%H%M");
    (
        target.join(format!(
            "pg_snowflake-{version}-pg{major}-{distro}-{arch}.oci.tar"
        )),
        [
            format!("{version}-{major}-{distro}"),
            format!("{version}-{stamp}-{major}-{distro}"),
        ],
    )
}

/// Builds the image of `major` (`profile`: release, or debug, which ./dev test has built already:
/// the image's layout, tags, labels and loading are the packaging's, the same for either build,
/// and a release build here would compile every dependency again at full optimisation; the .deb
/// stage packs and installs the release build),
/// extracts its archive (an OCI layout) and unpacks it with umoci, by its rolling tag, into a
/// fresh folder that the postgres user can read: the image's root file system, as an image
/// volume shows it.
fn built_and_unpacked(major: u32, profile: &str) -> Unpacked {
    let major_arg = major.to_string();
    let mut args = vec!["package", "--pg", &major_arg, "--image"];
    if profile == "debug" {
        args.push("--debug");
    }
    run(repo_root().join("dev"), &args);
    let (archive, tags) = archive_and_tags(major, profile);
    assert!(archive.is_file(), "{} was not written", archive.display());
    let umoci = program_on_path("umoci", "umoci");
    let dir = PathBuf::from(format!("/tmp/pgsf-image-{major}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let layout = dir.join("layout");
    std::fs::create_dir_all(&layout).unwrap();
    run(
        "tar",
        &[
            "-xf",
            archive.to_str().unwrap(),
            "-C",
            layout.to_str().unwrap(),
        ],
    );
    let bundle = dir.join("bundle");
    run(
        &umoci,
        &[
            "unpack",
            "--rootless",
            "--image",
            &format!("{}:{}", layout.display(), tags[0]),
            bundle.to_str().unwrap(),
        ],
    );
    run("chmod", &["-R", "a+rX", dir.to_str().unwrap()]);
    let rootfs = bundle.join("rootfs");
    assert!(
        rootfs.is_dir(),
        "umoci unpacked no rootfs in {}",
        bundle.display()
    );
    Unpacked {
        dir,
        layout,
        rootfs,
        tags,
    }
}

/// An unpacked image: its folder is deleted on drop (after the servers declared later).
struct Unpacked {
    dir: PathBuf,
    /// The archive's OCI layout, extracted.
    layout: PathBuf,
    rootfs: PathBuf,
    /// The rolling tag, then the immutable one.
    tags: [String; 2],
}

impl Unpacked {
    /// A JSON blob of the layout, by its digest (`sha256:...`).
    fn blob(&self, digest: &str) -> Value {
        let (algorithm, hex) = digest.split_once(':').expect("a digest");
        let path = self.layout.join("blobs").join(algorithm).join(hex);
        serde_json::from_slice(&std::fs::read(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// The layout's index: each tag (`org.opencontainers.image.ref.name`) and its manifest's
    /// digest.
    fn tagged_manifests(&self) -> BTreeMap<String, String> {
        let index: Value =
            serde_json::from_slice(&std::fs::read(self.layout.join("index.json")).unwrap())
                .unwrap();
        index["manifests"]
            .as_array()
            .expect("the index lists manifests")
            .iter()
            .map(|entry| {
                (
                    entry["annotations"]["org.opencontainers.image.ref.name"]
                        .as_str()
                        .expect("a tagged manifest")
                        .to_string(),
                    entry["digest"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    /// The manifest of the rolling tag.
    fn manifest(&self) -> Value {
        self.blob(&self.tagged_manifests()[&self.tags[0]])
    }
}

/// A JSON object of strings (labels, annotations) as a map; anything else fails.
fn strings(object: &Value, what: &str) -> BTreeMap<String, String> {
    object
        .as_object()
        .unwrap_or_else(|| panic!("{what}: not an object: {object}"))
        .iter()
        .map(|(key, value)| {
            let value = value
                .as_str()
                .unwrap_or_else(|| panic!("{what}: {key} is not a string: {value}"));
            (key.clone(), value.to_string())
        })
        .collect()
}

impl Drop for Unpacked {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Every file under `root`, relative to it.
fn files_under(root: &Path) -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                files.insert(
                    path.strip_prefix(root)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
    }
    files
}

/// A PostgreSQL of the major under test that finds pg_snowflake in the image at `rootfs`:
/// CloudNativePG's settings for an image volume, the image's folders and the server's own
/// (`$system`, `$libdir`: PL/pgSQL, which the extension's scripts use, is found there), with the
/// image's first, so that the build installed in the tree cannot stand in for the image's (the
/// tests check the library and scripts a server took came from the image).
fn image_config(rootfs: &Path) -> Config {
    Config::default()
        .setting(&format!(
            "extension_control_path = '{}:$system'",
            rootfs.join("share").display()
        ))
        .setting(&format!(
            "dynamic_library_path = '{}:$libdir'",
            rootfs.join("lib").display()
        ))
}

#[test]
#[ignore]
fn the_image_alone_serves_ids_decodes_and_upgrades_from_0_4_0_in_postgresql_18() {
    let major = pg_major();
    assert!(
        major >= 18,
        "extension_control_path is PostgreSQL 18's: run on 18 or later"
    );
    let unpacked = built_and_unpacked(major, "debug");
    let rootfs = &unpacked.rootfs;
    let version = cargo_version();

    // Exactly what CloudNativePG looks for, and the licence.
    let mut expected: BTreeSet<String> = [
        "lib/pg_snowflake.so".to_string(),
        "share/extension/pg_snowflake.control".to_string(),
        format!("share/extension/pg_snowflake--{version}.sql"),
        "share/extension/pg_snowflake_read.control".to_string(),
        "licenses/pg_snowflake/LICENSE".to_string(),
        "licenses/pg_snowflake/copyright".to_string(),
    ]
    .into();
    for entry in std::fs::read_dir(repo_root().join("sql")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if (name.starts_with("pg_snowflake--") || name.starts_with("pg_snowflake_read--"))
            && name.ends_with(".sql")
        {
            expected.insert(format!("share/extension/{name}"));
        }
    }
    let files = files_under(rootfs);
    println!("The image's files ({}):", rootfs.display());
    for file in &files {
        let meta = std::fs::metadata(rootfs.join(file)).unwrap();
        println!(
            "  {:o} {:>9} {file}",
            meta.permissions().mode() & 0o777,
            meta.len()
        );
    }
    assert_eq!(files, expected, "the files of the image");
    let control =
        std::fs::read_to_string(rootfs.join("share/extension/pg_snowflake.control")).unwrap();
    assert!(
        control.contains("module_pathname = 'pg_snowflake'") && !control.contains("$libdir"),
        "the control file must let dynamic_library_path find the library:\n{control}"
    );

    // Preloaded from the image, with a node id.
    // (Server::init and start_again: Server::start would create the extension itself.)
    let server = Server::init(
        "image",
        Config {
            preload: true,
            node_id: Some(7),
            ..image_config(rootfs)
        },
    );
    server.start_again();
    let mut client = server.connect();
    client
        .batch_execute("CREATE EXTENSION pg_snowflake VERSION '0.4.0'")
        .expect("CREATE EXTENSION ... VERSION '0.4.0' from the image");
    client
        .batch_execute("ALTER EXTENSION pg_snowflake UPDATE")
        .expect("ALTER EXTENSION pg_snowflake UPDATE from the image's scripts");
    let installed: String = client
        .query_one(
            "SELECT extversion FROM pg_extension WHERE extname = 'pg_snowflake'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(installed, version, "the version after the update");
    let row = client
        .query_one(
            "SELECT id, d.node_id, d.seq, d.ts > now() - interval '1 minute' \
             FROM snowflake_nextval() AS id, snowflake_decode(id) AS d",
            &[],
        )
        .unwrap();
    let (id, node, fresh): (i64, i32, bool) = (row.get(0), row.get(1), row.get(3));
    assert!(id > 0, "a positive ID, got {id}");
    assert_eq!(node, 7, "decoded node id of {id}");
    assert!(fresh, "the decoded time of {id} is now");
    let ids: Vec<i64> = client
        .query(
            "SELECT snowflake_nextval() FROM generate_series(1, 1000)",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]) && ids[0] > id,
        "1,000 IDs in increasing order after {id}"
    );
    // A fresh database takes the default version straight from the image's control file.
    client.batch_execute("CREATE DATABASE fresh").unwrap();
    let mut fresh_db = server.connect_db("fresh");
    fresh_db
        .batch_execute("CREATE EXTENSION pg_snowflake")
        .unwrap();
    let default: String = fresh_db
        .query_one(
            "SELECT extversion FROM pg_extension WHERE extname = 'pg_snowflake'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(default, version);
    let probin: String = fresh_db
        .query_one(
            "SELECT probin FROM pg_proc WHERE proname = 'snowflake_nextval'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(
        probin, "pg_snowflake",
        "functions name the library without $libdir"
    );

    // The library this backend has mapped is the image's, not the tree's.
    let pid: i32 = client
        .query_one("SELECT pg_backend_pid()", &[])
        .unwrap()
        .get(0);
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let mapped: BTreeSet<&str> = maps
        .lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .filter(|path| path.ends_with("/pg_snowflake.so"))
        .collect();
    let ours = rootfs.join("lib/pg_snowflake.so");
    assert_eq!(
        mapped,
        [ours.to_str().unwrap()].into(),
        "the pg_snowflake.so mapped by backend {pid}"
    );
}

/// The tags, labels, annotations, user and licences of CloudNativePG's postgres-extensions-
/// containers (README: "Naming & Tagging Convention", "Image Labels"; docker-bake.hcl; the
/// Dockerfiles' `USER 65532:65532` and `/licenses/<package>/`), read from the archive: the labels
/// in the image's configuration, the same keys and values as annotations of its manifest, which
/// their tooling reads (dagger/maintenance: getImageAnnotations; GenerateTestingValues needs
/// io.cloudnativepg.image.base.name and org.opencontainers.image.version).
#[test]
#[ignore]
fn the_image_carries_cloudnativepgs_tags_labels_annotations_user_and_licences() {
    let major = pg_major();
    let unpacked = built_and_unpacked(major, "debug");
    let version = cargo_version();
    let (distro, arch) = distro_and_arch();

    // One image under both tags.
    let tagged = unpacked.tagged_manifests();
    println!("The archive's tags: {tagged:?}");
    assert_eq!(
        tagged.keys().cloned().collect::<BTreeSet<_>>(),
        unpacked.tags.iter().cloned().collect(),
        "the archive's tags"
    );
    assert_eq!(
        tagged[&unpacked.tags[0]], tagged[&unpacked.tags[1]],
        "the two tags name one manifest"
    );

    // The control file's default version is what io.cloudnativepg.image.sql.version says.
    let control =
        std::fs::read_to_string(unpacked.rootfs.join("share/extension/pg_snowflake.control"))
            .unwrap();
    let default_version = control
        .lines()
        .find_map(|line| line.strip_prefix("default_version = '"))
        .and_then(|rest| rest.strip_suffix('\''))
        .unwrap_or_else(|| panic!("no default_version in the control file:\n{control}"));
    assert_eq!(
        default_version, version,
        "the control file's default_version"
    );

    let revision = run(
        "git",
        &["-C", repo_root().to_str().unwrap(), "rev-parse", "HEAD"],
    )
    .trim()
    .to_string();
    let expected: BTreeMap<String, String> = [
        (
            "org.opencontainers.image.created",
            commit_time("%Y-%m-%dT%H:%M:%SZ"),
        ),
        ("org.opencontainers.image.version", version.clone()),
        ("org.opencontainers.image.revision", revision),
        (
            "org.opencontainers.image.title",
            format!("pg_snowflake {version} {major} {distro}"),
        ),
        (
            "org.opencontainers.image.description",
            format!(
                "A pg_snowflake {version} extension image for PostgreSQL {major} on {distro} \
                 ({arch}), for CloudNativePG's image volume extensions"
            ),
        ),
        ("org.opencontainers.image.licenses", "MIT".to_string()),
        (
            "org.opencontainers.image.vendor",
            "pg_snowflake developers".to_string(),
        ),
        (
            "org.opencontainers.image.authors",
            "pg_snowflake developers".to_string(),
        ),
        ("org.opencontainers.image.base.name", "scratch".to_string()),
        (
            "io.cloudnativepg.image.base.name",
            format!("ghcr.io/cloudnative-pg/postgresql:{major}-minimal-{distro}"),
        ),
        ("io.cloudnativepg.image.base.pgmajor", major.to_string()),
        ("io.cloudnativepg.image.base.os", distro.clone()),
        (
            "io.cloudnativepg.image.sql.version",
            default_version.to_string(),
        ),
    ]
    .into_iter()
    .map(|(key, value)| (key.to_string(), value))
    .collect();

    let manifest = unpacked.manifest();
    let annotations = strings(&manifest["annotations"], "the manifest's annotations");
    println!("The manifest's annotations: {annotations:#?}");
    assert_eq!(annotations, expected, "the manifest's annotations");

    let image = unpacked.blob(manifest["config"]["digest"].as_str().unwrap());
    let labels = strings(&image["config"]["Labels"], "the configuration's labels");
    assert_eq!(labels, expected, "the configuration's labels");
    assert_eq!(
        image["config"]["User"], "65532:65532",
        "the user the image runs as"
    );
    assert_eq!(
        image["created"], expected["org.opencontainers.image.created"],
        "the image's creation time: the last commit's"
    );
    assert_eq!(image["architecture"], arch.as_str(), "the architecture");

    // The licences, where CloudNativePG's images keep them.
    let licences = unpacked.rootfs.join("licenses/pg_snowflake");
    assert_eq!(
        std::fs::read(licences.join("LICENSE")).unwrap(),
        std::fs::read(repo_root().join("LICENSE")).unwrap(),
        "licenses/pg_snowflake/LICENSE is the tree's LICENSE"
    );
    let copyright = std::fs::read_to_string(licences.join("copyright")).unwrap();
    let year = commit_time("%Y");
    assert!(
        copyright.starts_with(
            "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"
        ) && copyright.contains(&format!(
            "Copyright: {year} pg_snowflake developers\nLicense: MIT\n"
        )),
        "licenses/pg_snowflake/copyright, Debian's format, MIT, {year}:\n{copyright}"
    );
}

/// An image of another major, mounted by mistake, is refused by PostgreSQL with its own error:
/// the magic block's version mismatch where the library gets that far (17 under 18), the dynamic
/// linker's missing symbol where it does not (15 under 18: PostgreSQL 17 removed
/// `old_snapshot_threshold`, which a library of 15 references, and PostgreSQL loads a library
/// with every symbol bound before it reads the magic block). Debug builds: the check is the same.
#[test]
#[ignore]
fn an_image_of_another_major_is_refused_with_postgresqls_own_error() {
    let major = pg_major();
    assert!(
        major >= 18,
        "extension_control_path is PostgreSQL 18's: run on 18 or later"
    );
    for (other, refusal) in [
        (
            17,
            (
                "incompatible library \"{}\": version mismatch".to_string(),
                Some(format!("Server is version {major}, library is version 17.")),
            ),
        ),
        (
            15,
            (
                "could not load library \"{}\": {}: undefined symbol: old_snapshot_threshold"
                    .to_string(),
                None,
            ),
        ),
    ] {
        let unpacked = built_and_unpacked(other, "debug");
        let annotations = strings(&unpacked.manifest()["annotations"], "annotations");
        assert_eq!(
            annotations["io.cloudnativepg.image.base.pgmajor"],
            other.to_string(),
            "the image of {other} says its major"
        );
        let rootfs = &unpacked.rootfs;
        let library = rootfs.join("lib/pg_snowflake.so");
        let message = refusal.0.replace("{}", &library.display().to_string());
        let server = Server::start(&format!("image-{other}"), image_config(rootfs));
        let mut client = server.connect();
        for sql in ["LOAD 'pg_snowflake'", "CREATE EXTENSION pg_snowflake"] {
            let error = client
                .batch_execute(sql)
                .expect_err("a library of another major loads");
            let db = error.as_db_error().expect("a server error");
            assert_eq!(db.message(), message, "{other} under {major}: {sql}");
            assert_eq!(
                db.detail(),
                refusal.1.as_deref(),
                "{other} under {major}: {sql}"
            );
        }
        // The server goes on serving.
        assert_eq!(server.query_one::<i32>("SELECT 1"), 1);

        // Preloaded, the server refuses to start, with the same words in its log.
        let preloaded = Server::init(
            &format!("image-{other}-preloaded"),
            Config {
                preload: true,
                node_id: Some(1),
                ..image_config(rootfs)
            },
        );
        let failure = preloaded
            .try_start()
            .expect_err("a server preloading a library of another major starts");
        let log = preloaded.log();
        assert!(
            log.contains(&message),
            "{other} under {major}: the refusal to start says {message}: {failure}\n{log}"
        );
    }
}

#[test]
#[ignore]
fn without_buildah_dev_package_image_names_the_debian_package() {
    // PATH as it is, but with every program except buildah: links in a folder of their own.
    let farm = PathBuf::from(format!("/tmp/pgsf-no-buildah-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&farm);
    std::fs::create_dir_all(&farm).unwrap();
    for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap()) {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if name != "buildah" && !farm.join(&name).exists() {
                let _ = std::os::unix::fs::symlink(entry.path(), farm.join(&name));
            }
        }
    }
    let output = Command::new(repo_root().join("scripts/package/image"))
        .args(["--pg", &pg_major().to_string()])
        .env("PATH", &farm)
        .env("PG_CONFIG", pg_config())
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&farm);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "built without buildah: {stderr}");
    assert_eq!(
        stderr.trim(),
        "image: buildah is not installed: install the Debian package buildah \
         (sudo apt-get install buildah; ./dev package --image installs it)"
    );
}
