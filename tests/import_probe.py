"""The fresh interpreter behind ``tests/test_imports.py``: imports each package module alone.

Run as ``python tests/import_probe.py REQUEST.json RESULT.json [PKG.SUB ...]`` with the package
on ``PYTHONPATH``. A new interpreter per module (130 of them) took minutes on a busy machine;
this one interpreter gives each module the same start in a forked child of itself instead:

1. Before anything else is imported, for each ``PKG.SUB`` argument a child imports ``PKG``
   alone and says whether ``PKG.SUB`` is then a loaded submodule (``os.path`` is; a module that
   writes ``import xml`` and then uses ``xml.dom`` relies on someone else having imported it).
2. The request's ``package`` (``tracescore``) is imported, as in any fresh interpreter; what it
   loads is reported (the heavy-import test reads it). Importing any submodule runs the
   package's ``__init__`` first, so a module that the ``__init__`` imports is checked exactly
   by this step.
3. The third-party and standard-library modules that the package's modules import at module
   level (``warm`` in the request) are imported once, here, without running any other
   tracescore code, so that each child runs only tracescore's own modules.
4. Every other module is imported by a forked child of this process, which starts where a
   fresh interpreter stands after step 2. A subpackage's child imports the subpackage and
   forks again for the modules below it that the subpackage did not load, as a fresh
   interpreter would also have imported the subpackage first. What differs from a fresh
   interpreter is only what step 3 loaded, which step 1 and the test's static check cover
   (a module may reach a submodule by attribute only when it imports it, or when importing
   the submodule's package loads it).

Without ``os.fork`` (Windows) each module gets a new interpreter, as before.
"""

import os
import sys


def _fork(job):  # type: ignore[no-untyped-def]
    """Start ``job()`` in a child; return (pid, read end of the pipe it writes its report to).
    The child writes what ``job()`` returns (a JSON text), or its traceback and exits 1."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read)
        code = 0
        try:
            message = job().encode("utf-8")
        except BaseException:  # noqa: BLE001 - everything is the report
            import traceback

            code, message = 1, traceback.format_exc().encode("utf-8", "replace")
        view = memoryview(message)
        while view:  # the parent reads as the child writes
            view = view[os.write(write, view):]
        os._exit(code)
    os.close(write)
    return pid, read


def _run_all(jobs, workers, deadline):  # type: ignore[no-untyped-def]
    """Run ``{name: job}`` in forked children, ``workers`` at a time, until ``deadline``
    (``time.monotonic()``); ``{name: (exited well, what it wrote)}``."""
    import select
    import time

    results = {}
    waiting = list(jobs.items())
    running = {}  # read fd -> (name, pid, chunks)
    while waiting or running:
        while waiting and len(running) < workers:
            name, job = waiting.pop(0)
            pid, read = _fork(job)
            running[read] = (name, pid, [])
        left = deadline - time.monotonic()
        ready, _, _ = select.select(list(running), [], [], max(left, 0))
        if not ready:  # the deadline passed: stop what still runs and report it
            for read, (name, pid, _) in running.items():
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                os.close(read)
                results[name] = (False, "did not finish before the probe's deadline")
            for name, _ in waiting:
                results[name] = (False, "not started: the probe's deadline passed")
            return results
        for read in ready:
            name, pid, chunks = running[read]
            chunk = os.read(read, 65536)
            if chunk:
                chunks.append(chunk)
                continue
            del running[read]
            os.close(read)
            _, status = os.waitpid(pid, 0)
            text = b"".join(chunks).decode("utf-8", "replace")
            well = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
            results[name] = (well, text or f"the child ended with status {status}")
    return results


def _attribute_job(dotted):  # type: ignore[no-untyped-def]
    def job():  # type: ignore[no-untyped-def]
        package, _, sub = dotted.rpartition(".")
        __import__(package)
        if not isinstance(getattr(sys.modules[package], sub, None), type(sys)):
            raise AttributeError(f"import {package} does not load {dotted}")
        return ""

    return job


def _below(name, modules):  # type: ignore[no-untyped-def]
    return [m for m in modules if m.startswith(name + ".")]


def _each_alone(modules, workers, deadline):  # type: ignore[no-untyped-def]
    """Import each of ``modules`` that this process has not loaded, each in a child of this
    process: ``{module: error text or None}``. A package's child imports the package and
    goes on the same way with the modules below it that the package did not load (a fresh
    interpreter would also have imported the package first)."""
    import json

    loaded = set(sys.modules)
    remaining = [m for m in modules if m not in loaded]
    tops = [m for m in remaining if not any(m.startswith(o + ".") for o in remaining)]

    def job_for(top):  # type: ignore[no-untyped-def]
        def job():  # type: ignore[no-untyped-def]
            __import__(top)
            inner = _each_alone(_below(top, remaining), workers, deadline)
            return json.dumps({top: None, **inner})

        return job

    results = {m: None for m in modules if m in loaded}  # the importing package ran them
    for top, (well, text) in _run_all({t: job_for(t) for t in tops}, workers, deadline).items():
        if well:
            results.update(json.loads(text))
            continue
        results[top] = text
        for below in _below(top, remaining):
            results[below] = f"not imported: its package {top} failed"
    return results


def _in_new_interpreters(modules, timeout):  # type: ignore[no-untyped-def]
    import subprocess

    results = {}
    for module in modules:
        done = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True,
                              text=True, timeout=timeout, check=False)
        results[module] = None if done.returncode == 0 else done.stderr
    return results


def main(argv):  # type: ignore[no-untyped-def]
    request_path, result_path, attributes = argv[0], argv[1], argv[2:]
    # As under ``python -c``: this script's folder (tests/) is not where modules come from.
    del sys.path[0]
    forking = hasattr(os, "fork")
    workers = max(2, os.cpu_count() or 2)
    # 1. Before this process imports anything beyond what every interpreter starts with.
    import time

    provided = {}
    if forking and attributes:
        provided = _run_all({a: _attribute_job(a) for a in attributes}, workers,
                            time.monotonic() + 120.0)
    import contextlib
    import json
    import traceback

    with open(request_path, encoding="utf-8") as fh:
        request = json.load(fh)
    timeout = float(request["timeout"])
    report = {"attributes": {a: provided.get(a, (False,))[0] for a in attributes}}
    # 2. The package itself.
    try:
        __import__(request["package"])
    except BaseException:  # noqa: BLE001 - the report says what failed
        report["package_error"] = traceback.format_exc()
    else:
        report["package_error"] = None
    report["loaded_by_package"] = sorted(sys.modules)
    if report["package_error"] is None:
        # 3. What the modules need from outside the package, loaded once.
        for name in request["warm"]:
            # A missing optional dependency: the module that needs it says so in step 4.
            with contextlib.suppress(Exception):
                __import__(name)
        # 4. Each module from here, alone.
        loaded = set(report["loaded_by_package"])
        if forking:
            report["modules"] = _each_alone(request["modules"], workers,
                                            time.monotonic() + timeout)
        else:
            modules = [m for m in request["modules"] if m not in loaded]
            report["modules"] = _in_new_interpreters(modules, timeout)
    with open(result_path, "w", encoding="utf-8") as fh:
        json.dump(report, fh)


if __name__ == "__main__":
    main(sys.argv[1:])
