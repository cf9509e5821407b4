# shellcheck shell=bash
# The stages of `./dev test`, sourced by dev, whose run_tests runs them in the order of
# STAGE_TABLE (what each runs: pgrx-tests/README.md#what-dev-test-runs). They use install_extension
# (scripts/setup/setup.sh) and scripts/lib/lib.sh; each runs in a subshell of its own through run_stage.
# run_suite, the benchmarks' runner, is ./dev bench's too.

# The stages, in the order they run, one a line: what run_stage prints | which majors | where it
# runs | the command (@major: the major, @pairs: the pg_upgrade pairs, scripts/...: in this
# checkout, @newest: the newest released major tested, which runs the tests pgrx-tests/plan.tsv
# runs once) | what is said instead where a major is left out (else nothing); a line ending in a
# backslash goes on on the next. run_tests reads it.
# Which majors:
#   once          once, before the majors (the major printed: all)
#   each          every major tested; sid: those of the sid root
#   TEST          the majors whose line of PGSF_TREE_TABLE has the test TEST (deb-readme, partman)
#   first         the lowest major tested, which gets the release build (fat LTO, one codegen
#                 unit: minutes on 2 cores, so one major's only); first-host, first-sid: the
#                 lowest if it is outside, or inside, the sid root
#   last-host     after the majors, on the highest tested outside the sid root (the newest
#                 released is what a new application starts on); last-host:TEST: the same, if
#                 its line has TEST
#   across-host, across-sid   after the majors, the pg_upgrade pairs without or with a sid tree
# Where it runs: host (here), home (where the major lives: inside the sid root for its trees),
# root (inside the sid root).
read -r -d '' STAGE_TABLE <<'EOF' || true
lint: format, clippy, shellcheck, scripts/check-*, scripts/test/plan check | once | host | stage_lint
core: unit and property tests of the pure core (core/) | once | host | stage_core
mutants: each named mutation of the registry's rules caught by a seed | once | host | stage_mutants
pgxn install of the PGXN zip in a clean Debian 12 root (scripts/test/pgxn-install) | once | host \
    | scripts/test/pgxn-install
the sid root's refusals: no archive, a full disk (scripts/test/sid-root-refusals) | sid | host \
    | scripts/test/sid-root-refusals
clippy (in the sid root) | sid | home | stage_clippy @major
#[pg_test]s in a server with the library preloaded | each | home | stage_pg_test @major
golden SQL and multi-server tests (pgrx-tests/ by its plan, side by side) | each | home \
    | stage_servers @major @newest
the pg_partman recipe (pgrx-tests/tests/partman.rs) | partman | host | stage_partman @major
README install section from the Debian package; apt remove | deb-readme | host \
    | scripts/test/install-section --deb
README install section from source, in the PGXN zip (./dev package --pgxn) | first-host | host \
    | stage_readme @major --pgxn
README install section from source (release build) | first-sid | home | stage_readme @major
benchmark smoke run (release build; fails on errors, never on numbers) | first | home \
    | stage_bench_smoke @major \
    | [@major] README install from source and bench smoke: on @first only (./dev test --pg @major runs them)
client recipes: drivers and ORMs (examples/, docs/CLIENTS.md) | last-host | host \
    | stage_clients @major \
    | client recipes: on a major outside the sid root only (./dev test --pg @default)
extension image for CloudNativePG, alone in a server (pgrx-tests/tests/image.rs) | last-host:image \
    | host | stage_image @major \
    | extension image: on 18 or later outside the sid root only (./dev test --pg 18)
the registry at scale, smoke run (bench/fleet-scale; errors only, never numbers) | last-host \
    | host | stage_fleet_scale_smoke @major
upgrading from 0.5.0's own build: a server, a standby, fleets (pgrx-tests/tests/from_release.rs) \
    | last-host:from-release | host | stage_from_release @major
pg_upgrade and pg_dump across majors (@pairs) | across-host | host | stage_across_majors @pairs
pg_upgrade and pg_dump across majors (@pairs, in the sid root) | across-sid | root \
    | stage_across_majors @pairs
EOF

