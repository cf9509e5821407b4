"""What scripts/check/ and scripts/test/plan share: the checkout's root, its tracked files and
their text, what scripts/lib/trees.sh says, how a check ends (python3 -B runs them: no .pyc)."""

import os
import re
import subprocess
import sys
import types

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")  # a line that opens or closes a fenced code block
TREES = """. scripts/lib/trees.sh
echo "${PGSF_MAJORS[*]}"; echo "${PGSF_SID_TREES[*]}"; echo "${PGSF_UPGRADE_PAIRS_ALL[*]}"
highest_host_major "${PGSF_MAJORS[@]}"
for tree in "${!PGSF_TREE_FROM[@]}"; do
    echo "$tree ${PGSF_TREE_FROM[$tree]} ${PGSF_TREE_TESTS[$tree]}"
done"""


def tracked(*pathspecs):
    """The tracked files (those matching the git pathspecs given), relative to ROOT."""
    return subprocess.run(["git", "-C", ROOT, "ls-files", *pathspecs], capture_output=True,
                          text=True, check=True).stdout.splitlines()


def tree_table():
    """PGSF_TREE_TABLE as scripts/lib/trees.sh reads it: the majors (in order), the sid root's
    trees, the pg_upgrade pairs (OLD:NEW trees), the highest major outside the sid root, and
    each tree's from and tests columns."""
    out = subprocess.run(["bash", "-c", TREES], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.splitlines()
    rows = [line.split(" ", 2) for line in out[4:]]
    return types.SimpleNamespace(majors=out[0].split(), sid=out[1].split(), pairs=out[2].split(),
                                 highest=out[3], source={tree: f for tree, f, _ in rows},
                                 tests={tree: tests for tree, _, tests in rows})


def read(path, default=None):
    """The text of file `path` (relative to ROOT), or `default` where it is no UTF-8 file."""
    try:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return default


def outside_fences(text):
    """(line number, line) of each line of Markdown `text` outside its fenced code blocks: a
    fence closes on a line of only its character, at least as long as the one that opened it."""
    fence = None
    for number, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
        elif fence is None:
            yield number, line
        elif m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) \
                and not line.strip().lstrip(fence[0]):
            fence = None


def line_of(text, offset):
    """The number of the line of `text` that holds its character `offset`."""
    return text.count("\n", 0, offset) + 1


def report(name, problems, passed):
    """Prints each problem and check-NAME's last line (`passed` when there is none); exits 1 on a
    problem."""
    for problem in problems:
        print(problem)
    print(f"check-{name}: " + (f"{len(problems)} problem(s)" if problems else passed))
    sys.exit(1 if problems else 0)
