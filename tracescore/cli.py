"""The ``tracescore`` command, callable from Python.

``tracescore.cli.main(["eval", "data.jsonl", "--scorer", "content-similarity"])`` runs what the
``tracescore`` command (and ``python -m tracescore``) runs and returns its exit code: 0 passed,
1 failed, 2 a usage or configuration error. Subcommands: ``eval``, ``scorers``, ``calibrate``,
``serve``, ``view``, ``rescore``; ``tracescore --help`` lists them with their options.
"""

from __future__ import annotations

from ._cli.main import main

__all__ = ["main"]
