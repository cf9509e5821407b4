# shellcheck shell=bash disable=SC2034 # the constants are for the scripts that source this
# Debian's packages (apt_install), Debian roots (make_debian_root) and a Rust recent enough for
# pgrx (use_rust); sourced by lib.sh.

# What a build needs: cc (rustc links with it, pgrx's C shim), libclang for bindgen, libpq (the
# registry's client), sudo (servers run as postgres), Debian's PostgreSQL 15 and its headers.
PGSF_BUILD_PACKAGES=(gcc libc6-dev libclang-dev clang libpq-dev sudo postgresql-15
    postgresql-server-dev-15)
# What the tests add: nftables freezes a registry link; the exporter and promtool, the monitoring
# tests'; buildah and umoci, the image's; unzip, pip and mmdebstrap, the PGXN test's.
PGSF_TEST_PACKAGES=(postgresql-15-partman faketime shellcheck nftables prometheus-postgres-exporter
    prometheus buildah umoci unzip python3-pip mmdebstrap)
# pgrx's Rust. Where the machine's is older or missing, Debian 12's rustc-web is used: use_rust
# puts links to its five tools first on PATH (not /usr/bin, which would shadow other tools).
PGSF_RUST_MIN=1.96
PGSF_RUST_WEB_PACKAGES=(rustc-web cargo-web rust-web-clippy)
PGSF_RUST_WEB_BIN=$PGSF_ROOT/target/debian-rust/bin

rust_version() { "$1" --version 2>/dev/null | awk '{ print $2 }'; }

# Whether the rustc $1 (default: the one on PATH) is PGSF_RUST_MIN or later.
rust_recent_enough() {
    printf '%s\n' "$PGSF_RUST_MIN" "$(rust_version "${1:-rustc}")" | sort -C -V
}

# Makes a rustc of PGSF_RUST_MIN or later first on PATH (returns 1 if none): the machine's own, or
# else Debian's (PGSF_RUST_OWN, exported, says the machine's own version). Looked for once per PATH
# (PGSF_RUST_PATH): every script sources this, the tests' server script thousands of times.
use_rust() {
    [ "${PGSF_RUST_PATH:-}" != "$PATH" ] || return 0
    if ! rust_recent_enough; then
        local tool
        export PGSF_RUST_OWN
        PGSF_RUST_OWN=$(rust_version rustc)
        rust_recent_enough /usr/bin/rustc || return 1
        mkdir -p "$PGSF_RUST_WEB_BIN" 2>/dev/null || return 1
        for tool in rustc rustdoc cargo cargo-clippy clippy-driver; do
            [ ! -e "/usr/bin/$tool" ] || ln -sfn "/usr/bin/$tool" "$PGSF_RUST_WEB_BIN/$tool"
        done
        export PATH="$PGSF_RUST_WEB_BIN:$PATH"
    fi
    export PGSF_RUST_PATH=$PATH
}

# Installs those of the Debian packages $2... that are missing, saying why ($1), and starts none
# of the daemons some carry (prometheus, Debian's PostgreSQL on 5432): a policy-rc.d forbidding
# every action stands in /usr/sbin while apt runs (unless the machine has its own), and under
# systemd, the services the packages enabled for the next boot are disabled again.
apt_install() {
    local why=$1 pkg missing=() policy=/usr/sbin/policy-rc.d ours='' rc=0 units unit
    shift
    for pkg in "$@"; do
        [[ " ${missing[*]} " != *" $pkg "* ]] || continue
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" ||
            missing+=("$pkg")
    done
    [ ${#missing[@]} -gt 0 ] || return 0
    say "Installing Debian packages ($why): ${missing[*]}"
    as_root apt-get update -qq || die "apt-get update failed: is Debian's archive reachable?"
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
    units=$(for pkg in "${missing[@]}"; do dpkg-query -L "$pkg" 2>/dev/null; done |
        sed -nE 's|^/(usr/)?lib/systemd/system/([^/@]+\.service)$|\2|p' | sort -u)
    for unit in $units; do
        if systemctl is-enabled --quiet "$unit" 2>/dev/null; then
            say "Disabling $unit: it came with ${missing[*]}; nothing here runs it as a service"
            as_root systemctl disable --quiet "$unit"
        fi
    done
}

# The Debian archive the roots are made from (scripts/setup/sid-root, scripts/package/arm64).
PGSF_MIRROR=${PGSF_DEBIAN_MIRROR:-http://deb.debian.org/debian}
PGSF_SECURITY_MIRROR=${PGSF_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}

# make_debian_root ROOT STAMP RECIPE OPTION... SUITE ROOT.partial SOURCE...: unless ROOT's file
# STAMP says RECIPE, the root made by mmdebstrap in ROOT.partial, stamped, then moved to ROOT. No
# cluster is made as PostgreSQL installs; the host's extra CA certificates (a TLS-inspecting proxy)
# go in for cargo where the root has ca-certificates. The hooks, single-quoted, get the root as $1.
make_debian_root() {
    local root=$1 stamp=$2 recipe=$3
    shift 3
    [ "$(cat "$root/$stamp" 2>/dev/null)" != "$recipe" ] || return 0
    command -v mmdebstrap >/dev/null || die "mmdebstrap not found: apt-get install mmdebstrap"
    say "Making the Debian root $root (mmdebstrap: minutes)"
    as_root mkdir -p "$(dirname "$root")"
    as_root rm -rf "$root.partial"
    # shellcheck disable=SC2016
    as_root mmdebstrap --variant=apt --quiet --aptopt='Acquire::Check-Valid-Until "false"' \
        --setup-hook='mkdir -p "$1/etc/postgresql-common" &&
            echo "create_main_cluster = false" >"$1/etc/postgresql-common/createcluster.conf"' \
        --customize-hook='[ ! -x "$1/usr/sbin/update-ca-certificates" ] || {
            for c in /usr/local/share/ca-certificates/*.crt; do
            [ ! -e "$c" ] || cp "$c" "$1/usr/local/share/ca-certificates/"; done &&
            chroot "$1" update-ca-certificates >/dev/null; }' \
        "$@" ||
        die "mmdebstrap could not make $root (is Debian's archive, $PGSF_MIRROR, reachable?)"
    echo "$recipe" | as_root tee "$root.partial/$stamp" >/dev/null
    as_root rm -rf "$root"
    as_root mv "$root.partial" "$root"
}
