# shellcheck shell=bash
# The install lock, sourced by lib.sh: a tree's directories are shared by every checkout on the
# machine. take_install_lock [--try] TREE... waits for each tree's lock (--try: returns 1 at once
# if one is taken) and holds it until release_install_lock TREE or the end of this shell; children
# inherit it (PGSF_INSTALL_LOCKS_HELD). 15's keeps the name older checkouts take.
declare -A PGSF_LOCK_FDS=()

take_install_lock() {
    local tree lock fd try=false
    [ "${1:-}" != --try ] || { try=true && shift; }
    for tree in "$@"; do
        [[ " ${PGSF_INSTALL_LOCKS_HELD:-} " != *" $tree "* ]] || continue
        lock=/tmp/pg_snowflake.install.pg$tree.lock
        [ "$tree" != 15 ] || lock=/tmp/pg_snowflake.install.lock
        [ -e "$lock" ] || (umask 000 && : >>"$lock")
        # Opened for reading: no O_CREAT on a file another user may own in sticky /tmp.
        exec {fd}<"$lock"
        if ! flock -n "$fd"; then
            ! $try || { exec {fd}<&- && return 1; }
            say "Another pg_snowflake run is installing into PostgreSQL $tree; waiting for it"
            flock "$fd"
        fi
        PGSF_LOCK_FDS[$tree]=$fd
        export PGSF_INSTALL_LOCKS_HELD="${PGSF_INSTALL_LOCKS_HELD:-} $tree"
    done
}

# Releases a lock this shell took (not one inherited from a parent).
release_install_lock() {
    local tree=$1 fd=${PGSF_LOCK_FDS[$1]:-} held=" ${PGSF_INSTALL_LOCKS_HELD:-} "
    [ -n "$fd" ] || return 0
    exec {fd}<&-
    unset "PGSF_LOCK_FDS[$tree]"
    PGSF_INSTALL_LOCKS_HELD=${held// $tree / }
}