# The majors line $1 of STAGE_TABLE picks in the run of TEST_MAJORS (and PAIRS), for the phase
# $2 (once, the major $3, or after), one a line; none when it is not of that phase.
table_majors() {
    local which=$1 phase=$2 major=${3:-} last
    case "$phase:$which" in
    once:once) echo all ;;
    major:each) echo "$major" ;;
    major:sid) if is_sid_tree "$major"; then echo "$major"; fi ;;
    major:deb-readme | major:partman) if tree_tests "$which" "$major"; then echo "$major"; fi ;;
    major:first*)
        [ "$major" = "${TEST_MAJORS[0]}" ] || return 0
        case "$which" in
        first-host) is_sid_tree "$major" || echo "$major" ;;
        first-sid) ! is_sid_tree "$major" || echo "$major" ;;
        *) echo "$major" ;;
        esac
        ;;
    after:last-host*)
        last=$(highest_host_major "${TEST_MAJORS[@]}")
        [ -n "$last" ] || return 0
        [[ $which != *:* ]] || tree_tests "${which#*:}" "$last" || return 0
        echo "$last"
        ;;
    after:across-*)
        local pairs_words
        read -ra pairs_words <<<"${PAIRS:-}"
        pairs_with "--${which#across-}" "${pairs_words[@]}"
        ;;
    esac
}

# The phase of the majors line $1 of STAGE_TABLE: once, major or after.
table_phase() {
    case "$1" in
    once) echo once ;;
    last-host* | across-*) echo after ;;
    *) echo major ;;
    esac
}

