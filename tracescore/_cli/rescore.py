"""``tracescore rescore``: the command line of ``tracescore._offline.rescore``.

Each ``--scorer`` is a side: ``ID[:THRESHOLD][,KEY=VALUE...]``, where ``KEY`` is one of the
scorer factory's options (``prompt_set=tracescore-v2``, ``scale=10``; a value is read as JSON
when it parses, else as text), or ``judge=MODEL`` / ``judge_api_base=URL`` (that side's judge;
the ``--judge*`` options are every side's default), or ``label=NAME``.

Exit codes: 0 when some turn was scored by every side, 1 when none was, 2 when the run could not
be made (bad arguments, an unreadable source, a state file of other scorers).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import traceback
from pathlib import Path
from typing import Any

from tracescore._cli.judge_options import add_judge_options, judge_from_args

EXIT_PASSED, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
_SIDE_KEYS = ("judge", "judge_api_base", "label")


def add_rescore_parser(commands: Any) -> None:
    """Add the ``rescore`` subcommand to the ``tracescore`` parser's subparsers."""
    cmd = commands.add_parser(
        "rescore",
        help="score stored traces again with chosen scorers, side by side",
        description=(
            "Read stored traces (the local file default tracescore-traces.jsonl with its "
            "rotated backups, any OTLP/JSON lines file or OTLP/JSON export, or Phoenix), find "
            "the turns the runtime would score, score each with every --scorer (the first is "
            "the baseline) and report, per side, its evaluator version and scores, and per "
            "other side its agreement with the baseline (same pass/fail share, Cohen's kappa, "
            "mean absolute shift) and the turns that moved most. Streaming, bounded, "
            "resumable with --state. Exit 0, 1 (no turn scored by every side) or 2 (could "
            "not run)."
        ),
    )
    cmd.add_argument("files", metavar="FILE", nargs="*",
                     help="OTLP/JSON trace files, read in order (default: "
                     "TRACESCORE_EXPORT_FILE or tracescore-traces.jsonl, after its rotated "
                     "backups .N ... .1)")
    cmd.add_argument("--phoenix-url", metavar="URL",
                     help="read the spans of a Phoenix project instead of files")
    cmd.add_argument("--phoenix-project", metavar="NAME", default="default",
                     help="the Phoenix project (default 'default')")
    cmd.add_argument("--phoenix-timeout", metavar="SECONDS", type=float, default=30.0,
                     help="seconds each request to Phoenix may take, its whole answer "
                     "included (default 30)")
    cmd.add_argument("--limit", metavar="N", type=int, default=10_000,
                     help="spans read from Phoenix at most (default 10000)")
    cmd.add_argument("--scorer", action="append", default=[], required=True,
                     metavar="ID[:THRESHOLD][,KEY=VALUE...]",
                     help="a side: a scorer id, its threshold (default half its scale) and "
                     "options: factory options (prompt_set=tracescore-v2), judge=MODEL, "
                     "judge_api_base=URL, label=NAME; repeatable, the first is the baseline")
    add_judge_options(cmd, default_help="TRACESCORE_JUDGE_MODEL")
    cmd.add_argument("--on", default="agent",
                     choices=("agent", "llm", "retrieval", "tool"),
                     help="the span kind scored (default agent: the agent turns)")
    cmd.add_argument("--state", metavar="FILE",
                     help="append each scored trace to FILE and skip the traces it holds "
                     "(resume an interrupted run)")
    cmd.add_argument("--concurrency", type=int, default=4, metavar="N",
                     help="scoring jobs at once per side (default 4)")
    cmd.add_argument("--max-open-traces", type=int, default=1_000, metavar="N",
                     help="traces waiting for their root span at once; past it the oldest is "
                     "scored as it is and counted as evicted (default 1000)")
    cmd.add_argument("--max-buffered-spans", type=int, default=100_000, metavar="N",
                     help="spans waiting at once over all open traces (default 100000)")
    cmd.add_argument("--top", type=int, default=20, metavar="N",
                     help="turns listed as moved most per comparison (default 20)")
    cmd.add_argument("--max-listed-turns", type=int, default=10_000, metavar="N",
                     help="turns the JSON report lists whole with every side's outcome (the "
                     "first ones scored); every turn is counted in the comparison and the "
                     "histograms either way, so memory stays bounded (default 10000)")
    cmd.add_argument("--report", metavar="FILE", help="write the full result as JSON")
    cmd.add_argument("--html", metavar="FILE",
                     help="write a self-contained HTML report: the sides, their score "
                     "distributions, agreement and the turns that moved most")
    cmd.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                     help="progress on stderr (default: a bar on a terminal, elsewhere a line "
                     "every 5 s)")


def parse_side(text: str) -> tuple[str, float | None, dict[str, Any], dict[str, str]]:
    """``ID[:THRESHOLD][,KEY=VALUE...]`` as (id, threshold, factory options, side settings).

    Raises:
        UsageError: a malformed spec.
    """
    from tracescore._cli.scorers import UsageError, parse_scorer

    head, *pairs = text.split(",")
    scorer_id, threshold = parse_scorer(head.strip())
    options: dict[str, Any] = {}
    settings: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--scorer {text}: write options as KEY=VALUE, got {pair!r}")
        if key in _SIDE_KEYS:
            settings[key] = value.strip()
            continue
        try:
            options[key] = json.loads(value)
        except ValueError:
            options[key] = value.strip()
    return scorer_id, threshold, options, settings


