"""SIGTERM, as ``docker stop`` and Kubernetes send it (issue 10, item 5).

A real child process exports over OTLP to a loopback receiver and is SIGTERMed mid-work: with
SIGTERM's default disposition tracescore flushes, then the process dies of SIGTERM as it would
have; a handler the application installed is left alone; the opt-outs work.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator

import pytest

from tests.otlp_receiver import HttpOtlpReceiver
from tracescore._setup import signals as _signals

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX signals")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = 100

CHILD = textwrap.dedent(
    """
    import os, signal, sys, threading
    sys.path.insert(0, {root!r})
    import tracescore
    from tracescore._setup import config as _config, signals as _signals

    mode = sys.argv[1]

    def user_handler(signum, frame):
        # os.write, not print: the handler may interrupt the main thread inside a print, and
        # a buffered stream refuses a reentrant write.
        os.write(1, b"user handler\\n")
        os._exit(3)

    if mode == "user_before":
        signal.signal(signal.SIGTERM, user_handler)
    kwargs = ({{"export": tracescore.ExportOptions(flush_on_sigterm=False)}}
              if mode == "opt_out_argument" else {{}})
    tracescore.configure(service_name="sigterm",
                         limits=tracescore.LimitsOptions(flush_timeout=5), **kwargs)
    if mode == "reconfigured_off":
        tracescore.configure(service_name="sigterm",
                             export=tracescore.ExportOptions(flush_on_sigterm=False))
    if mode == "user_after":
        signal.signal(signal.SIGTERM, user_handler)

    handler = signal.getsignal(signal.SIGTERM)
    print("handler", {{_signals._on_sigterm: "tracescore", signal.SIG_DFL: "default",
                      user_handler: "user"}}.get(handler, repr(handler)), flush=True)

    @tracescore.tool
    def step(i):
        return i

    @tracescore.agent
    def work():
        for i in range({steps}):
            step(i)
        # Still inside work(): its span is open when the signal comes, as a request is.
        if mode == "holding_config_lock":
            _config._config_lock.acquire()
        if mode == "holding_processor_lock":
            _config.current().processor._counts.lock.acquire()
        print("ready", flush=True)
        threading.Event().wait()

    work()
    """
)


@pytest.fixture
def receiver() -> Iterator[HttpOtlpReceiver]:
    with HttpOtlpReceiver() as r:
        yield r


def _run(receiver: HttpOtlpReceiver, mode: str, **env: str) -> tuple[int, list[str]]:
    """Start the child, SIGTERM it once its steps are done, return its status and its lines."""
    child_env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("TRACESCORE_")},
        "PYTHONPATH": ROOT,
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        # Nothing leaves on its own before the signal: without tracescore's handler, the
        # batch waits for a schedule that never comes.
        "OTEL_BSP_SCHEDULE_DELAY": "600000",
        # The child's own prints stay whole when a signal lands mid-print.
        "PYTHONUNBUFFERED": "1",
        **env,
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD.format(root=ROOT, steps=STEPS), mode],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env,
    )
    # A hang guard, not a timing assertion: a child that never gets ready or never dies fails
    # the test instead of stalling the suite.
    guard = threading.Timer(120, proc.kill)
    guard.start()
    try:
        lines = []
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.strip())
            if line.strip() == "ready":
                break
        assert lines and lines[-1] == "ready", (lines, proc.stderr.read() if proc.stderr else "")
        proc.send_signal(signal.SIGTERM)
        rest, err = proc.communicate()
        lines.extend(x.strip() for x in rest.splitlines())
        return proc.wait(), lines
    finally:
        guard.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _steps(receiver: HttpOtlpReceiver) -> list[int]:
    """The argument of every ``step`` span the receiver got, sorted."""
    return sorted(json.loads(s.attributes["input.value"])["i"]
                  for s in receiver.received.spans if s.name == "execute_tool step")


def test_sigterm_with_the_default_disposition_flushes_then_dies_of_sigterm(
    receiver: HttpOtlpReceiver,
) -> None:
    status, lines = _run(receiver, "default")
    assert lines[0] == "handler tracescore"
    assert status == -signal.SIGTERM  # a SIGTERM death, as without tracescore
    # Every span that had ended arrived; work()'s own span was still open and cannot.
    assert _steps(receiver) == list(range(STEPS))
    assert not receiver.received.by_name("invoke_agent work")


def test_the_flush_does_not_need_the_configuration_lock(receiver: HttpOtlpReceiver) -> None:
    # The signal lands while the main thread holds configure()'s lock: the flush runs on a
    # helper thread and never takes it.
    status, lines = _run(receiver, "holding_config_lock")
    assert status == -signal.SIGTERM
    assert _steps(receiver) == list(range(STEPS))


def test_a_flush_blocked_by_a_lock_the_main_thread_holds_still_dies_at_the_deadline(
    receiver: HttpOtlpReceiver,
) -> None:
    # The flush needs a lock the interrupted main thread holds: the handler gives up at the
    # deadline and the process dies of SIGTERM anyway, never hangs.
    status, lines = _run(receiver, "holding_processor_lock")
    assert lines[0] == "handler tracescore"
    assert status == -signal.SIGTERM


@pytest.mark.parametrize("mode", ["user_before", "user_after"])
def test_a_handler_the_application_installed_is_left_alone(
    receiver: HttpOtlpReceiver, mode: str,
) -> None:
    status, lines = _run(receiver, mode)
    assert lines[0] == "handler user"
    assert "user handler" in lines
    assert status == 3  # the application's handler decided how to exit


@pytest.mark.parametrize(("mode", "env"), [
    ("opt_out_argument", {}),
    ("reconfigured_off", {}),
    ("default", {"TRACESCORE_FLUSH_ON_SIGTERM": "false"}),
])
def test_opting_out_keeps_the_default_disposition(
    receiver: HttpOtlpReceiver, mode: str, env: dict[str, str],
) -> None:
    status, lines = _run(receiver, mode, **env)
    assert lines[0] == "handler default"
    assert status == -signal.SIGTERM


# --- In process: what update() installs and leaves alone ------------------------------------


@pytest.fixture
def saved_disposition() -> Iterator[None]:
    saved = signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGTERM, saved)


def test_update_leaves_an_ignored_sigterm_alone(saved_disposition: None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    assert _signals.update(True, lambda seconds: None, 1.0) is False
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    assert _signals.update(False, lambda seconds: None, 1.0) is False
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN


def test_update_installs_once_and_removes_only_its_own(saved_disposition: None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    assert _signals.update(True, lambda seconds: None, 1.0) is True
    assert _signals.installed()
    assert _signals.update(True, lambda seconds: None, 2.0) is True  # kept, not stacked
    assert _signals.update(False, lambda seconds: None, 1.0) is False
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_update_outside_the_main_thread_does_nothing(saved_disposition: None) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    results: list[bool] = []
    thread = threading.Thread(target=lambda: results.append(
        _signals.update(True, lambda seconds: None, 1.0)))
    thread.start()
    thread.join()
    assert results == [False]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
