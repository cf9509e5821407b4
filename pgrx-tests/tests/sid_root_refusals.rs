//! The sid root's refusals (scripts/setup/sid-root), each root at a fresh path: `./dev setup --pg
//! N` of the sid root's major fails with one line naming what is missing (Debian's archive out of
//! reach, a full disk) and leaves no root behind, while the other majors' set-up succeeds with the
//! archive out of reach; `./dev package` of that major is refused outside the root.
//!
//! #[ignore]d: its own stage runs it (`./dev test`, where a major lives in the sid root), with
//! --include-ignored.

use snowflake_it::{repo_root, run};
use std::path::PathBuf;
use std::process::Command;

/// A port nothing listens on: the archive out of reach.
const CLOSED: &str = "http://127.0.0.1:9/debian";

/// The sid root's major, its Debian version and the lowest major outside the root, as
/// scripts/lib/trees.sh gives them.
fn trees() -> (String, String, String) {
    let script = format!(
        ". {}/scripts/lib/lib.sh && sid=${{PGSF_SID_TREES[0]}} && for m in \"${{PGSF_MAJORS[@]}}\"; \
         do is_sid_tree $m || break; done && echo \"$sid ${{PGSF_TREE_FROM[$sid]#*:}} $m\"",
        repo_root().display()
    );
    let out = run("bash", &["-c", &script]);
    let words: Vec<&str> = out.split_whitespace().collect();
    assert_eq!(words.len(), 3, "{out}");
    (words[0].into(), words[1].into(), words[2].into())
}

/// `./dev ARGS` with the variables `env`: the last line it wrote to standard error, or
/// "succeeds".
fn dev(env: &[(&str, &str)], args: &[&str]) -> String {
    let output = Command::new(repo_root().join("dev"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("./dev runs");
    if output.status.success() {
        return "succeeds".to_string();
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    stderr.lines().last().unwrap_or_default().to_string()
}

/// A folder of its own, with a 64 MiB tmpfs in it, unmounted and removed however the test ends.
struct Work(PathBuf);

impl Work {
    fn new() -> Work {
        let work = PathBuf::from(run("mktemp", &["-d", "/tmp/pgsf-sid-refusals.XXXXXX"]).trim());
        std::fs::create_dir(work.join("small")).unwrap();
        let small = work.join("small");
        run(
            "sudo",
            &[
                "mount",
                "-t",
                "tmpfs",
                "-o",
                "size=64m",
                "tmpfs",
                small.to_str().unwrap(),
            ],
        );
        Work(work)
    }

    fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        let _ = Command::new("sudo")
            .args(["umount", &self.path("small")])
            .status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
#[ignore]
fn the_sid_root_refuses_what_it_cannot_do_with_a_line_naming_it() {
    let (major, version, other) = trees();
    let work = Work::new();
    let (root, small_root) = (work.path("root"), work.path("small/root"));
    assert_eq!(
        dev(
            &[("PGSF_SID_ROOT", &root), ("PGSF_DEBIAN_MIRROR", CLOSED)],
            &["setup", "--pg", &major]
        ),
        format!(
            "sid-root: Debian's archive is not reachable at {CLOSED} (the sid root is made from \
             its sid and experimental suites; PGSF_DEBIAN_MIRROR names another mirror)"
        ),
        "the archive out of reach"
    );
    assert_eq!(
        dev(
            &[("PGSF_SID_ROOT", &small_root)],
            &["setup", "--pg", &major]
        ),
        format!(
            "sid-root: the sid root needs 5 GB free in {}, which has 0 GB free (PGSF_SID_ROOT \
             moves it)",
            work.path("small")
        ),
        "a full disk"
    );
    assert_eq!(
        dev(
            &[("PGSF_SID_ROOT", &root), ("PGSF_DEBIAN_MIRROR", CLOSED)],
            &["setup", "--pg", &other]
        ),
        "succeeds",
        "the other majors' set-up, with the archive out of reach"
    );
    assert_eq!(
        dev(&[], &["package", "--pg", &major]),
        format!(
            "dev: PostgreSQL {major} is Debian's {version} in the sid root, for ./dev test --pg \
             {major} only: no demo, package or benchmark before a released {major}.x"
        ),
        "a package of the sid root's major, outside it"
    );
    assert!(
        !std::path::Path::new(&root).exists() && !std::path::Path::new(&small_root).exists(),
        "a refused set-up left a root behind"
    );
}
