"""``tracescore calibrate``: the command line of ``tracescore.calibrate``.

Exit codes: 0 when every requirement held, 1 when ``--min-accuracy``/``--min-kappa`` was
missed, the judge agrees with the humans no better than chance, or no item was scored, 2 when
the run could not be made (bad arguments, data, scorer, a missing judge, a state file of
another run).
"""

from __future__ import annotations

import argparse
import sys
import traceback
from typing import Any

from tracescore._cli.judge_options import add_judge_options, judge_from_args

EXIT_PASSED, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _finite_float(text: str) -> float:
    """A finite number (``nan`` would make a bound that no value passes or fails)."""
    import math

    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"takes a finite number, got {text!r}")
    return value


def add_calibrate_parser(commands: Any) -> None:
    """Add the ``calibrate`` subcommand to the ``tracescore`` parser's subparsers."""
    cal = commands.add_parser(
        "calibrate",
        help="measure how a scorer and its judge agree with human labels",
        description=(
            "Score every item of a labelled dataset (.jsonl, .json or .csv: output, label "
            "(pass/fail or a number), and input/context/ground_truth as the scorer needs, id) "
            "and report accuracy, balanced accuracy, Cohen's kappa with its 95% interval, "
            "whether the judge beats chance, the confusion matrices at the current and the "
            "advised threshold (the best balanced accuracy among thresholds that neither pass "
            "nor fail everything) and the cost. Resumable with --state. With --feedback or "
            "--phoenix-url the labels are human verdicts recorded on production spans "
            "(tracescore.record_feedback) and the scores those the scorer recorded on the same "
            "spans. The report says whether the threshold should move. Exit 0, 1 (a --min-* "
            "missed, a judge no better than chance, or nothing scored) or 2 (could not run)."
        ),
    )
    cal.add_argument("data", metavar="DATA", nargs="?",
                     help="the labelled items (or give --feedback / --phoenix-url instead)")
    cal.add_argument("--feedback", metavar="FILE", action="append", default=[],
                     help="take the labels from human verdicts (tracescore.record_feedback) "
                     "in an OTLP/JSON lines file, e.g. tracescore-logs.jsonl, and compare them "
                     "with the scorer's recorded scores on the same spans; no judge is called "
                     "(repeatable)")
    cal.add_argument("--phoenix-url", metavar="URL",
                     help="take human verdicts and scores from Phoenix's span annotations "
                     "(annotator_kind HUMAN against tracescore's)")
    cal.add_argument("--phoenix-project", metavar="NAME", default="default",
                     help="the Phoenix project (default 'default')")
    cal.add_argument("--phoenix-timeout", metavar="SECONDS", type=float, default=30.0,
                     help="seconds each request to Phoenix may take, its whole answer included "
                     "(default 30)")
    cal.add_argument("--scorer", required=True, metavar="ID[:THRESHOLD]",
                     help="the scorer id (e.g. faithfulness, hallucination:0.3); the threshold "
                     "defaults to half the scorer's scale")
    add_judge_options(cal, default_help="TRACESCORE_JUDGE_MODEL")
    cal.add_argument("--state", metavar="FILE",
                     help="append each item's outcome to FILE and skip the items it already "
                     "holds (resume an interrupted run)")
    cal.add_argument("--label-threshold", type=_finite_float, default=0.5, metavar="X",
                     help="a numeric human label passes at X or above (default 0.5)")
    cal.add_argument("--concurrency", type=int, default=1, metavar="N",
                     help="items scored at once (default 1)")
    cal.add_argument("--min-accuracy", type=_finite_float, default=None, metavar="A",
                     help="exit 1 when the accuracy at the threshold is below A (0..1)")
    cal.add_argument("--min-kappa", type=_finite_float, default=None, metavar="K",
                     help="exit 1 when Cohen's kappa at the threshold is below K")
    cal.add_argument("--report", metavar="FILE", help="write the full result as JSON")
    cal.add_argument("--junit", metavar="FILE", help="write JUnit XML")
    cal.add_argument("--html", metavar="FILE",
                     help="write a self-contained HTML report: confusion matrix, the judge's "
                     "score distribution per human label with the threshold, disagreements")
    cal.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                     help="progress on stderr (default: a bar on a terminal, elsewhere a "
                          "line every 5 s)")


def run_calibrate(args: argparse.Namespace) -> int:
    """Run ``tracescore calibrate``; return the exit code."""
    from tracescore._cli.paths import check_outputs, write_output
    from tracescore._cli.scorers import UsageError, parse_scorer
    from tracescore._core.errors import ConfigurationError
    from tracescore._offline.calibrate import calibrate
    from tracescore._offline.calibrate.report import write_html, write_junit, write_report

    try:
        scorer_id, threshold = parse_scorer(args.scorer)
        # Before the run: no output overwrites an input or another output, each is writable.
        check_outputs([("DATA", args.data), *(("--feedback", f) for f in args.feedback)],
                      [("--state", args.state), ("--report", args.report),
                       ("--junit", args.junit), ("--html", args.html)])
        if args.feedback or args.phoenix_url:
            if args.data:
                raise UsageError("give DATA or --feedback/--phoenix-url, not both")
            from tracescore._offline.feedback import calibrate_feedback

            result = calibrate_feedback(
                scorer_id, feedback=args.feedback, phoenix_url=args.phoenix_url,
                phoenix_project=args.phoenix_project, phoenix_timeout=args.phoenix_timeout,
                threshold=threshold,
                label_threshold=args.label_threshold, min_accuracy=args.min_accuracy,
                min_kappa=args.min_kappa)
        elif not args.data:
            raise UsageError("give the labelled DATA file, --feedback FILE or --phoenix-url URL")
        else:
            judge = judge_from_args(args)
            result = calibrate(
                args.data, scorer_id, judge=judge, threshold=threshold,
                label_threshold=args.label_threshold, state_file=args.state,
                concurrency=args.concurrency, progress=args.progress,
                min_accuracy=args.min_accuracy, min_kappa=args.min_kappa,
            )
    except (UsageError, ConfigurationError, OSError) as exc:
        print(f"tracescore calibrate: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        where = f"; run it again with --state {args.state} to go on" if args.state else ""
        print(f"tracescore calibrate: interrupted{where}", file=sys.stderr)
        return 130
    except Exception:
        print("tracescore calibrate: error: the run could not be completed:\n"
              f"{traceback.format_exc().rstrip()}", file=sys.stderr)
        return EXIT_USAGE
    print(result.table())
    for option, path, write, label in (("--report", args.report, write_report, "report"),
                                       ("--junit", args.junit, write_junit, "junit"),
                                       ("--html", args.html, write_html, "html")):
        if path:
            try:
                write_output(option, path, write, result)
            except UsageError as exc:
                print(f"tracescore calibrate: error: {exc}", file=sys.stderr)
                return EXIT_USAGE
            print(f"{label}: {path}")
    return EXIT_PASSED if result.passed else EXIT_FAILED
