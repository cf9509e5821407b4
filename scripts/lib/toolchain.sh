# shellcheck shell=bash disable=SC2034 # the constants are for the scripts that source this
# Debian's packages (apt_install) and a Rust recent enough for pgrx (use_rust); sourced by lib.sh.

# What a build needs (./dev demo, install, package, bench, clients): cc (rustc links with it, the
# cc crate compiles pgrx's C shim), libclang for bindgen, libpq (the registry's client), sudo
# (servers run as postgres), Debian's PostgreSQL 15 and its headers (16-18: PyPI's, with pip).
PGSF_BUILD_PACKAGES=(gcc libc6-dev libclang-dev clang libpq-dev sudo postgresql-15
    postgresql-server-dev-15)
# What the tests add: pg_partman, faketime, shellcheck, nftables (a registry link frozen), the
# monitoring tests' postgres_exporter and promtool, buildah and umoci (the extension image),
# unzip (the PGXN zip), pip, and mmdebstrap (the clean Debian 12 root of the PGXN test).
PGSF_TEST_PACKAGES=(postgresql-15-partman faketime shellcheck nftables prometheus-postgres-exporter
    prometheus buildah umoci unzip python3-pip mmdebstrap)
# pgrx needs rustc 1.96 or later. Where the machine's own is older or missing, Debian 12's
# rustc-web, cargo-web and rust-web-clippy are used: use_rust puts links to their five tools first
# on PATH (not /usr/bin, which would shadow other tools). rustfmt stays the machine's.
PGSF_RUST_MIN=1.96
PGSF_RUST_WEB_PACKAGES=(rustc-web cargo-web rust-web-clippy)
PGSF_RUST_WEB_BIN=$PGSF_ROOT/target/debian-rust/bin

# The version of the rustc $1, or nothing.
rust_version() { "$1" --version 2>/dev/null | awk '{ print $2 }'; }

# Whether the rustc $1 (default: the one on PATH) is at least PGSF_RUST_MIN.
rust_recent_enough() {
    local version
    version=$(rust_version "${1:-rustc}")
    [ -n "$version" ] && [ "$(printf '%s\n' "$version" "$PGSF_RUST_MIN" | sort -V | head -n 1)" = \
        "$PGSF_RUST_MIN" ]
}

# Makes a rustc of at least PGSF_RUST_MIN the one on PATH: the machine's own, or else Debian's
# (PGSF_RUST_OWN then says the machine's own version, or nothing). Returns 1 when there is none.
use_rust() {
    rust_recent_enough && return 0
    local tool
    # Exported: a script run from this one finds Debian's already first, and says the same.
    PGSF_RUST_OWN=$(rust_version rustc)
    export PGSF_RUST_OWN
    rust_recent_enough /usr/bin/rustc || return 1
    mkdir -p "$PGSF_RUST_WEB_BIN" 2>/dev/null || return 1
    for tool in rustc rustdoc cargo cargo-clippy clippy-driver; do
        [ ! -e "/usr/bin/$tool" ] || ln -sfn "/usr/bin/$tool" "$PGSF_RUST_WEB_BIN/$tool"
    done
    export PATH="$PGSF_RUST_WEB_BIN:$PATH"
}

# Installs those of the Debian packages $2... that are missing, saying why ($1), and starts none
# of the daemons some carry (prometheus, its exporter, Debian's PostgreSQL on 5432): while apt
# runs, a policy-rc.d forbidding every action stands in /usr/sbin (unless the machine has its
# own), which invoke-rc.d and deb-systemd-invoke ask first; under systemd, the services the
# packages enabled for the next boot are disabled again.
apt_install() {
    local why=$1 pkg missing=()
    shift
    for pkg in "$@"; do
        [[ " ${missing[*]} " != *" $pkg "* ]] || continue
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
