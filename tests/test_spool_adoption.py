"""What the retry spool adopts from folders left on its directory, attacked.

A spool folder is adopted only when it is a private folder (mode 0700) of this process's user;
anything else is left alone and counted (``stats().spool_refused``). Dropped spans are counted
from decoded files, never from their names, and a file larger than a batch can be is dropped
alone without pushing out real batches.

The folders are made for real: a batch spooled by this process while its exporter fails is
copied into a folder named like one a killed process leaves, then the folder's owner, mode and
files are changed with ``os.chown``/``os.chmod``/``os.truncate``.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tracescore
from tests.otlp_receiver import HttpOtlpReceiver

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "tracescore-retry-"  # the spool folder names, as docs/export.md documents them
NO_DROPS = {"queue_full": 0, "export_failed": 0, "too_large": 0, "shutdown": 0}
NOTHING_REFUSED = {"folders": 0, "files": 0}


class _Down(SpanExporter):
    """A backend that is down: every export fails."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        pass


@pytest.fixture(autouse=True)
def _shut_down() -> Iterator[None]:
    yield
    tracescore.shutdown(5000)


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.otlp"))


def _spooled_batches(work: Path, batches: int, tag: str, spans: int = 3) -> list[Path]:
    """Batch files spooled by this process while its backend is down (``spans`` spans each,
    their ``input.value`` holding ``tag`` and a number)."""
    spool_dir = work / "own"
    tracescore.configure(exporter=_Down(), export=tracescore.ExportOptions(
        retry_dir=str(spool_dir), max_batch_spans=spans))

    @tracescore.tool(name="planted")
    def planted(tag: str, i: int) -> int:
        return i

    for b in range(batches):
        for i in range(b * spans, (b + 1) * spans):
            planted(tag, i)
        tracescore.force_flush(5000)  # fails: one more batch in the spool
    files = _files(spool_dir)
    assert len(files) == batches
    keep = work / "kept"
    keep.mkdir(exist_ok=True)
    copies = [Path(shutil.copy2(f, keep / f.name)) for f in files]
    tracescore.shutdown(5000)
    return copies


def _dead_folder(base: Path, files: list[Path], name: str = "4000000-abcd1234.locked",
                 mode: int = 0o700) -> Path:
    """A spool folder as a killed process leaves it (no lock held), holding ``files``."""
    base.mkdir(parents=True, exist_ok=True)
    folder = base / f"{PREFIX}{name}"
    folder.mkdir()
    for f in files:
        shutil.copy2(f, folder / f.name)
        os.chmod(folder / f.name, 0o600)
    os.chmod(folder, mode)
    return folder


def _replay(base: Path, **options: object) -> InMemorySpanExporter:
    memory = InMemorySpanExporter()
    tracescore.configure(exporter=memory, export=tracescore.ExportOptions(
        retry_dir=str(base), **options))  # type: ignore[arg-type]
    tracescore.force_flush(10_000)
    return memory


def _tags(memory: InMemorySpanExporter) -> list[tuple[str, int]]:
    out = []
    for span in memory.get_finished_spans():
        value = json.loads(str((span.attributes or {})["input.value"]))
        out.append((value["tag"], value["i"]))
    return out


def test_a_private_folder_of_this_user_is_adopted(tmp_path: Path) -> None:
    # The control for the refusals below: the same folder, private, is replayed.
    batch = _spooled_batches(tmp_path, 1, "mine")
    folder = _dead_folder(tmp_path / "spool", batch)
    memory = _replay(tmp_path / "spool")
    assert _tags(memory) == [("mine", 0), ("mine", 1), ("mine", 2)]
    assert not folder.exists()
    stats = tracescore.stats()
    assert stats.spans_dropped == NO_DROPS
    assert stats.spool_refused == NOTHING_REFUSED


def _assert_left_alone(folder: Path, files: int, memory: InMemorySpanExporter) -> None:
    assert memory.get_finished_spans() == ()
    assert folder.is_dir() and len(_files(folder)) == files
    stats = tracescore.stats()
    assert stats.spool_refused == {"folders": 1, "files": 0}
    assert stats.spans_dropped == NO_DROPS


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user (nobody) "
                    "needs root; the same-user 0777 case below runs everywhere")
