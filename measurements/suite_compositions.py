"""How much of the test suite's CPU goes to Hydra composing configs, and which test files compose the most.

    .venv/bin/python measurements/suite_compositions.py               # the README's test command
    .venv/bin/python measurements/suite_compositions.py tests/test_rank_cli.py -p no:xdist

Runs pytest (by default as the README runs it: ``-n auto --dist loadfile``) with a start-up hook in every Python
process it starts, workers and the commands the tests run alike (a ``sitecustomize`` module on ``PYTHONPATH``, in a
temporary folder: nothing is installed). The hook wraps Hydra's ``ConfigLoaderImpl.load_configuration`` — every
composition, ``@hydra.main``'s and the compose API's — and appends its CPU seconds and the running test
(``PYTEST_CURRENT_TEST``) to its process's file as it ends, so the compositions of forked children (``gate.forked``:
tier expansion, gate-data list) and of a process killed later count too.

Prints the compositions, their CPU seconds, the suite's CPU (this process's children: ``getrusage``) and the share,
then the test files that compose the most. Each process imports Hydra at start-up under the hook, which the suite
does not: its CPU is a little higher than without it.
"""

from __future__ import annotations

import collections
import os
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

HOOK = textwrap.dedent('''
    import os, time

    def _install():
        try:
            from hydra._internal import config_loader_impl as loader
        except Exception:
            return
        original = loader.ConfigLoaderImpl.load_configuration

        def load_configuration(self, *args, **kwargs):
            started = time.process_time()
            try:
                return original(self, *args, **kwargs)
            finally:
                test = os.environ.get("PYTEST_CURRENT_TEST", "(outside a test)").split("::")[0]
                path = os.path.join(os.environ["GATE_COMPOSITIONS_DIR"], f"{os.getpid()}.tsv")
                with open(path, "a") as out:
                    out.write(f"{time.process_time() - started:.4f}\\t{test}\\n")

        loader.ConfigLoaderImpl.load_configuration = load_configuration

    _install()
''')

README_ARGS = ["-q", "-n", "auto", "--dist", "loadfile", "-p", "no:cacheprovider"]


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="gate-compositions-") as tmp:
        hook, logs = Path(tmp) / "hook", Path(tmp) / "logs"
        hook.mkdir()
        logs.mkdir()
        (hook / "sitecustomize.py").write_text(HOOK)
        env = dict(os.environ, GATE_COMPOSITIONS_DIR=str(logs),
                   PYTHONPATH=os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")])))
        started = time.monotonic()
        run = subprocess.run([sys.executable, "-m", "pytest", *(argv or README_ARGS)], env=env)
        wall = time.monotonic() - started
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        by_file: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
        for log in logs.glob("*.tsv"):
            for line in log.read_text().splitlines():
                seconds, test = line.split("\t")
                by_file[test][0] += 1
                by_file[test][1] += float(seconds)
    count = sum(int(n) for n, _ in by_file.values())
    seconds = sum(s for _, s in by_file.values())
    cpu = usage.ru_utime + usage.ru_stime
    print(f"\npytest exit {run.returncode}, {wall:.0f} s wall, {cpu:.0f} CPU-s in all its processes")
    print(f"Hydra compositions: {count}, {seconds:.0f} CPU-s = {seconds / cpu:.1%} of the suite's CPU "
          f"({seconds / max(count, 1):.3f} s each)")
    for test, (n, s) in sorted(by_file.items(), key=lambda kv: -kv[1][1])[:15]:
        print(f"  {s:7.1f} CPU-s  {int(n):5d}  {test}")
    return run.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
