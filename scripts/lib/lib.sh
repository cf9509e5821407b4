# shellcheck shell=bash
# The shell library every script sources, with the rest of scripts/lib/ (see scripts/README.md).

PGSF_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck disable=SC2034 # for the scripts that source this
PGSERVER=$PGSF_ROOT/scripts/serve/pgserver

# Prints the calling script's header comment (its usage) and exits 2.
usage() {
    awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0" >&2
    exit 2
}

say() { printf '\033[1m==> %s\033[0m\n' "$*"; }
die() { printf '%s: %s\n' "${0##*/}" "$*" >&2; exit 1; }

# Servers run as the operating-system user postgres: Postgres refuses root, and an ordinary user
# with sudo must not own them either. Root becomes postgres through setpriv, cheaper than sudo for
# the thousands a test run starts, with the environment sudo would leave (secure_path, LANG, TZ).
if [ "$(id -u)" -eq 0 ]; then
    as_root() { "$@"; }
    as_postgres() {
        setpriv --reuid=postgres --regid=postgres --init-groups /usr/bin/env -i HOME=~postgres \
            USER=postgres LOGNAME=postgres SHELL=/bin/bash ${LANG:+"LANG=$LANG"} ${TZ:+"TZ=$TZ"} \
            PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
    }
else
    as_root() {
        command -v sudo >/dev/null || die "need root for: $* (install sudo, or run as root)"
        sudo "$@"
    }
    as_postgres() { if [ "$(id -un)" = postgres ]; then "$@"; else sudo -u postgres "$@"; fi; }
fi

# psql ARG... into the postgres database of the server of $PG_CONFIG on 127.0.0.1, port $1.
psql_at() {
    "$("$PG_CONFIG" --bindir)/psql" -X -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$1" -U postgres \
        -d postgres "${@:2}"
}

# shellcheck source=scripts/lib/trees.sh
. "$PGSF_ROOT/scripts/lib/trees.sh"
# shellcheck source=scripts/lib/toolchain.sh
. "$PGSF_ROOT/scripts/lib/toolchain.sh"
# shellcheck source=scripts/lib/locks.sh
. "$PGSF_ROOT/scripts/lib/locks.sh"
# shellcheck source=scripts/lib/package.sh
. "$PGSF_ROOT/scripts/lib/package.sh"

use_rust || true
