"""``tracescore view [FILE]``: the local span file as one self-contained HTML page.

Exit codes: 0 when the page was written, 2 when it could not be (no such file, an unwritable
output, a bad bound).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_USAGE = 0, 2
DEFAULT_OUTPUT = "tracescore-view.html"


def add_view_parser(commands: Any) -> None:
    """Add the ``view`` subcommand to the ``tracescore`` parser's subparsers."""
    from tracescore._offline.view import DEFAULT_MAX_SPANS, DEFAULT_MAX_TRACES

    view = commands.add_parser(
        "view",
        help="render the local span file (tracescore-traces.jsonl) as an HTML page",
        description=(
            "Read FILE (OTLP/JSON lines, as tracescore writes when no OTLP endpoint is set) "
            "and its rotated backups FILE.1, FILE.2, ... one line at a time, and write one "
            "self-contained HTML page: traces as trees with durations, each span's GenAI "
            "attributes, the scores and their reasons on the spans they judge, filters by "
            "scorer, outcome and score. The newest traces are kept within --max-traces and "
            "--max-spans; the page says what was left out."),
    )
    view.add_argument("file", metavar="FILE", nargs="?",
                      help="the span file (default: $TRACESCORE_EXPORT_FILE, else "
                      "tracescore-traces.jsonl)")
    view.add_argument("-o", "--output", metavar="HTML", default=DEFAULT_OUTPUT,
                      help=f"the page to write (default {DEFAULT_OUTPUT})")
    view.add_argument("--max-traces", type=int, default=DEFAULT_MAX_TRACES, metavar="N",
                      help=f"newest traces kept on the page (default {DEFAULT_MAX_TRACES})")
    view.add_argument("--max-spans", type=int, default=DEFAULT_MAX_SPANS, metavar="N",
                      help=f"spans kept on the page over all traces (default "
                      f"{DEFAULT_MAX_SPANS})")
    view.add_argument("--no-rotated", dest="rotated", action="store_false",
                      help="read FILE only, not its rotated backups")
    view.add_argument("--open", action="store_true", help="open the page in a web browser")


def run_view(args: argparse.Namespace) -> int:
    """Run ``tracescore view``; returns the exit code."""
    from tracescore._cli.paths import check_outputs
    from tracescore._cli.scorers import UsageError
    from tracescore._core.errors import ConfigurationError
    from tracescore._offline.traces import default_files
    from tracescore._offline.view import read_view, write_view
    from tracescore._setup import env as _env

    path = args.file or _env.export_file()
    try:
        if Path(path).is_file():
            # Checked before reading: the page must not overwrite a span file it reads.
            read = default_files(path) if args.rotated else [Path(path)]
            check_outputs([("FILE", str(p)) for p in read], [("--output", args.output)])
        data = read_view(path, max_traces=args.max_traces, max_spans=args.max_spans,
                         rotated=args.rotated)
        out = write_view(args.output, data)
    except (ConfigurationError, UsageError) as exc:
        print(f"tracescore view: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"tracescore view: error: cannot write {args.output}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:  # noqa: BLE001 - whatever the file holds: one line, no traceback
        print(f"tracescore view: error: could not read {path}: {type(exc).__name__}: "
              f"{' '.join(str(exc).split())[:200]}", file=sys.stderr)
        return EXIT_USAGE
    scores = sum(len(t["scores"]) for t in data.traces)
    spans = sum(len(t["spans"]) for t in data.traces)
    print(f"tracescore view: wrote {out}: {len(data.traces)} traces, {spans} spans, "
          f"{scores} scores (from {', '.join(data.files)})")
    if data.traces_left_out or data.spans_left_out:
        read = sum(s.scores for s in data.scorers.values())
        print(f"  left out: {data.traces_left_out} older traces, {data.spans_left_out} spans "
              f"(--max-traces {data.max_traces}, --max-spans {data.max_spans}); the page's "
              f"score table counts all {read} scores read")
    if data.skipped_lines:
        print(f"  skipped {data.skipped_lines} line(s) that are not OTLP/JSON trace requests "
              f"(first: {data.first_problem})")
    if args.open:
        import webbrowser

        webbrowser.open(Path(out).resolve().as_uri())
    return EXIT_OK
