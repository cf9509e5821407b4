# shellcheck shell=bash disable=SC2034 # PACKAGED_LIB and PACKAGED_EXTENSION are for the caller
# What ./dev install and scripts/package/ share, sourced by lib.sh.

# Copies the install scripts of older releases kept in sql/ (pg_snowflake--0.1.0.sql), which
# CREATE EXTENSION ... VERSION '0.1.0' needs and pgrx does not copy, into the extension directory
# $1 (through as_root where it is not writable), from the sources in $2 (default: this checkout).
copy_base_scripts() {
    local dest=$1 script name scripts=() sudo=()
    for script in "${2:-$PGSF_ROOT}"/sql/pg_snowflake--*.sql; do
        name=${script##*/}
        case "${name#pg_snowflake--}" in
        *--*) ;; # an upgrade script: pgrx copies those
        *) scripts+=("$script") ;;
        esac
    done
    [ -w "$dest" ] || sudo=(as_root)
    [ ${#scripts[@]} -eq 0 ] || "${sudo[@]}" install -m 644 -t "$dest" "${scripts[@]}"
}

# Where Debian and apt.postgresql.org put an extension of major $1 (./dev package's layout).
debian_pkglibdir() { echo "/usr/lib/postgresql/$1/lib"; }
debian_extensiondir() { echo "/usr/share/postgresql/$1/extension"; }

# The time of the last commit (now, outside git): the packages' and the image's dates.
source_date() { git -C "$PGSF_ROOT" log -1 --format=%ct 2>/dev/null || date +%s; }

# The extension's version, Cargo.toml's.
cargo_version() { sed -n 's/^version = "\(.*\)"$/\1/p' "$PGSF_ROOT/Cargo.toml" | head -n 1; }

# Builds the $1 build (release or debug) for the PostgreSQL of $PG_CONFIG (use_pg first) with
# `cargo pgrx package`, which lays out what `cargo pgrx install` would install under
# target/$1/pg_snowflake-pgN/. Sets PACKAGED_LIB (the library) and PACKAGED_EXTENSION (the control
# file and pgrx's scripts; not the base scripts: copy_base_scripts).
package_tree() {
    local profile=$1 flags=() tree
    tree=${CARGO_TARGET_DIR:-$PGSF_ROOT/target}/$profile/pg_snowflake-pg$PG_MAJOR
    rm -rf "$tree" # pgrx adds to an existing tree: start empty
    say "Building the $profile build for PostgreSQL $PG_MAJOR with cargo pgrx package"
    [ "$profile" = release ] || flags=(--debug)
    (cd "$PGSF_ROOT" && cargo pgrx package --pg-config "$PG_CONFIG" "${flags[@]}")
    PACKAGED_LIB=$tree$("$PG_CONFIG" --pkglibdir)/pg_snowflake.so
    PACKAGED_EXTENSION=$tree$("$PG_CONFIG" --sharedir)/extension
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
            shift 2
            ;;
        --debug)
            profile=debug
            shift
            ;;
        *) usage ;;
        esac
    done
    [ -n "$major" ] || usage
    ! is_known_tree "$major" || tree_packages "$kind" "$major" ||
        die "PostgreSQL $major gets no $kind package (PGSF_TREE_TABLE:" \
            "${PGSF_TREE_PACKAGES[$major]})"
}
