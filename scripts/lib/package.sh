# shellcheck shell=bash
# What ./dev install and scripts/package/ share, sourced by lib.sh.

# Copies the install scripts of older releases kept in sql/ (pg_snowflake--0.1.0.sql), which
# CREATE EXTENSION ... VERSION '0.1.0' needs and pgrx does not copy, and the SQL-only read
# extension's files (pg_snowflake_read), into the extension directory $1 (through as_root where it
# is not writable), from the sources in $2 (default: this checkout; an old one may lack the latter).
copy_base_scripts() {
    local dest=$1 script scripts=() sudo=()
    for script in "${2:-$PGSF_ROOT}"/sql/pg_snowflake--*.sql; do
        # An upgrade script (pg_snowflake--A--B.sql): pgrx copies those.
        [[ ${script##*/pg_snowflake--} == *--* ]] || scripts+=("$script")
    done
    for script in "${2:-$PGSF_ROOT}"/pg_snowflake_read.control "${2:-$PGSF_ROOT}"/sql/pg_snowflake_read--*.sql; do
        [ ! -e "$script" ] || scripts+=("$script")
    done
    [ -w "$dest" ] || sudo=(as_root)
    [ ${#scripts[@]} -eq 0 ] || "${sudo[@]}" install -m 644 -t "$dest" "${scripts[@]}"
}

# The time of the last commit (now, outside git): the packages' and the image's dates.
source_date() { git -C "$PGSF_ROOT" log -1 --format=%ct 2>/dev/null || date +%s; }

# The extension's version, and the pgrx version it pins (pgrx = "=x.y.z"): Cargo.toml's.
cargo_version() { sed -n 's/^version = "\(.*\)"$/\1/p' "$PGSF_ROOT/Cargo.toml" | head -n 1; }
pgrx_version() { sed -n 's/^pgrx = "=\(.*\)"$/\1/p' "$PGSF_ROOT/Cargo.toml"; }

# packaging/copyright, with the year of the last commit, into file $1.
copyright_file() {
    sed "s/@YEAR@/$(date -u -d "@$(source_date)" +%Y)/" "$PGSF_ROOT/packaging/copyright" >"$1"
}

# parse_package_args KIND --pg N [--debug]: scripts/package/deb's (KIND deb) and image's. Sets
# major and profile (release, or debug); refuses a tree whose packages column lacks KIND.
parse_package_args() {
    local kind=$1
    shift
    major="" profile=release
    while [ $# -gt 0 ]; do
        case "$1" in
        --pg)
            [ $# -ge 2 ] || usage
            major=$2
            shift
            ;;
        --debug) profile=debug ;;
        *) usage ;;
        esac
        shift
    done
    [ -n "$major" ] || usage
    ! is_known_tree "$major" || tree_packages "$kind" "$major" ||
        die "PostgreSQL $major gets no $kind package (PGSF_TREE_TABLE:" \
            "${PGSF_TREE_PACKAGES[$major]})"
}

# package_tree STAGE LIBDIR EXTDIR MODE: builds the $profile build (release or debug) for the
# PostgreSQL of $PG_CONFIG (use_pg first) with `cargo pgrx package`, which lays out what `cargo
# pgrx install` would install under target/$profile/pg_snowflake-pgN/, then stages it: the library,
# stripped, in STAGE/LIBDIR (mode MODE); the control file, pgrx's and the base scripts in
# STAGE/EXTDIR.
package_tree() {
    local libdir=$1$2 extdir=$1$3 mode=$4 flags=() tree
    tree=${CARGO_TARGET_DIR:-$PGSF_ROOT/target}/$profile/pg_snowflake-pg$PG_MAJOR
    rm -rf "$tree" # pgrx adds to an existing tree: start empty
    say "Building the $profile build for PostgreSQL $PG_MAJOR with cargo pgrx package"
    [ "$profile" = release ] || flags=(--debug)
    (cd "$PGSF_ROOT" && cargo pgrx package --pg-config "$PG_CONFIG" "${flags[@]}")
    install -d -m 755 "$libdir" "$extdir"
    install -m "$mode" "$tree$("$PG_CONFIG" --pkglibdir)/pg_snowflake.so" "$libdir/"
    strip --strip-unneeded --remove-section=.comment --remove-section=.note \
        "$libdir/pg_snowflake.so"
    install -m 644 "$tree$("$PG_CONFIG" --sharedir)/extension"/* "$extdir/"
    copy_base_scripts "$extdir"
}
