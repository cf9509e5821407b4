# shellcheck shell=bash
# The benchmarks' runner, sourced by dev: ./dev bench, bench-ids and the bench smoke stage of
# ./dev test call run_suite.

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