def test_a_world_writable_folder_of_another_user_is_refused_and_left_alone(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import pwd

    nobody = pwd.getpwnam("nobody")
    batch = _spooled_batches(tmp_path, 1, "forged")
    os.chmod(tmp_path, 0o755)  # lets nobody's folder be told apart from an unreadable one
    folder = _dead_folder(tmp_path / "spool", batch, mode=0o777)
    for path in [folder, *_files(folder)]:
        os.chown(path, nobody.pw_uid, nobody.pw_gid)
    with caplog.at_level(logging.WARNING, logger="tracescore"):
        memory = _replay(tmp_path / "spool")
        _assert_left_alone(folder, 1, memory)
        tracescore.shutdown(5000)
        # Configured again (a new spool): counted again, logged once per process.
        memory = _replay(tmp_path / "spool")
        _assert_left_alone(folder, 1, memory)
    warnings = [r.getMessage() for r in caplog.records if "left the retry spool" in r.message]
    assert len(warnings) == 1, warnings
    assert str(folder) in warnings[0] and f"uid {nobody.pw_uid}" in warnings[0]
    assert "mode 777" in warnings[0]


@pytest.mark.parametrize("mode", [0o777, 0o755, 0o770, 0o1777], ids=oct)
def test_a_folder_of_this_user_that_others_can_enter_is_refused(
        tmp_path: Path, mode: int) -> None:
    batch = _spooled_batches(tmp_path, 1, "forged")
    folder = _dead_folder(tmp_path / "spool", batch, mode=mode)
    _assert_left_alone(folder, 1, _replay(tmp_path / "spool"))
    assert stat.S_IMODE(folder.stat().st_mode) == mode  # untouched


def test_a_symlink_to_a_private_folder_is_not_followed(tmp_path: Path) -> None:
    batch = _spooled_batches(tmp_path, 1, "elsewhere")
    target = _dead_folder(tmp_path / "elsewhere", batch)
    (tmp_path / "spool").mkdir()
    link = tmp_path / "spool" / f"{PREFIX}4000001-feedbeef.locked"
    link.symlink_to(target, target_is_directory=True)
    memory = _replay(tmp_path / "spool")
    assert memory.get_finished_spans() == ()
    assert link.is_symlink() and len(_files(target)) == 1


def test_a_file_name_claiming_a_quadrillion_spans_counts_what_it_decodes_to(
        tmp_path: Path) -> None:
    batch = _spooled_batches(tmp_path, 2, "old")
    folder = _dead_folder(tmp_path / "spool", batch)
    old, recent = _files(folder)
    forged = old.with_name(f"{old.name[:12]}-{10 ** 15}-{1 << 20}.otlp")
    old.rename(forged)
    hour_ago = time.time() - 3600
    os.utime(forged, (hour_ago, hour_ago))  # past the age bound: dropped, counted
    memory = _replay(tmp_path / "spool", retry_max_age=60)
    assert _tags(memory) == [("old", 3), ("old", 4), ("old", 5)]
    stats = tracescore.stats()
    # 3 spans in the dropped file, whatever its name says (it said 10^15).
    assert stats.spans_dropped == {**NO_DROPS, "export_failed": 3}
    assert stats.spool_refused == NOTHING_REFUSED


def test_a_forged_name_on_a_file_that_does_not_decode_counts_no_spans(tmp_path: Path) -> None:
    batch = _spooled_batches(tmp_path, 1, "real")
    folder = _dead_folder(tmp_path / "spool", batch)
    junk = folder / f"000000000007-{10 ** 15}-1024.otlp"
    junk.write_bytes(b"not a batch" * 10)
    os.chmod(junk, 0o600)
    memory = _replay(tmp_path / "spool")
    assert _tags(memory) == [("real", 0), ("real", 1), ("real", 2)]
    stats = tracescore.stats()
    assert stats.spans_dropped == NO_DROPS
    assert stats.spool_refused == {"folders": 0, "files": 1}


def test_a_sparse_50_gib_file_is_dropped_alone(tmp_path: Path) -> None:
    batch = _spooled_batches(tmp_path, 1, "real")
    folder = _dead_folder(tmp_path / "spool", batch)
    (real,) = _files(folder)
    huge = folder / "000000000009-3-1048576.otlp"
    huge.touch(0o600)
    os.truncate(huge, 50 << 30)  # sparse: no disk used
    # Newer than the real batch: the byte bound evicts the oldest first.
    later = real.stat().st_mtime + 10
    os.utime(huge, (later, later))
    memory = _replay(tmp_path / "spool", retry_max_bytes=1 << 20)
    assert _tags(memory) == [("real", 0), ("real", 1), ("real", 2)]
    stats = tracescore.stats()
    assert stats.spans_dropped == NO_DROPS
    assert stats.spool_refused == {"folders": 0, "files": 1}
    assert not folder.exists()


def test_a_real_batch_alone_past_the_byte_bound_goes_alone_and_is_counted(
        tmp_path: Path) -> None:
    # A bound lowered between two runs: the newest batch alone is larger than it. It is
    # dropped by itself, its spans counted from what it decodes to; the older batches stay.
    small = _spooled_batches(tmp_path / "a", 2, "small")
    big = _spooled_batches(tmp_path / "b", 1, "big", spans=60)
    folder = _dead_folder(tmp_path / "spool", small)
    (big_file,) = big
    target = folder / f"000000000005-{big_file.name[13:]}"
    shutil.copy2(big_file, target)
    os.chmod(target, 0o600)
    later = max(f.stat().st_mtime for f in _files(folder)) + 10
    os.utime(target, (later, later))
    bound = sum(f.stat().st_size for f in small) + 16
    assert target.stat().st_size > bound
    memory = _replay(tmp_path / "spool", retry_max_bytes=bound)
    assert _tags(memory) == [("small", i) for i in range(6)]
    stats = tracescore.stats()
    assert stats.spans_dropped == {**NO_DROPS, "export_failed": 60}
    assert stats.spool_refused == NOTHING_REFUSED


def test_hard_links_and_foreign_files_in_a_private_folder_are_not_read(tmp_path: Path) -> None:
    batch = _spooled_batches(tmp_path, 3, "mixed")
    folder = _dead_folder(tmp_path / "spool", batch)
    linked, foreign, plain = _files(folder)
    outside = tmp_path / "outside.otlp"
    os.link(linked, outside)  # two links: one of them outside the folder
    refused = 1
    if os.geteuid() == 0:
        os.chown(foreign, 65534, 65534)  # another user's file inside a private folder
        refused = 2
    memory = _replay(tmp_path / "spool")
    expected = [("mixed", i) for i in range(6, 9)]
    if refused == 1:
        expected = [("mixed", i) for i in range(3, 9)]
    assert _tags(memory) == expected
    assert tracescore.stats().spool_refused == {"folders": 0, "files": refused}
    assert outside.exists()  # the other link is untouched


ADOPTER = textwrap.dedent("""
    import sys
    import tracescore
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    spool_dir, port = sys.argv[1], int(sys.argv[2])
    sys.stdin.readline()  # both processes are up: adopt at once
    tracescore.configure(
        service_name="adopter",
        exporter=OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces", timeout=10),
        export=tracescore.ExportOptions(retry_dir=spool_dir))
    ok = tracescore.force_flush(30_000)
    print("DONE", ok, tracescore.stats().spans_exported, flush=True)
    tracescore.shutdown(5000)
""")


def test_two_processes_adopting_the_same_folders_replay_each_span_once(
        tmp_path: Path) -> None:
    batches = _spooled_batches(tmp_path, 6, "race")
    base = tmp_path / "spool"
    for n in range(3):  # three dead processes' folders, two batches each
        _dead_folder(base, batches[2 * n:2 * n + 2], name=f"{4000010 + n}-r{n}.locked")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_OFFLINE_MODE": "true",
           "TRACESCORE_LOG_RECORDS": "false"}
    with HttpOtlpReceiver() as receiver:
        children = [subprocess.Popen(
            [sys.executable, "-c", ADOPTER, str(base), str(receiver.port)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env, cwd=str(ROOT)) for _ in range(2)]
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        outs = [child.communicate(timeout=120) for child in children]
        received = [json.loads(s.attributes["input.value"])["i"]
                    for s in receiver.received.spans]
    for child, (out, err) in zip(children, outs, strict=True):
        assert child.returncode == 0 and out.startswith("DONE True"), (out, err)
    exported = sum(int(out.split()[2]) for out, _ in outs)
    assert sorted(received) == list(range(18)) and exported == 18
    assert list(base.iterdir()) == []
