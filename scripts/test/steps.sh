# shellcheck shell=bash disable=SC2164 # each stage runs under set -e (run_stage)
# The bodies of the stages of ./dev test (pgrx-tests/stages.txt names them), and
# run_stage, which runs each; sourced by dev beside scripts/setup/setup.sh and bench/suite.sh.
STAGES=()

# Runs stage $1 (with the other arguments) where major $2 lives: the sid root's through
# `./dev _stage` inside it (in_root), the others here.
at_home() {
    if is_sid_tree "$2" && ! in_sid_root; then in_root "$@"; else "$@"; fi
}
# ./dev _stage in the sid root, given the host's build of the tests (side-by-side reads
# PGSF_IT_BINARIES): they need libc alone, and building them there too cost 155 CPU-seconds.
in_root() {
    local binaries=${CARGO_TARGET_DIR:-$ROOT/target}/it-binaries
    mkdir -p "${binaries%/*}" && "$ROOT/scripts/test/side-by-side" --binaries >"$binaries"
    PGSF_IT_BINARIES=$binaries "$ROOT/scripts/setup/sid-root" run "$ROOT/dev" _stage "$@"
}

# run_stage NAME MAJOR COMMAND...: runs COMMAND in a subshell in this checkout (as ./dev _stage
# does in the sid root), whatever failed before it. Its tests are cargo's "test result:" counts;
# one without them counts as one test, one that fails without a failed test as one failure.
run_stage() {
    local name=$1 major=$2 out started rc passed failed seconds
    shift 2
    say "[$major] $name"
    out=$(mktemp)
    started=$(date +%s)
    set +e
    (set -e; cd "$ROOT"; "$@") 2>&1 | tee "$out"
    rc=${PIPESTATUS[0]}
    set -e
    read -r passed failed < <(awk '/^test result:/ { p += $4; f += $6 } END { print p + 0, f + 0 }' "$out")
    if ! grep -q '^test result:' "$out"; then
        if [ "$rc" -eq 0 ]; then passed=1; else failed=1; fi
    elif [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
        failed=1
    elif [ "$passed" -eq 0 ] && [ "$failed" -eq 0 ]; then
        say "[$major] $name ran no test (all filtered out or ignored)"
        failed=1
    fi
    # Its last lines if it failed, for run_tests to print where a log's tail (all CI keeps) shows.
    [ "$failed" -eq 0 ] || { echo "[$major] $name"; tail -n 60 "$out"; } >"$(mktemp -p "$FAILED_TAILS")"
    rm -f "$out"
    seconds=$(($(date +%s) - started))
    STAGES+=("$major	$name	$seconds	$passed	$failed")
    say "[$major] $name: $seconds s, $passed passed, $failed failed$(
        [ "$failed" -eq 0 ] || echo ": FAILED")"
}

# Every check runs, whatever the one before it found; the stage fails if any did.
stage_lint() {
    local rc=0 major scripts check
    cargo fmt --all -- --check || rc=1
    cargo clippy -p snowflake-core --all-targets -- -D warnings || rc=1
    for major in $(clippy_majors); do
        say "clippy, PostgreSQL $major"
        stage_clippy "$major" || rc=1
    done
    cargo clippy -p snowflake-it --all-targets -- -D warnings || rc=1
    mapfile -t scripts < <(grep -rlE '^#!/usr/bin/env (ba)?sh|^# shellcheck shell=' \
        dev scripts bench .ci --exclude-dir=target | sort)
    say "shellcheck ${scripts[*]}"
    shellcheck --external-sources "${scripts[@]}" || rc=1
    for check in links names labels majors; do
        say "scripts/check/$check"
        "$ROOT/scripts/check/$check" || rc=1
    done
    say "scripts/test/plan check"
    "$ROOT/scripts/test/plan" check || rc=1
    return "$rc"
}

# The majors lint runs clippy on: the lowest and highest tested outside the sid root (which has
# its own stage). Each cfg of src/pg.rs says "this major or later": those two compile every line.
clippy_majors() {
    local major majors=("${TEST_MAJORS[@]:-${PGSF_MAJORS[@]}}")
    for major in "${majors[0]}" "${majors[-1]}"; do is_sid_tree "$major" || echo "$major"; done | sort -u
}

stage_clippy() { cargo clippy --all-targets --no-default-features --features "pg$1" -- -D warnings; }

# Builds in the sid root what its majors' ($2...) stages build there (the release build too where
# $1, the lowest major tested, is one), beside the other majors' tests; a failure here recurs there.
stage_sid_builds() {
    local lowest=$1 major rc=0 pair
    shift
    for major in "$@"; do
        use_pg "$major"
        stage_clippy "$major" || rc=1
        cargo pgrx package --pg-config "$PG_CONFIG" --debug || rc=1
        [ "$major" != "$lowest" ] || cargo pgrx package --pg-config "$PG_CONFIG" || rc=1
        for pair in "${PGSF_UPGRADE_PAIRS_ALL[@]}"; do
            [ "${pair##*:}" = "$major" ] || continue
            use_pg "${pair%%:*}"
            cargo pgrx package --pg-config "$PG_CONFIG" --debug || rc=1
        done
    done
    return "$rc"
}

# The extension's unit tests (src/error/tests.rs): pure Rust, but linked against pgrx.
stage_unit() { cd "$ROOT" && cargo pgrx test "pg$1"; }

