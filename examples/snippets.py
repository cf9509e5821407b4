#!/usr/bin/env python3
"""Keeps the code shown in docs/CLIENTS.md the code the examples run.

    examples/snippets.py check docs/CLIENTS.md    exit 1 if a block differs from its source
    examples/snippets.py update docs/CLIENTS.md   rewrite the blocks from their sources

In an example, a snippet is the lines between a comment `snippet: NAME` and a comment
`end snippet` (#, // or -- comments), dedented. In the Markdown file, the line
`<!-- snippet: PATH NAME -->` (PATH from the top of the repository) is followed by a fenced
code block holding that snippet. scripts/test/clients runs `check`; Python's standard library only.
"""

import re
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
START = re.compile(r"^\s*(?:#|//|--)\s*snippet:\s*(\S+)\s*$")
END = re.compile(r"^\s*(?:#|//|--)\s*end snippet\s*$")
MARKER = re.compile(r"^<!-- snippet: (\S+) (\S+) -->$")


def snippets_of(path):
    found, name, lines = {}, None, []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if name is None:
            match = START.match(line)
            if match:
                name, lines = match.group(1), []
                if name in found:
                    sys.exit(f"{path}:{number}: snippet {name} defined twice")
        elif END.match(line):
            found[name] = textwrap.dedent("\n".join(lines)).strip("\n")
            name = None
        else:
            lines.append(line)
    if name is not None:
        sys.exit(f"{path}: snippet {name} has no end")
    return found


def rewrite(doc):
    """The document with every marked block replaced by its snippet, and the problems found."""
    out, problems, cache = [], [], {}
    lines = doc.read_text().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        match = MARKER.match(line)
        if not match:
            continue
        path, name = match.groups()
        if path not in cache:
            source = ROOT / path
            if not source.is_file():
                problems.append(f"{doc.name}:{i}: no file {path}")
                continue
            cache[path] = snippets_of(source)
        snippet = cache[path].get(name)
        if snippet is None:
            problems.append(f"{doc.name}:{i}: {path} has no snippet {name}")
            continue
        if i >= len(lines) or not lines[i].startswith("```"):
            problems.append(f"{doc.name}:{i}: no fenced block after the marker")
            continue
        fence = lines[i]
        end = i + 1
        while end < len(lines) and lines[end] != "```":
            end += 1
        if end == len(lines):
            problems.append(f"{doc.name}:{i + 1}: the block does not end")
            continue
        shown = "\n".join(lines[i + 1:end])
        if shown != snippet:
            problems.append(f"{doc.name}:{i + 1}: the block differs from {path} snippet {name}")
        out.extend([fence, *snippet.splitlines(), "```"])
        i = end + 1
    return "\n".join(out) + "\n", problems


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("check", "update"):
        sys.exit(__doc__)
    doc = Path(sys.argv[2])
    text, problems = rewrite(doc)
    if sys.argv[1] == "update":
        doc.write_text(text)
        for problem in problems:
            print(f"updated: {problem}" if "differs" in problem else problem)
        if any("differs" not in problem for problem in problems):
            sys.exit(1)
        return
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        sys.exit(f"{doc}: run examples/snippets.py update {doc}, and read the diff")


if __name__ == "__main__":
    main()
