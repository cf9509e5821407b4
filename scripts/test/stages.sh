# shellcheck shell=bash
# How `./dev test` runs, sourced by dev: run_tests, which runs the stages scripts/test/plan picks
# from pgrx-tests/stages.txt (pgrx-tests/README.md#what-dev-test-runs says what each runs).

# Runs PLAN's stages (scripts/test/plan stages) of phase $1 (once, beside, major, behind, after)
# on major $2, or says why one is left out. Those beside, in the background at the lowest
# priority; those behind a major, in turn in the background at a low one from its turn's end, its
# install lock held (they mostly wait). Their output comes at the end. None may build much in
# target/: cargo's lock on it would hold the next major's build.
run_table() {
    local stage behind=()
    while IFS=$'\t' read -r -a stage; do
        [ "${stage[*]:0:2}" = "$1 ${2:--}" ] || continue
        if [ "${stage[2]}" = - ]; then
            say "${stage[3]}"
        elif [ "$1" = beside ]; then
            in_background 19 run_stage "${stage[3]}" "${stage[2]}" "${stage[@]:4}"
        elif [ "$1" = behind ]; then
            behind+=("$(printf '%q ' run_stage "${stage[3]}" "${stage[2]}" "${stage[@]:4}")")
        else
            run_stage "${stage[3]}" "${stage[2]}" "${stage[@]:4}"
        fi
    done <<<"$PLAN"
    [ ${#behind[@]} -eq 0 ] || in_background 10 eval "$(printf '%s; ' "${behind[@]}")"
}

# in_background NICE COMMAND...: COMMAND in a subshell at that priority, its output and the
# stages it ran kept in a file of BESIDE for the end of the run.
in_background() {
    BESIDE+=("$(mktemp)")
    ({ renice -n "$1" -p "$BASHPID" && ionice -c 2 -n 7 -p "$BASHPID"; } >/dev/null 2>&1 || true
        local ran=${#STAGES[@]}
        "${@:2}"
        printf '%s\n' "${STAGES[@]:ran}" >"${BESIDE[-1]}.stage") >"${BESIDE[-1]}" 2>&1 &
}

run_tests() {
    parse_majors "$@"
    [[ ${ARGS[*]} =~ ^(--list)?$ ]] || die "usage: ./dev test [--list] [--pg N]..."
    mapfile -t TEST_MAJORS < <(printf '%s\n' "${MAJORS[@]:-${PGSF_MAJORS[@]}}" | sort -nu)
    local trees=() sid_trees=() tree started major no_sid=() warm='' remaining next out
    for tree in $("$ROOT/scripts/test/plan" trees "${TEST_MAJORS[@]}"); do
        if is_sid_tree "$tree"; then sid_trees+=("$tree"); else trees+=("$tree"); fi
    done
    started=$(date +%s)
    if [ -n "${ARGS[*]}" ]; then
        list_tests "${sid_trees[@]}"
        return
    fi
    setup --for-tests "${trees[@]}"
    export_test_env
    FAILED_TAILS=$(mktemp -d)
    # The sid root's majors: set up as a stage, so that a machine that cannot make the root
    # (no Debian archive, a full disk) fails them with its reason and tests the others.
    if [ ${#sid_trees[@]} -gt 0 ]; then
        run_stage "set up the sid root (scripts/setup/sid-root)" "${sid_trees[*]}" setup "${sid_trees[@]}"
        if [ "${STAGES[-1]##*$'\t'}" != 0 ]; then
            mapfile -t TEST_MAJORS < <(for major in "${TEST_MAJORS[@]}"; do
                is_sid_tree "$major" || echo "$major"
            done)
            no_sid=(--no-sid)
        else
            # What their stages build, built beside the other majors' tests at a low priority,
            # above the mutants' (at theirs it starved): the stages then find it built.
            warm=$(mktemp)
            nice -n 10 ionice -c 2 -n 7 "$ROOT/scripts/setup/sid-root" run "$ROOT/dev" _stage \
                stage_sid_builds "${TEST_MAJORS[0]}" "${sid_trees[@]}" >"$warm" 2>&1 &
            WARM_PID=$!
        fi
    fi

    PLAN=$("$ROOT/scripts/test/plan" stages "${no_sid[@]}" "${TEST_MAJORS[@]}")
    # Those beside first: the mutants' lowest priority takes what the others leave from the start.
    BESIDE=()
    run_table beside
    run_table once
    # The majors in the plan's order (scripts/test/plan stages says why).
    mapfile -t remaining < <(awk -F '\t' '$1 == "major" && !seen[$2]++ { print $2 }' <<<"$PLAN")
    while [ ${#remaining[@]} -gt 0 ]; do
        # Each major's stages hold its install lock; one another checkout holds waits its turn.
        major=
        for next in "${remaining[@]}"; do
            ! take_install_lock --try "$next" || { major=$next && break; }
        done
        [ -n "$major" ] || { major=${remaining[0]} && take_install_lock "$major"; }
        mapfile -t remaining < <(printf '%s\n' "${remaining[@]}" | grep -vx "$major")
        if is_sid_tree "$major" && [ -n "$warm" ] && ! wait "$WARM_PID"; then
            say "[$major] building ahead in the sid root failed (the stages build again):"
            tail -n 20 "$warm"
        fi
        WARM_NEXT=${remaining[0]:-} run_table major "$major"
        run_table behind "$major" # its lock, inherited, held until they end
        release_install_lock "$major"
    done
    wait
    for out in "${BESIDE[@]}"; do
        cat "$out"
        mapfile -t -O "${#STAGES[@]}" STAGES <"$out.stage"
        rm -f "$out" "$out.stage"
    done
    run_table after
    find "$FAILED_TAILS" -type f -exec awk 'FNR == 1 { print "==> " $0 " failed, ending:"; next } 1' {} +
    rm -rf "$FAILED_TAILS"

    say "Stage times"
    local whole=$(($(date +%s) - started)) times total_passed total_failed
    read -r total_passed total_failed < <(printf '%s\n' "${STAGES[@]}" |
        awk -F '\t' '{ p += $4; f += $5 } END { print p + 0, f + 0 }')
    # Copied over pgrx-tests/stage-times.tsv after a measured run (scripts/test/plan readme).
    times=${CARGO_TARGET_DIR:-$ROOT/target}/stage-times.tsv
    mkdir -p "$(dirname "$times")"
    {
        printf '# ./dev test on PostgreSQL %s at %s: %d s, %d passed, %d failed\n' \
            "${TEST_MAJORS[*]}" "$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo -)" \
            "$whole" "$total_passed" "$total_failed"
        printf 'major\tstage\tseconds\tpassed\tfailed\n'
        printf '%s\n' "${STAGES[@]}"
    } >"$times"
    tail -n +2 "$times" | awk -F '\t' '{ printf "%-6s %-75s %6s %6s %6s\n", $1, $2, $3, $4, $5 }'
    printf 'whole run: %d s on PostgreSQL %s\n' "$whole" "${TEST_MAJORS[*]}"
    echo "$total_passed passed, $total_failed failed"
    [ "$total_failed" -eq 0 ]
}

# ./dev test --list: the stages run_tests would run on TEST_MAJORS (the sid root's trees $@ set
# up first), and the servers stage's test files; nothing is set up, built or run.
list_tests() {
    [ $# -eq 0 ] || say "[$*] set up the sid root (scripts/setup/sid-root)"
    local stage plan
    plan=$("$ROOT/scripts/test/plan" stages "${TEST_MAJORS[@]}")
    while IFS=$'\t' read -r -a stage; do
        if [ "${stage[2]}" = - ]; then
            say "${stage[3]}"
            continue
        fi
        say "[${stage[2]}] ${stage[3]}$([[ ! ${stage[0]} =~ beside|behind ]] || echo " (in the background)")"
        # stage_servers MAJOR NEWEST: the plan's test files on MAJOR.
        [[ " ${stage[*]:4} " =~ \ stage_servers\ ([^ ]+)\ ([^ ]+)\  ]] || continue
        "$ROOT/scripts/test/plan" files "${BASH_REMATCH[@]:1}" | tr '\n' ' ' | fold -s -w 94 |
            sed 's/^/      /'
        echo
    done <<<"$plan"
}