# The tests of pgrx-tests/ not #[ignore]d that pgrx-tests/plan.tsv runs on major $1 when $2 is
# the newest released major tested, side by side; then fails if a test is ignored in a binary no
# stage runs (the plan's stage: lines). On the newest, the registries are on the lowest major
# (PGSF_REGISTRY_PG_CONFIG, pgrx-tests/src/registry.rs): the oldest server their SQL may meet.
stage_servers() {
    local major=$1 newest=$2 rc=0 binary test stray=() staged lowest binaries='' ahead
    install_extension "$major"
    # The next major's build (run_tests' WARM_NEXT) at a low priority, the binaries listed first
    # so that no test waits on it; until it ends, it holds its tree's lock (package_tree's).
    if [ -z "${PGSF_IT_BINARIES:-}" ]; then
        binaries=$(mktemp) && "$ROOT/scripts/test/side-by-side" --binaries >"$binaries"
        export PGSF_IT_BINARIES=$binaries
    fi
    if [ -n "${WARM_NEXT:-}" ] && ! is_sid_tree "$WARM_NEXT"; then
        exec {ahead}>"${CARGO_TARGET_DIR:-$ROOT/target}/debug/pg_snowflake-pg$WARM_NEXT.lock" && flock "$ahead"
        (use_pg "$WARM_NEXT" && nice -n 10 ionice -c 2 -n 7 cargo pgrx package --pg-config \
            "$PG_CONFIG" --debug) >/dev/null 2>&1 &
        exec {ahead}>&-
    fi
    lowest=$(pg_config_of "${PGSF_MAJORS[0]}")
    if [ "$major" = "$newest" ] && runs_here "${PGSF_MAJORS[0]}" && [ -x "$lowest" ]; then
        export PGSF_REGISTRY_PG_CONFIG=$lowest
    fi
    # The newest's tests run the lease clients and the ORMs' migrations: their toolchains first.
    [ "$major" != "$newest" ] || "$ROOT/scripts/test/clients" --install-only psycopg node-pg go java
    "$ROOT/scripts/test/side-by-side" --plan "$major" "$newest" || rc=1
    staged=$("$ROOT/scripts/test/plan" staged)
    while read -r binary test; do
        [[ " $staged " == *" $binary "* ]] || stray+=("$binary: $test")
    done < <("$ROOT/scripts/test/side-by-side" --binaries | while read -r binary path; do
        "$path" --list --ignored --format terse | sed -n "s/^\(.*\): test\$/$binary \1/p"
    done)
    [ ${#stray[@]} -eq 0 ] || { rc=1 && printf \
        'ignored, and run by no stage (a stage: line of pgrx-tests/plan.tsv): %s\n' "${stray[@]}" >&2; }
    [ -z "$binaries" ] || rm -f "$binaries"
    return "$rc"
}

# Every test of binary $2 (a stage: line of the plan), the #[ignore]d ones too, one at a time, on
# major $1, where stage_servers installed the build.
stage_binary() {
    use_pg "$1"
    cargo test -p snowflake-it --no-fail-fast --test "$2" -- --include-ignored --test-threads=1 \
        --nocapture
}

# The README's install section from source, in this checkout; with --pgxn, in the PGXN zip
# unpacked elsewhere, built in this checkout's target directory (pgrx-tests/README.md says why).
stage_readme() {
    use_pg "$1"
    [ "${2:-}" = --pgxn ] || { "$ROOT/scripts/test/install-section"; return; }
    local dir rc=0 version
    version=$(cargo_version) dir=$(mktemp -d /tmp/pgsf-pgxn.XXXXXX)
    export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
    "$ROOT/scripts/package/pgxn"
    unzip -q "$CARGO_TARGET_DIR/pg_snowflake-$version.zip" -d "$dir"
    say "The README's install section in the unpacked zip, $dir/pg_snowflake-$version"
    "$dir/pg_snowflake-$version/scripts/test/install-section" || rc=$?
    rm -rf "$dir"
    return "$rc"
}

# Upgrading from each of PGSF_OLD_RELEASES, built from its own commit (scripts/package/old-release)
# and loaded through extension_control_path (18 or later), into the build installed in major $1.
stage_from_release() {
    use_pg "$1"
    local release build
    for release in "${PGSF_OLD_RELEASES[@]}"; do
        build=$("$ROOT/scripts/package/old-release" "$release" "$PG_CONFIG")
        export "PGSF_RELEASE_${release//./_}=$build" # PGSF_RELEASE_0_5_0, which the tests read
    done
    "$ROOT/scripts/test/side-by-side" -j 5 --binary from_release
}

# The smoke runs of the benchmarks (bench/README.md) and the report generator's self-check.
stage_bench_smoke() {
    use_pg "$1"
    INSTALLED_BUILD=release run_suite bench --smoke
    "$ROOT/bench/report" --self-check
    INSTALLED_BUILD=release run_suite bench-ids --quick
    local out
    out=$(mktemp -d)
    "$ROOT/bench/watermark" --smoke "$out/watermark.tsv"
    "$ROOT/bench/adopt-online" --smoke "$out/adopt-online.tsv"
    rm -rf "$out"
    "$ROOT/scripts/test/clients" --install-only psycopg node-pg go java
    "$ROOT/bench/lease-clients" --smoke
}

# bench/fleet-scale's smoke run, on the build stage_servers installed.
stage_fleet_scale_smoke() { use_pg "$1" && "$ROOT/bench/fleet-scale" --smoke; }

stage_across_majors() {
    local pairs=$1 tree
    for tree in $(tr ' :' '\n' <<<"$pairs" | sort -u); do install_extension "$tree"; done
    export_test_env
    PGSF_UPGRADE_PAIRS=$pairs "$ROOT/scripts/test/side-by-side" -j 4 --binary across_majors
}

stage_clients() { install_extension "$1" && "$ROOT/scripts/test/clients" --pg "$1"; }
