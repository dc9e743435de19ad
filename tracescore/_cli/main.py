"""The ``tracescore`` command line: ``tracescore eval`` runs ``run_evals`` for CI.

Exit codes: 0 when the verdict is ``passed`` (or ``warned`` without ``--fail-on-warned``), 1 when
it is ``failed`` (or ``warned`` with ``--fail-on-warned``), 2 when the run could not be made (bad
arguments, data, target or scorer; a missing judge).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import re
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tracescore._cli.calibrate import add_calibrate_parser, run_calibrate
from tracescore._cli.judge_options import add_judge_options, judge_from_args
from tracescore._cli.paths import check_outputs, write_output
from tracescore._cli.rescore import add_rescore_parser, run_rescore
from tracescore._cli.scorers import UsageError, available_scorers, build_scorer, parse_scorer
from tracescore._cli.view import add_view_parser, run_view
from tracescore._setup import env as _env
from tracescore._version import __version__

__all__ = ["EXIT_FAILED", "EXIT_PASSED", "EXIT_USAGE", "main"]

EXIT_PASSED = 0
EXIT_FAILED = 1
EXIT_USAGE = 2



def _parser() -> argparse.ArgumentParser:
    """The ``tracescore`` parser: one subcommand each for eval, scorers, calibrate, rescore,
    view and serve."""
    parser = argparse.ArgumentParser(
        prog="tracescore",
        description="tracescore: quality scores for LLM agents, online and in CI.",
    )
    parser.add_argument("--version", action="version", version=f"tracescore {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    _add_eval_parser(commands)
    commands.add_parser("scorers", help="list the scorer ids tracescore eval accepts")
    add_calibrate_parser(commands)
    add_rescore_parser(commands)
    add_view_parser(commands)
    _add_serve_parser(commands)
    return parser


def _add_eval_parser(commands: Any) -> None:
    """Add the ``eval`` subcommand to the ``tracescore`` parser's subparsers."""
    ev = commands.add_parser(
        "eval",
        help="run a target over a dataset, score it, and exit with the verdict",
        description=(
            "Call TARGET with each item's input, score every output, print a table and exit "
            "0 (passed), 1 (failed; or warned with --fail-on-warned) or 2 (could not run). "
            "Verdict: failed when a gate does not reach its best score on every item; warned "
            "when a threshold is missed or anything raised; passed otherwise."
        ),
    )
    ev.add_argument("data", metavar="DATA", help="a .jsonl, .json or .csv file of items")
    ev.add_argument(
        "--target",
        required=True,
        metavar="MODULE:FUNCTION",
        help="the callable to evaluate: module:function (imported with the working directory "
        "on sys.path) or path/to/file.py:function",
    )
    ev.add_argument(
        "--scorer",
        action="append",
        default=[],
        metavar="ID[:THRESHOLD]",
        help="a scorer id (e.g. answer-relevancy, content-similarity:0.8); repeatable",
    )
    ev.add_argument(
        "--gate",
        action="append",
        default=[],
        metavar="ID",
        help="a scorer that must reach its best score on every item (a --scorer with the "
        "same id becomes this gate; its threshold no longer applies); repeatable",
    )
    ev.add_argument(
        "--concurrency",
        type=int,
        default=1,
        metavar="N",
        help="items in flight at once (default 1)",
    )
    add_judge_options(
        ev, default_help="TRACESCORE_JUDGE_MODEL, or the judge the target module configured"
    )
    ev.add_argument("--name", metavar="NAME", help="experiment name (default: the function's)")
    ev.add_argument("--report", metavar="FILE", help="write the full result as JSON")
    ev.add_argument("--junit", metavar="FILE", help="write JUnit XML (one testcase per scorer)")
    ev.add_argument("--html", metavar="FILE",
                    help="write a self-contained HTML report: score distributions per scorer, "
                    "the failing items with input, output, score and reason")
    ev.add_argument(
        "--fail-on-warned", action="store_true", help="exit 1 on the verdict 'warned' too"
    )
    # the name of earlier releases, when this verdict was called 'scored'
    ev.add_argument("--fail-on-scored", dest="fail_on_warned", action="store_true",
                    help=argparse.SUPPRESS)
    ev.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress on stderr (default: a bar on a terminal, elsewhere a line every 5 s)",
    )
    ev.add_argument(
        "--trace",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="trace the run (experiment and item spans with the scores as events). Default: "
        "when the target module configured tracescore, or OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT "
        "is set",
    )


