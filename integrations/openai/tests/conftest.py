"""Fixtures: the loopback OTLP receiver, model and judge that every integration's tests share,
defined once in ``integrations/loopback_fixtures.py`` (which says why it is run by path)."""

from __future__ import annotations

import runpy
from pathlib import Path

_shared = runpy.run_path(str(Path(__file__).resolve().parents[2] / "loopback_fixtures.py"))
receiver, model, judge = _shared["receiver"], _shared["model"], _shared["judge"]
