# Shared by bench/run, bench/ids, bench/instructions, bench/latency, bench/flood, bench/idle and
# bench/watermark (sourced, not run), on top of scripts/lib/lib.sh: the result rows, the meta rows
# about the machine and the run (record_machine_meta), throwaway servers and pgbench's
# per-transaction logs.
# shellcheck shell=bash

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# say, die, as_root, as_postgres and where each PostgreSQL major lives.
# shellcheck source=scripts/lib/lib.sh
. "$ROOT/scripts/lib/lib.sh"
export PG_CONFIG=${PG_CONFIG:-$(pg_config_of "$PGSF_DEFAULT_MAJOR")}
PG_BIN=$("$PG_CONFIG" --bindir)
SETTINGS=("shared_preload_libraries = 'pg_snowflake'" "pg_snowflake.node_id = 1")

# Parses `[--smoke] OUT.tsv` into SMOKE (true/false) and OUT, or prints the script's header.
# shellcheck disable=SC2034 # SMOKE is for the scripts that source this file
parse_args() {
    SMOKE=false
    if [ "${1:-}" = --smoke ]; then
        SMOKE=true
        shift
    fi
    [ $# -eq 1 ] || usage
    OUT=$1
}

# Appends one row `section candidate parameter round value` to OUT; a value that is not a
# number (but in a `meta` row, which describes the run) means the measurement failed (its error
# went to stderr): stop there.
record() {
    if [ "$1" != meta ] && ! [[ $5 =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
        die "no number for $1 $2 $3 (round $4): '$5'"
    fi
    printf '%s\t%s\t%s\t%s\t%s\n' "$@" >>"$OUT"
}

# The file system that holds path $1 (the data directory is under /tmp): device, size, free,
# and whether the block device says it is rotational.
disk_of() {
    local source size avail dev rota=""
    read -r source size avail <<<"$(df -h --output=source,size,avail "$1" | tail -n 1)"
    dev=${source##*/}
    if [ -r "/sys/class/block/$dev/queue/rotational" ]; then
        rota=$(cat "/sys/class/block/$dev/queue/rotational")
    elif [ -r "/sys/class/block/$dev/../queue/rotational" ]; then
        rota=$(cat "/sys/class/block/$dev/../queue/rotational")
    fi
    case $rota in
    0) rota=", not rotational (SSD or virtual)" ;;
    1) rota=", rotational" ;;
    esac
    echo "$source, $size, $avail free$rota"
}

# Appends the `meta` rows that say when, where and on what a run ran, as bench/report and
# bench/report-ids read them: date (UTC, to the minute); machine (CPUs, CPU model, RAM,
# kernel); disk, the file system of the directory $2, when given (disk_of); postgres (the
# server's --version); load (the load average $1, taken before the run, and now); then build,
# command and note from $BENCH_BUILD, $BENCH_COMMAND and $BENCH_NOTE, each when set.
record_machine_meta() {
    local load_before=$1 disk_dir=${2:-}
    record meta date - - "$(date -u '+%Y-%m-%d %H:%M UTC')"
    record meta machine - - "$(nproc) CPUs (nproc), $(sed -n 's/^model name[[:space:]]*: //p' \
        /proc/cpuinfo | head -n 1), $(awk '/^MemTotal:/ { printf "%.1f GiB RAM", $2 / 1048576 }' \
        /proc/meminfo), $(uname -sr)"
    [ -z "$disk_dir" ] || record meta disk - - "$(disk_of "$disk_dir")"
    record meta postgres - - "$("$PG_BIN/postgres" --version)"
    record meta load - - "$load_before; $(cut -d' ' -f1-3 /proc/loadavg)"
    [ -z "${BENCH_BUILD:-}" ] || record meta build - - "$BENCH_BUILD"
    [ -z "${BENCH_COMMAND:-}" ] || record meta command - - "$BENCH_COMMAND"
    [ -z "${BENCH_NOTE:-}" ] || record meta note - - "$BENCH_NOTE"
}

sql() { "$PG_BIN/psql" -X -q -At -v ON_ERROR_STOP=1 "$@"; }

# What the script leaves behind is removed when it exits, however it exits: servers (stopped
# and deleted), directories, and background processes of ours still running.
SERVERS_TO_DESTROY=() DIRS_TO_REMOVE=() PIDS_TO_KILL=()
cleanup() {
    local pid dir
    for pid in "${PIDS_TO_KILL[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for dir in "${SERVERS_TO_DESTROY[@]}"; do
        "$PGSERVER" destroy "$dir" || true
    done
    for dir in "${DIRS_TO_REMOVE[@]}"; do
        rm -rf "$dir"
    done
}
trap cleanup EXIT

# Makes a throwaway server (not started) in a new directory under /tmp, SERVER_DIR, listening
# on a free port from $1 up, with the library preloaded, node id 1 and PostgreSQL's defaults
# otherwise (fsync on); exports PGHOST, PGPORT, ... for it.
new_server() {
    SERVER_DIR=$(mktemp -d /tmp/pgsf-bench.XXXXXX)
    rmdir "$SERVER_DIR" # pgserver makes it, owned by postgres
    SERVERS_TO_DESTROY+=("$SERVER_DIR")
    PGPORT=$("$PGSERVER" free-port "${1:-5470}")
    export PGHOST=127.0.0.1 PGPORT PGUSER=postgres PGDATABASE=postgres
    export PGOPTIONS='-c client_min_messages=warning'
    "$PGSERVER" init "$SERVER_DIR" "$PGPORT" "${SETTINGS[@]}"
}

# Sets the variable named $1 to a new directory, readable by the postgres user, removed at exit.
new_tmp_dir() {
    local d
    d=$(mktemp -d /tmp/pgsf-bench-tmp.XXXXXX)
    chmod 755 "$d"
    DIRS_TO_REMOVE+=("$d")
    printf -v "$1" %s "$d"
}

# Rotates the words after the first by the first (the round number): each round starts with a
# different candidate.
rotate() {
    local by=$1
    shift
    local words=("$@") i
    for ((i = 0; i < ${#words[@]}; i++)); do
        echo "${words[(i + by) % ${#words[@]}]}"
    done
}

# Runs pgbench with the given arguments (-n -M prepared added), fails when it does or when a
# transaction failed, and prints its transactions per second.
pgbench_tps() {
    local out
    out=$("$PG_BIN/pgbench" -n -M prepared "$@" 2>&1) || { echo "$out" >&2; return 1; }
    if grep -q '^number of failed transactions: [1-9]' <<<"$out"; then
        echo "$out" >&2
        return 1
    fi
    sed -n 's/^tps = \([0-9.]*\) (without initial connection time)$/\1/p' <<<"$out"
}

# Latency percentiles from pgbench per-transaction logs (pgbench -l: the third field is the
# transaction's latency in µs), all transactions of the given files pooled. Prints
# "count p50 p99 p99.9 max" in µs; a percentile p is the nearest-rank value, the smallest
# latency that at least p of the transactions do not exceed.
latency_stats() {
    awk '{ print $3 }' "$@" | sort -n | awk '
        { v[NR] = $1 }
        function rank(p,   r) { r = int(p * NR); if (r < p * NR) r++; if (r < 1) r = 1; return v[r] }
        END {
            if (NR == 0) { print "none"; exit }
            printf "%d %d %d %d %d\n", NR, rank(0.50), rank(0.99), rank(0.999), v[NR]
        }'
}