def _add_serve_parser(commands: Any) -> None:
    """Add the ``serve`` subcommand to the ``tracescore`` parser's subparsers."""
    serve = commands.add_parser(
        "serve", help="score OTLP traffic as a service (behind an OpenTelemetry Collector)",
        description="Receive OTLP (gRPC and HTTP), score spans by the rules of a configuration "
                    "file (YAML or TOML) and forward everything, scores added, downstream. "
                    "README: 'Scoring as a service'.")
    serve.add_argument("--config", help="the configuration file (default: "
                                        "$TRACESCORE_SERVE_CONFIG)")
    serve.add_argument("--check", action="store_true",
                       help="validate the configuration and its rules, then exit")


def _run_serve(args: argparse.Namespace) -> int:
    """``tracescore serve``: exit 0 after a clean drain, 1 when something was not forwarded,
    2 for a bad configuration."""
    from tracescore._serve import ServeConfigError, load, serve_forever
    from tracescore._setup import env as _env

    path = args.config or _env.serve_config()
    if not path:
        print("tracescore serve: error: pass --config FILE (or set TRACESCORE_SERVE_CONFIG)",
              file=sys.stderr)
        return EXIT_USAGE
    try:
        config = load(path)
        if args.check:
            from tracescore._serve.wiring import build_judge, build_rules

            rules = build_rules(config, build_judge(config))
            print(f"tracescore serve: {path} is valid ({len(rules)} rule(s))")
            return EXIT_PASSED
        return serve_forever(config)
    except ServeConfigError as exc:
        print(f"tracescore serve: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


# -- target -------------------------------------------------------------------------------------


def load_target(spec: str) -> Callable[..., Any]:
    """Import ``module:attr`` or ``path/to/file.py:attr`` (``attr`` may be dotted)."""
    module_part, sep, attr = spec.rpartition(":")
    if not sep or not module_part or not attr:
        raise UsageError(f"--target {spec!r}: write module:function or path/to/file.py:function")
    if module_part.endswith(".py") or "/" in module_part or os.sep in module_part:
        path = Path(module_part).resolve()
        if not path.is_file():
            raise UsageError(f"--target {spec!r}: no file {module_part!r}")
        # The file's directory goes first on sys.path so that it can import its neighbours.
        sys.path.insert(0, str(path.parent))
        name = f"_tracescore_target_{re.sub(r'[^0-9A-Za-z_]', '_', path.stem)}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise UsageError(f"--target {spec!r}: cannot import {module_part!r}")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        module_spec.loader.exec_module(module)
    else:
        # As ``python -m`` does: modules of the working directory are importable.
        cwd = os.getcwd()
        if cwd not in sys.path:
            sys.path.insert(0, cwd)
        module = importlib.import_module(module_part)
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UsageError(f"--target {spec!r}: {module_part!r} has no {attr!r}") from None
    if not callable(obj):
        raise UsageError(f"--target {spec!r} is not callable ({type(obj).__name__})")
    return obj  # type: ignore[no-any-return]


# -- eval -----------------------------------------------------------------------------------------


def _has_judge(judge: Any) -> bool:
    from tracescore._pipeline.runtime import RUNTIME

    return judge is not None or RUNTIME.judge is not None or _env.judge_model() is not None


def _run_eval(args: argparse.Namespace) -> int:
    """``tracescore eval``: exit 0 passed, 1 failed (or warned with ``--fail-on-warned``).

    Raises:
        UsageError: bad arguments, target or scorer; a missing judge (exit 2 in ``main``).
    """
    from tracescore._offline.evals import run_evals
    from tracescore._setup import config as _config

    judge = _checked_eval_args(args)
    target = _import_target(args.target)
    configured_here = _trace_eval(args.trace, judge)
    scorers, gates = _eval_scorers(args.scorer, args.gate, judge)
    try:
        result = run_evals(
            data=args.data,
            scorers=scorers,
            gates=gates,
            target=target,
            concurrency=args.concurrency,
            experiment_name=args.name,
            progress=args.progress,
        )
    finally:
        if configured_here:
            _config.shutdown()
        elif _config.current() is not None:
            _config.force_flush()

    print(result.table())
    _write_eval_outputs(args, result)
    if result.verdict == "failed" or (result.verdict == "warned" and args.fail_on_warned):
        return EXIT_FAILED
    return EXIT_PASSED


def _checked_eval_args(args: argparse.Namespace) -> Any:
    """The judge of ``--judge``/``--judge-*`` (None: the default), once the counts and the
    output paths are checked."""
    if args.concurrency < 1:
        raise UsageError("--concurrency takes an integer >= 1")
    if not args.scorer and not args.gate:
        raise UsageError("name at least one --scorer or --gate")
    judge = judge_from_args(args)
    # Checked before the run: a long evaluation must not end in an unwritable path, nor
    # overwrite its data or its target's source with a report.
    target_file = args.target.rpartition(":")[0]
    check_outputs(
        [("DATA", args.data),
         ("--target", target_file if target_file.endswith(".py") else None)],
        [("--report", args.report), ("--junit", args.junit), ("--html", args.html)])
    return judge


def _import_target(spec: str) -> Callable[..., Any]:
    """``load_target``, any failure of the import a ``UsageError`` with its traceback."""
    try:
        return load_target(spec)
    except UsageError:
        raise
    except Exception:
        raise UsageError(
            f"importing --target {spec!r} failed:\n{traceback.format_exc().rstrip()}"
        ) from None


def _trace_eval(trace: bool | None, judge: Any) -> bool:
    """Configure tracescore for the run when ``--trace`` (or, by default, an OTLP endpoint)
    asks and the target module did not; shut the target's configuration down on
    ``--no-trace``. True when configured here (the run shuts it down)."""
    from tracescore._setup import config as _config

    if _config.current() is None:
        wanted = trace
        if wanted is None:
            wanted = _env.otlp_traces_endpoint() is not None
        if wanted:
            _config.configure(judge=judge)
            return True
    elif trace is False:
        # The target module configured tracescore; --no-trace still keeps this run untraced.
        _config.shutdown()
    return False


def _eval_scorers(scorer_args: list[str], gate_args: list[str],
                  judge: Any) -> tuple[list[Any], list[Any]]:
    """``(scorers, gates)`` for ``run_evals`` from ``--scorer ID[:THRESHOLD]`` and ``--gate ID``,
    each id built once.

    Raises:
        UsageError: a scorer given twice, an unknown id, a judge-less run of a scorer that
            asks a judge.
    """
    thresholds: dict[str, float | None] = {}
    for text in scorer_args:
        scorer_id, threshold = parse_scorer(text)
        if scorer_id in thresholds:
            raise UsageError(f"--scorer {scorer_id} is given twice")
        thresholds[scorer_id] = threshold
    gate_ids = list(dict.fromkeys(gate_args))
    built: dict[str, Any] = {}
    for scorer_id in [*thresholds, *gate_ids]:
        if scorer_id not in built:
            built[scorer_id] = build_scorer(scorer_id, judge)
    for scorer_id, scorer in built.items():
        if getattr(scorer, "uses_judge", False) and not _has_judge(judge):
            raise UsageError(
                f"scorer {scorer_id!r} asks an LLM judge: pass --judge MODEL (a litellm model "
                "string such as openai/gpt-4o-mini) or set TRACESCORE_JUDGE_MODEL"
            )
    scorers = [
        {"scorer": built[i], "threshold": t} if t is not None else built[i]
        for i, t in thresholds.items()
    ]
    return scorers, [built[i] for i in gate_ids]


def _write_eval_outputs(args: argparse.Namespace, result: Any) -> None:
    """Write ``--report`` (JSON), ``--junit`` (XML) and ``--html``, each when asked."""
    from tracescore._offline.evals.report import write_html, write_junit, write_report

    for option, path, write, label in (("--report", args.report, write_report, "report"),
                                       ("--junit", args.junit, write_junit, "junit"),
                                       ("--html", args.html, write_html, "html")):
        if path:
            write_output(option, path, write, result)
            print(f"{label}: {path}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tracescore`` command (and ``python -m tracescore``).

    Args:
        argv: the arguments after the program name; default ``sys.argv[1:]``.

    Returns:
        The exit code: 0 passed, 1 failed, 2 usage or configuration error.

    Examples:
        ``tracescore eval data.jsonl --target agent:answer --scorer content-similarity:0.8
        --gate answer-relevancy --judge openai/gpt-4o-mini --junit evals.xml``
    """
    from tracescore._core.errors import ConfigurationError

    args = _parser().parse_args(argv)
    if args.command == "scorers":
        for scorer_id in available_scorers():
            print(scorer_id)
        return EXIT_PASSED
    if args.command == "serve":
        return _run_serve(args)
    if args.command == "calibrate":
        return run_calibrate(args)
    if args.command == "rescore":
        return run_rescore(args)
    if args.command == "view":
        return run_view(args)
    try:
        return _run_eval(args)
    except (UsageError, ConfigurationError) as exc:
        print(f"tracescore eval: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except Exception:
        # Not a verdict: exit 1 must keep meaning "the evaluation failed".
        print(
            f"tracescore eval: error: the run could not be completed:\n"
            f"{traceback.format_exc().rstrip()}",
            file=sys.stderr,
        )
        return EXIT_USAGE
