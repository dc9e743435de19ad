"""Write docs/configuration.md's option tables from the option table (tracescore._setup.options).

Run: ``python scripts/config_table.py`` (rewrites the file) or ``--check`` (exit 1 when the file
is not what the table says). Between ``<!-- options: GROUP -->`` and ``<!-- /options -->`` each
option gets one row: name, environment variable, default, key in the service's file (from the
table), and its meaning (kept from the row already there; a new option gets ``TODO``).
``tests/test_configuration.py`` runs the check, so the docs cannot drift from the code.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from tracescore._setup import options as _options

DOC = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
_BLOCK = re.compile(r"(<!-- options: (\w+) -->\n)(.*?)(<!-- /options -->)", re.S)
HEADER = ("| option | environment | default | key in the service's file | meaning |\n"
          "|---|---|---|---|---|\n")


def _meanings(block: str) -> dict[str, str]:
    found = {}
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 5 and cells[0].startswith("`"):
            found[cells[0]] = " | ".join(cells[4:])
    return found


def render(text: str) -> str:
    """``text`` with every option block rewritten from the table."""
    def block(match: re.Match[str]) -> str:
        group = match.group(2)
        entries = (_options.TOP_LEVEL if group == "configure"
                   else _options.fields(_options.GROUPS[group]))
        meanings = _meanings(match.group(3))
        rows = []
        for entry in entries:
            cells = _options.doc_cells(entry)
            rows.append("| " + " | ".join((*cells, meanings.get(cells[0], "TODO"))) + " |\n")
        return match.group(1) + HEADER + "".join(rows) + match.group(4)

    return _BLOCK.sub(block, text)


def main() -> int:
    text = DOC.read_text(encoding="utf-8")
    new = render(text)
    if "--check" in sys.argv[1:]:
        if new != text:
            print("docs/configuration.md differs from the option table: run "
                  "python scripts/config_table.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
