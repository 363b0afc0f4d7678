"""gate.forked.map_forked: independent jobs in forked children, results in the jobs' order; a child never outlives a
killed parent by more than its current job."""

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

ORPHANS = textwrap.dedent("""
    import json, multiprocessing, os, signal, sys, time
    from gate.forked import map_forked

    def big(i):  # results larger than a pipe holds: a child whose parent is gone would wait on a full pipe
        time.sleep(0.02)
        return bytes(1 << 20)

    def first(index, result):
        pids = [c.pid for c in multiprocessing.active_children()]
        open(sys.argv[1], "w").write(json.dumps(pids))
        os.kill(os.getpid(), signal.SIGKILL)  # killed as a cluster kills: no handler, no cleanup

    print(map_forked(lambda i: i * i, list(range(7))))  # in order, whichever child computed each
    sys.stdout.flush()
    map_forked(big, list(range(200)), on_result=first)
""")


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: nothing is forked")
def test_results_come_in_order_and_children_end_soon_after_their_parent_is_killed(tmp_path):
    pids_file = tmp_path / "pids.json"
    out = subprocess.run([sys.executable, "-c", ORPHANS, str(pids_file)], capture_output=True, text=True, timeout=120)
    assert out.returncode == -9, out.stderr[-3000:]
    assert out.stdout.splitlines()[0] == str([i * i for i in range(7)])
    pids = json.loads(pids_file.read_text())
    assert len(pids) == 2
    deadline = time.monotonic() + 15
    alive = pids
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = [p for p in pids if _alive(p)]
    assert not alive, f"children still running 15 s after their parent was killed: {alive}"
    assert "Traceback" not in out.stderr, out.stderr[-3000:]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"  # a zombie has ended (its parent, init, reaps it)
    except FileNotFoundError:
        return False


CAUSES = textwrap.dedent("""
    import json
    from gate.forked import children_for, map_forked

    class Unpicklable(Exception):
        def __reduce__(self):
            raise TypeError("not picklable")

    def fails(i):
        try:
            try:
                raise Unpicklable("innermost")
            except Unpicklable as err:
                raise KeyError("inner") from err
        except KeyError as err:
            raise ValueError(f"outer {i}") from err

    try:
        map_forked(fails, [0, 1, 2])
    except ValueError as err:
        chain = []
        while err is not None:
            chain.append([type(err).__name__, str(err)])
            err = err.__cause__
        print(json.dumps({"children": children_for(3), "chain": chain}))
""")


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: nothing is forked")
def test_an_error_raised_in_a_child_comes_back_with_its_causes():
    """A command's one-line error reads an error's cause (Hydra's composition error wraps the unknown key); a pickle
    drops causes, so they travel beside the error and are linked again in the parent (an unpicklable one as its
    line)."""
    out = subprocess.run([sys.executable, "-c", CAUSES], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout)
    assert got["children"] == 2
    (kind, text), *causes = got["chain"]
    assert kind == "ValueError" and text.startswith("outer ")
    assert causes == [["KeyError", "'inner'"], ["RuntimeError", "Unpicklable: innermost"]]


LISTING = textwrap.dedent("""
    import json, sys
    from gate.cli.common import describe
    from gate.engine.prepare import dataset_keys, listing
    from gate.forked import children_for

    keys = dataset_keys()
    lines = listing(keys, [f"paths.root={sys.argv[1]}"])
    try:  # the first dataset (here) takes the video key; the others (in children) lack it
        listing(["fmnist_video", "digits", "cifar100", "bbc_news"], [f"paths.root={sys.argv[1]}", "dataset.options.frames=8"])
        error = None
    except Exception as err:
        error = describe(err)
    print(json.dumps({"children": children_for(len(keys)), "keys": keys, "lines": lines, "error": error}))
""")


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: nothing is forked")
def test_gate_data_list_in_forked_children_gives_every_dataset_in_order_and_the_same_one_line_errors(tmp_path):
    """gate-data list composes the datasets side by side in forked children (in a fresh interpreter, which runs no
    other thread: a test worker forks only while no test has left a thread running): one row per dataset in the
    list's order, and a key a later dataset's config lacks is the same one line it is without children, not an
    internal error. (The first dataset is composed here, so a key every dataset lacks is said before any fork.)"""
    out = subprocess.run([sys.executable, "-c", LISTING, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout)
    assert got["children"] == 2
    header, *rows, footer = got["lines"]
    assert header.split()[:2] == ["key", "group"] and [row.split()[0] for row in rows] == got["keys"]
    assert footer.startswith(f"[gate] {len(got['keys'])} datasets; local copies under {tmp_path}/data/<key>")
    assert got["error"].startswith("unknown config key 'dataset.options'; dataset has: builder, metrics"), got["error"]
