"""What the checks of scripts/check/ share: the checkout's root, its tracked files and their text."""

import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")  # a line that opens or closes a fenced code block


def tracked(*pathspecs):
    """The tracked files (those matching the git pathspecs given), relative to ROOT."""
    out = subprocess.run(["git", "-C", ROOT, "ls-files", *pathspecs], capture_output=True,
                         text=True, check=True).stdout
    return [path for path in out.split("\n") if path]


def read(path, default=None):
    """The text of file `path` (relative to ROOT), or `default` where it is no UTF-8 file."""
    try:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return default
