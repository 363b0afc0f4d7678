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
