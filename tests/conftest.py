"""Shared fixtures. The environment is fixed before anything imports litellm."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

# Before any import of litellm: no model-cost-map download, no tokenizer fetches.
os.environ["LITELLM_OFFLINE_MODE"] = "true"
# Tests choose their judge and keys explicitly.
for _name in ("TRACESCORE_JUDGE_MODEL", "OPENAI_API_KEY", "OPENAI_API_BASE", "OPENAI_BASE_URL"):
    os.environ.pop(_name, None)
# A new retry spool adopts the spools that dead processes left in its directory (issue 22):
# the suite keeps its own directory, so no other run's leftovers reach a test's exporter.
if "TRACESCORE_EXPORT_RETRY_DIR" not in os.environ:
    _spools = tempfile.mkdtemp(prefix="tracescore-test-spools-")
    os.environ["TRACESCORE_EXPORT_RETRY_DIR"] = _spools
    atexit.register(shutil.rmtree, _spools, ignore_errors=True)

import pytest  # noqa: E402

from tests.helpers import timeout_scale  # noqa: E402
from tracescore import Judge  # noqa: E402
from tracescore.testing import ScriptedJudge, make_judge  # noqa: E402

# The kit's pytest plugin (entry point ``tracescore``, loaded because tracescore is installed)
# provides ``scripted_judge``: one server for the session, reset around each test.


@pytest.fixture
def judge_server(scripted_judge: ScriptedJudge) -> ScriptedJudge:
    """The loopback scripted judge, with no routes and no recorded requests."""
    return scripted_judge


@pytest.fixture
def judge(judge_server: ScriptedJudge) -> Judge:
    """A ``Judge`` for ``judge_server`` (2 retries, 10 ms backoff, 5 s timeout)."""
    return make_judge(judge_server)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Workers for ``-n auto`` (pyproject's addopts): one more than the cores, at most 8. The
    suite mostly waits (deadlines, child processes, loopback servers), so a worker beyond the
    cores keeps them busy; ``PYTEST_XDIST_AUTO_NUM_WORKERS`` overrides it."""
    given = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS", "").strip()
    if given.isdigit():
        return int(given)
    return min((os.cpu_count() or 1) + 1, 8)


def pytest_report_header(config: pytest.Config) -> str:
    return (f"tracescore: waits and pytest-timeout limits scaled x{timeout_scale():.1f} "
            "(TRACESCORE_TEST_TIMEOUT_SCALE, default the load per core)")


def _base_timeout(config: pytest.Config) -> float | None:
    for value in (config.getvalue("timeout"), os.environ.get("PYTEST_TIMEOUT"),
                  config.getini("timeout")):
        if value not in (None, ""):
            return float(value)
    return None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Scale every test's pytest-timeout limit (a marker's, else the configured one) by
    ``timeout_scale()``: the limit guards against hangs, and a busy machine is no hang."""
    scale = timeout_scale()
    if scale <= 1.0:
        return
    default = _base_timeout(config)
    for item in items:
        marker = item.get_closest_marker("timeout")
        args: tuple[object, ...] = ()
        kwargs: dict[str, object] = {}
        seconds: object = default
        if marker is not None:
            kwargs = {k: v for k, v in marker.kwargs.items() if k != "timeout"}
            if marker.args:
                seconds, args = marker.args[0], marker.args[1:]
            else:
                seconds = marker.kwargs.get("timeout", default)
        if isinstance(seconds, (int, float)) and seconds > 0:
            item.add_marker(pytest.mark.timeout(seconds * scale, *args, **kwargs), append=False)