def build_sides(args: argparse.Namespace) -> list[Any]:
    """The ``Side`` of every ``--scorer``.

    Raises:
        UsageError: a bad spec or option; ConfigurationError: a bad judge option, a judge
            scorer without a judge.
    """
    from tracescore._cli.scorers import UsageError, build_scorer
    from tracescore._core.errors import ConfigurationError
    from tracescore._offline.calibrate import _judge_model
    from tracescore._offline.rescore import Side

    sides = []
    labels: set[str] = set()
    for spec in args.scorer:
        scorer_id, threshold, options, settings = parse_side(spec)
        side_args = copy.copy(args)
        if "judge" in settings:
            side_args.judge = settings["judge"]
        if "judge_api_base" in settings:
            side_args.judge_api_base = settings["judge_api_base"]
        judge = judge_from_args(side_args)
        scorer = build_scorer(scorer_id, judge, options)
        judge_model = _judge_model(scorer)
        if getattr(scorer, "uses_judge", False) and judge_model is None:
            raise ConfigurationError(
                f"--scorer {spec}: {scorer_id!r} asks an LLM judge: pass --judge MODEL (or "
                "judge=MODEL in the spec), or set TRACESCORE_JUDGE_MODEL")
        if threshold is None:
            threshold = float(getattr(scorer, "scale", 1.0) or 1.0) / 2
        side = Side(label="", scorer=scorer, threshold=threshold, judge_model=judge_model,
                    options=options)
        label = settings.get("label") or f"{scorer_id} {side.version}" + (
            f" {judge_model}" if judge_model and len(args.scorer) > 1 else "")
        if label in labels:
            label = f"{label} #{len(sides) + 1}"
        if not label.strip():
            raise UsageError(f"--scorer {spec}: label= must not be empty")
        labels.add(label)
        side.label = label
        sides.append(side)
    return sides


def run_rescore(args: argparse.Namespace) -> int:
    """Run ``tracescore rescore``; return the exit code."""
    from tracescore._cli.paths import check_outputs, write_output
    from tracescore._cli.scorers import UsageError
    from tracescore._core.errors import ConfigurationError
    from tracescore._offline.rescore import rescore
    from tracescore._offline.traces import SourceCounts, default_files, file_spans, phoenix_spans
    from tracescore._setup import env as _env

    outputs = [("--report", args.report), ("--html", args.html), ("--state", args.state)]
    try:
        sides = build_sides(args)
        counts = SourceCounts()
        if args.phoenix_url:
            if args.files:
                raise UsageError("give trace FILEs or --phoenix-url, not both")
            from tracescore._offline.phoenix import PhoenixClient

            client = PhoenixClient(args.phoenix_url, timeout=args.phoenix_timeout)
            spans: Any = phoenix_spans(client, args.phoenix_project, args.limit, counts)
            source = f"Phoenix {client.where} project {args.phoenix_project}"
        else:
            files = ([Path(f) for f in args.files] if args.files
                     else default_files(_env.export_file()))
            # Before the run: no output is a trace file read (resolved, or the same file on
            # disk), nor another output, and each can be written.
            check_outputs([("FILE", str(p)) for p in files], outputs)
            spans = file_spans(files, counts)
            source = ", ".join(str(p) for p in files)
        if args.phoenix_url:
            check_outputs([], outputs)
        result = rescore(
            spans, sides, source=source, counts=counts, on=args.on, state_file=args.state,
            concurrency=args.concurrency, max_open_traces=args.max_open_traces,
            max_spans=args.max_buffered_spans, progress=args.progress, top=args.top,
            max_listed=args.max_listed_turns,
            # Phoenix lists spans newest first, not in the order they ended: a trace is
            # complete at the end of the listing (or when the bounds push it out).
            complete_on_root=not args.phoenix_url)
    except (UsageError, ConfigurationError, OSError) as exc:
        print(f"tracescore rescore: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        where = f"; run it again with --state {args.state} to go on" if args.state else ""
        print(f"tracescore rescore: interrupted{where}", file=sys.stderr)
        return 130
    except Exception:
        print("tracescore rescore: error: the run could not be completed:\n"
              f"{traceback.format_exc().rstrip()}", file=sys.stderr)
        return EXIT_USAGE
    print(result.table())
    report = result.to_dict()
    try:
        if args.report:
            # A lone surrogate (text that was not valid Unicode) as its JSON escape.
            write_output("--report", args.report, lambda r, path: Path(path).write_text(
                json.dumps(r, ensure_ascii=False, indent=2) + "\n", encoding="utf-8",
                errors="backslashreplace"), report)
            print(f"report: {args.report}")
        if args.html:
            from tracescore._offline.reports.html import rescore_html, write_html

            write_output("--html", args.html,
                         lambda r, path: write_html(rescore_html(r), path), report)
            print(f"html: {args.html}")
    except UsageError as exc:
        print(f"tracescore rescore: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_PASSED if result.passed else EXIT_FAILED
