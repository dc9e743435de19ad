"""The fixed development / held-out split of HaluEval QA rows for the judge-quality benchmark.

Rows (not answers) are split, so a row's right and hallucinated answers fall on the same side.
A seeded shuffle (``random.Random(SEED)``) of the 200 rows of
``examples/data/halueval_qa_200.jsonl``: the first ``DEV_ROWS`` are the development split (look
at these while writing prompts), the rest the held-out split (run only to report). The order
within each split is the order the benchmark works in, so a partial run is a random sample.

``python benchmarks/judge_quality/split.py`` rewrites ``split.json``; the committed file is the
split, and a test-free check here makes sure it still matches the seed.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE.parents[1] / "examples" / "data" / "halueval_qa_200.jsonl"
SPLIT = HERE / "split.json"
SEED = 25
DEV_ROWS = 50


def make_split(rows: int) -> dict[str, object]:
    """The split of ``rows`` rows: ``{"seed", "dev", "heldout"}`` with 0-based row indices."""
    order = list(range(rows))
    random.Random(SEED).shuffle(order)
    return {"seed": SEED, "data": "examples/data/halueval_qa_200.jsonl",
            "dev": order[:DEV_ROWS], "heldout": order[DEV_ROWS:]}


def main() -> int:
    rows = sum(1 for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip())
    split = make_split(rows)
    if SPLIT.exists() and json.loads(SPLIT.read_text(encoding="utf-8")) != split:
        print("split.json differs from the seeded split; rewriting it", file=sys.stderr)
    SPLIT.write_text(json.dumps(split) + "\n", encoding="utf-8")
    print(f"{SPLIT}: {len(split['dev'])} dev rows, {len(split['heldout'])} held-out rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