# Runs the stages of STAGE_TABLE of the phase $1 (once, major, after) on major $2 (major), or
# says why one is left out.
run_table() {
    local phase=$1 major=${2:-} name which where command skipped on word words label
    # Not read -r: a line of the table ending in a backslash goes on on the next.
    # shellcheck disable=SC2162
    while IFS='|' read name which where command skipped; do
        read -r name <<<"$name"
        read -r which where <<<"$which $where"
        [ "$(table_phase "$which")" = "$phase" ] || continue
        on=$(table_majors "$which" "$phase" "$major")
        if [ -z "$on" ]; then
            [ -n "${skipped// /}" ] || continue
            skipped=$(table_words "${skipped# }" "$major")
            say "$skipped"
            continue
        fi
        words=()
        [ "$where" != home ] || words=(at_home)
        [ "$where" != root ] || words=(in_root)
        # shellcheck disable=SC2086 # the command's words
        for word in $command; do
            case "$word" in
            @major) words+=("$on") ;;
            @pairs) words+=("$on") ;;
            @newest) words+=("$(newest_major)") ;;
            scripts/*) words+=("$ROOT/$word") ;;
            *) words+=("$word") ;;
            esac
        done
        label=$on
        case "$which" in once) label=all ;; across-*) label=across ;; esac
        run_stage "$(table_words "${name//@pairs/$on}" "$major")" "$label" "${words[@]}"
    done <<<"$STAGE_TABLE"
}

# Text $1 with @major (the major $2), @first (the lowest tested) and @default (the lowest
# supported) put in.
table_words() {
    local text=${1//@major/$2}
    text=${text//@first/${TEST_MAJORS[0]}}
    echo "${text//@default/${PGSF_MAJORS[0]}}"
}

# Every stage runs whatever happened before it. A stage's tests are counted from cargo's
# "test result:" lines; a stage without them (lint, a script) counts as one test; a stage that
# fails without a failed test (a build error) counts one failure.
STAGES=()

# Runs stage $1 (with the other arguments) where major $2 lives: inside the sid root for its trees
# (in_root), here for the others.
at_home() {
    if is_sid_tree "$2" && ! in_sid_root; then
        in_root "$@"
    else
        "$@"
    fi
}

# Runs stage $1 (with the other arguments) inside the sid root: `./dev _stage` there.
in_root() {
    "$ROOT/scripts/setup/sid-root" run "$ROOT/dev" _stage "$@"
}

# run_stage NAME MAJOR COMMAND...: runs COMMAND in a subshell, its output on the terminal.
run_stage() {
    local name=$1 major=$2
    shift 2
    say "[$major] $name"
    local out started rc passed failed
    out=$(mktemp)
    started=$(date +%s)
    set +e
    (set -e; "$@") 2>&1 | tee "$out"
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
    rm -f "$out"
    STAGES+=("$major	$name	$(($(date +%s) - started))	$passed	$failed")
    if [ "$failed" -gt 0 ]; then
        say "[$major] $name: FAILED ($failed failed, $passed passed)"
    fi
}

# The pure core needs no PostgreSQL: once for every major.
# --show-output: the seeded fuzz of the parsers says how many inputs it tried.
stage_core() {
    cd "$ROOT"
    cargo test -p snowflake-core -- --show-output
}

# Each named mutation of the registry's rules caught by a seed of the fault simulation, on a
# copy of the core under target/mutants/.
stage_mutants() {
    "$ROOT/scripts/test/mutants"
}

# Every check runs, whatever the one before it found; the stage fails if any did.
stage_lint() {
    cd "$ROOT"
    local rc=0 major scripts
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
    say "links of the Markdown files (scripts/check/links)"
    "$ROOT/scripts/check/links" || rc=1
    say "code names of the Markdown files (scripts/check/names)"
    "$ROOT/scripts/check/names" || rc=1
    say "no finding labels in code, tests or docs (scripts/check/labels)"
    "$ROOT/scripts/check/labels" || rc=1
    say "the majors each file names are PGSF_TREE_TABLE's (scripts/check/majors)"
    "$ROOT/scripts/check/majors" || rc=1
    say "the test plan: every test file in a line; pgrx-tests/README.md's stages, plan and times (scripts/test/plan check)"
    "$ROOT/scripts/test/plan" check || rc=1
    return "$rc"
}

# The majors lint runs clippy on here: the lowest and the highest tested, but those of the sid
# root, which have a stage of their own (clippy in the sid root). The code differs between majors
# only in src/pg.rs, whose every cfg says "this major or later": the lowest compiles each site's
# older side and the highest its newer side, so the majors between reach no line they do not.
clippy_majors() {
    local major
    for major in "${TEST_MAJORS[0]}" "${TEST_MAJORS[-1]}"; do
        is_sid_tree "$major" || echo "$major"
    done | sort -u
}

# The newest released major tested, which runs the tests pgrx-tests/plan.tsv runs once: the
# highest outside the sid root, or the highest when all are inside it.
newest_major() {
    local newest
    newest=$(highest_host_major "${TEST_MAJORS[@]}")
    echo "${newest:-${TEST_MAJORS[-1]}}"
}

# The extension built for major $1, under clippy (a step of stage_lint, run where $1 lives).
stage_clippy() {
    cd "$ROOT"
    cargo clippy --all-targets --no-default-features --features "pg$1" -- -D warnings
}

# Builds, in the sid root, what the stages of its majors $2... build there: clippy's check, the
# tests' binaries, the debug build of each major (and the release build of $1, the lowest major
# tested, which the README's install and the bench smoke take), the debug build of the old side
# of each pg_upgrade pair into them. run_tests runs it in the background (nice, ionice
# idle) beside the other majors' tests; a build that fails here fails again in its stage.
stage_sid_builds() {
    cd "$ROOT"
    local lowest=$1 major rc=0 pair
    shift
    cargo test -p snowflake-it --no-run || rc=1
    for major in "$@"; do
        use_pg "$major"
        cargo clippy --all-targets --no-default-features --features "pg$major" -- -D warnings ||
            rc=1
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

# cargo pgrx test needs a data directory the postgres user owns and the caller can enter: pgrx
# starts initdb with the working directory set to it, as the caller.
stage_pg_test() {
    local major=$1 pgdata
    pgdata=$(mktemp -d /tmp/pgsf-test.XXXXXX)
    as_root chown postgres "$pgdata"
    as_root chmod 711 "$pgdata"
    local rc=0
    (cd "$ROOT" && cargo pgrx test "pg$major" --runas postgres --pgdata "$pgdata") || rc=$?
    as_root rm -rf "$pgdata"
    return "$rc"
}

# The tests of pgrx-tests/ that are not #[ignore]d and that pgrx-tests/plan.tsv runs on major
# $1 when $2 is the newest released major tested, side by side, a process each
# (scripts/test/side-by-side); then fails if a test is ignored in a binary that no stage runs with
# --include-ignored (the plan's stage: lines): it would run nowhere.
stage_servers() {
    local major=$1 newest=$2 rc=0 binary test stray=() staged
    install_extension "$major"
    cd "$ROOT"
    "$ROOT/scripts/test/side-by-side" --plan "$major" "$newest" || rc=1
    staged=$("$ROOT/scripts/test/plan" staged)
    while read -r binary test; do
        case " $staged " in
        *" $binary "*) ;;
        *) stray+=("$binary: $test") ;;
        esac
    done < <(cargo test -p snowflake-it -- --list --ignored --format terse 2>&1 | awk '
        /Running / { b = ($2 == "unittests") ? $3 : $2; sub(/^.*\//, "", b); sub(/\.rs$/, "", b) }
        /: test$/ { sub(/: test$/, ""); print b, $0 }')
    if [ ${#stray[@]} -gt 0 ]; then
        printf 'ignored, and run by no stage (a stage: line of pgrx-tests/plan.tsv): %s\n' "${stray[@]}" >&2
        rc=1
    fi
    return "$rc"
}

# The #[ignore]d tests of the test binary $1 (one of STAGED_BINARIES) with the others, one at a
# time, their output shown.
staged_tests() {
    cd "$ROOT"
    cargo test -p snowflake-it --no-fail-fast --test "$1" -- --include-ignored --test-threads=1 \
        --nocapture
}

# After stage_servers, which installed the build (each stage runs in a shell of its own: the
# major is chosen again here).
stage_partman() {
    use_pg "$1"
    staged_tests partman
}

# The README's install section from source, run in this checkout; with --pgxn, in the PGXN
# release (./dev package --pgxn) unpacked elsewhere, so that what the zip leaves out fails here.
# The zip's build shares this checkout's target directory (the dependencies built once; the
# extension itself is built again from the zip's sources).
stage_readme() {
    use_pg "$1"
    if [ "${2:-}" != --pgxn ]; then
        "$ROOT/scripts/test/install-section"
        return
    fi
    local dir version
    version=$(cargo_version)
    dir=$(mktemp -d /tmp/pgsf-pgxn.XXXXXX)
    "$ROOT/scripts/package/pgxn"
    unzip -q "${CARGO_TARGET_DIR:-$ROOT/target}/pg_snowflake-$version.zip" -d "$dir"
    say "The README's install section in the unpacked zip, $dir/pg_snowflake-$version"
    local rc=0
    CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target} \
        "$dir/pg_snowflake-$version/scripts/test/install-section" || rc=$?
    rm -rf "$dir"
    return "$rc"
}

# The extension image (scripts/package/image) of major $1 (18 or later), and debug images of 17
# and 15, built, unpacked with umoci and served by a server of major $1 that sees only the image
# (pgrx-tests/tests/image.rs).
stage_image() {
    use_pg "$1"
    staged_tests image
}

# Upgrading from each of PGSF_OLD_RELEASES (0.5.0) as built from its own commit
# (scripts/package/old-release: once, kept in $PGSF_PG_CACHE/releases) on major $1 (18 or later: the
# servers load the old build through extension_control_path), into the build installed there
# (pgrx-tests/tests/from_release.rs).
stage_from_release() {
    use_pg "$1"
    local release build
    for release in "${PGSF_OLD_RELEASES[@]}"; do
        build=$("$ROOT/scripts/package/old-release" "$release" "$PG_CONFIG")
        export "PGSF_RELEASE_${release//./_}=$build" # PGSF_RELEASE_0_5_0, which the tests read
    done
    staged_tests from_release
}

# The benchmark suite (bench/run, which also runs the core's bench and records what machine and
# build it ran on: ./dev bench) or the ID-type benchmark (bench/ids: ./dev bench-ids) on the build
# installed now in the current tree (the caller holds its install lock), then its report.
# --smoke / --quick: brief, into a temporary directory, docs/ untouched. --large (bench-ids): the
# sizes below unless the BENCH_IDS_* variables say otherwise, into the large run's TSV and plot.
# The command recorded names the BENCH_IDS_* variables the run was given.
run_suite() {
    local verb=$1 flag=${2:-} dir=$ROOT/docs run=$1 script=run pass=() command=() var env=() reports
    case "$flag" in --smoke | --quick) pass=("$flag") dir=$(mktemp -d) ;; esac
    if [ "$verb" = bench-ids ]; then
        script=ids
        [ ${#pass[@]} -gt 0 ] || for var in "${!BENCH_IDS_@}"; do command+=("$var=${!var}"); done
    fi
    if [ "$flag" = --large ]; then
        run=bench-ids-large
        env=(BENCH_IDS_ROWS="${BENCH_IDS_ROWS:-5000000}" BENCH_IDS_BULK_ROWS="${BENCH_IDS_BULK_ROWS:-0}"
            BENCH_IDS_SHARED_BUFFERS="${BENCH_IDS_SHARED_BUFFERS:-16MB}")
    fi
    command+=(./dev "$verb" --pg "$PG_MAJOR" ${flag:+"$flag"})
    say "bench/$script on PostgreSQL $PG_MAJOR${flag:+, $flag}"
    env "${env[@]}" BENCH_BUILD="${INSTALLED_BUILD:-unknown}" BENCH_COMMAND="${command[*]}" \
        "$ROOT/bench/$script" "${pass[@]}" "$dir/$run-results.tsv"
    if [ "$verb" = bench ]; then
        reports=("$ROOT/bench/report" "$dir/bench-results.tsv" "$dir/BENCHMARKS.md"
            "$dir/bench-throughput.svg")
    else
        reports=("$ROOT/bench/report-ids" "$dir/bench-ids-results.tsv" "$dir/BENCHMARK-IDS.md"
            "$dir/bench-ids-tps.svg")
        [ ! -f "$dir/bench-ids-large-results.tsv" ] ||
            reports+=("$dir/bench-ids-large-results.tsv" "$dir/bench-ids-large-tps.svg")
    fi
    if [ -f "${reports[1]}" ]; then
        "${reports[@]}"
        say "Rows: $dir/$run-results.tsv; report: ${reports[*]:2}"
    else
        say "Rows: $dir/$run-results.tsv; no ${reports[1]} (./dev bench-ids), so no report"
    fi
    [ ${#pass[@]} -eq 0 ] || rm -rf "$dir"
}

# The suite's smoke run, the report generator's self-check (synthetic rows: noise, parts that
# sum to the whole) and the ID-type benchmark's quick run (on a major without uuidv7(), 15, with
# the three other keys).
stage_bench_smoke() {
    use_pg "$1"
    INSTALLED_BUILD=release run_suite bench --smoke
    "$ROOT/bench/report" --self-check
    INSTALLED_BUILD=release run_suite bench-ids --quick
}

# Three servers claiming node ids from one registry, which is then restarted under them: fails
# on a server that does not claim or make IDs, a duplicate or changed node id, a crash; never on
# a figure. Any build installed in the major will do (stage_servers installed one).
stage_fleet_scale_smoke() {
    use_pg "$1"
    "$ROOT/bench/fleet-scale" --smoke
}

stage_across_majors() {
    local pairs=$1 tree
    for tree in $(tr ' :' '\n' <<<"$pairs" | sort -u); do
        install_extension "$tree"
    done
    export_test_env
    cd "$ROOT"
    PGSF_UPGRADE_PAIRS=$pairs cargo test -p snowflake-it --no-fail-fast --test across_majors -- \
        --include-ignored --test-threads=1 --nocapture
}

# The client recipes (scripts/test/clients: installs the stacks' toolchains and packages when missing,
# starts its own servers) on major $1, with the build installed there first.
stage_clients() {
    install_extension "$1"
    "$ROOT/scripts/test/clients" --pg "$1"
}
