"""gate-analysis draws its figures in forked worker processes where that is safe (gate.analysis.figures.draw_all):
the same figures and the same warnings as drawn one after the other, in the report's order."""

import subprocess
import sys
import textwrap

WORKERS = textwrap.dedent("""
    import os, sys, threading, warnings
    from pathlib import Path
    from gate.analysis.figures import FigureJob, draw_all

    def draw(path, text):
        warnings.warn(f"drawn {text}")
        Path(path).write_text(f"{os.getpid()} {text}")
        return Path(path)

    def nothing(path, text):
        return None

    folder = Path(sys.argv[1])
    jobs = [FigureJob(draw, (folder / "a.txt", "a"), "overview", "A"),
            FigureJob(nothing, (folder / "b.txt", "b"), "overview", "B"),
            FigureJob(draw, (folder / "c.txt",), "tiers", "C", {"text": "c"})]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        drawn = draw_all(jobs)
    print([(p.name, s, c) for p, s, c in drawn])
    print(sorted(str(w.message) for w in seen))
    pids = {(folder / f).read_text().split()[0] for f in ("a.txt", "c.txt")}
    print(str(os.getpid()) not in pids, threading.active_count())
    try:
        draw_all([FigureJob(draw, (folder / "d.txt", "d"), "x", "D"), FigureJob(Path.read_text, (folder / "no.txt",), "x", "E")])
    except FileNotFoundError as err:
        print("raised", Path(err.filename).name)
    try:  # a child that dies (killed, out of memory) without sending its figures (on one core: drawn here, so not tried)
        if len(os.sched_getaffinity(0)) < 2:
            raise RuntimeError("one core")
        draw_all([FigureJob(draw, (folder / "e.txt", "e"), "x", "E"), FigureJob(os._exit, (3,), "x", "F")])
    except RuntimeError as err:
        print(err)

    def waits(path, other):  # drawn only once the other child has drawn every other job (or 20 s: a fixed share)
        import time
        deadline = time.monotonic() + 20
        while not Path(other).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        Path(path).write_text(str(os.getpid()))
        return Path(path)

    def quick(path, then=None):
        Path(path).write_text(str(os.getpid()))
        if then:
            Path(then).write_text("")
        return Path(path)

    if len(os.sched_getaffinity(0)) > 1:  # a child that is free takes the next job: one slow job holds up nothing
        names = ["slow", "q1", "q2", "q3"]
        draw_all([FigureJob(waits, (folder / "slow", folder / "q3.done"), "x", "slow")] +
                 [FigureJob(quick, (folder / n,), "x", n, {"then": folder / "q3.done" if n == "q3" else None})
                  for n in names[1:]])
        pid = {n: (folder / n).read_text() for n in names}
        print(len({pid["q1"], pid["q2"], pid["q3"]}) == 1 and pid["slow"] != pid["q1"])
    else:
        print(True)
""")


def test_figures_drawn_in_workers_keep_their_order_warnings_and_errors(tmp_path):
    script = tmp_path / "workers.py"
    script.write_text(WORKERS)
    out = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    drawn, seen, where, raised, died, shared = out.stdout.strip().splitlines()
    assert drawn == "[('a.txt', 'overview', 'A'), ('c.txt', 'tiers', 'C')]"  # the job that drew nothing left out
    assert seen == "['drawn a', 'drawn c']"  # each worker's warning given again in this process
    import os

    cores = len(os.sched_getaffinity(0))
    assert where == ("True 1" if cores > 1 else "False 1")  # drawn by other processes where there are cores for them
    assert raised == "raised no.txt"  # an error in a worker is raised here, as it is drawn here
    if cores > 1:  # one line naming what happened, not a hang or a missing figure
        assert died == "a figure process ended without its figures (exit code 3)", died
    assert shared == "True"  # the jobs after a slow one went to the child that was free, not by a fixed share


def test_a_process_with_another_thread_draws_its_figures_itself(tmp_path):
    import os
    import threading
    import warnings
    from pathlib import Path

    from gate.analysis.figures import FigureJob, draw_all

    stop = threading.Event()
    other = threading.Thread(target=stop.wait, daemon=True)
    other.start()
    try:
        path = tmp_path / "a.txt"

        def draw(p):
            warnings.warn("drawn here", stacklevel=2)
            Path(p).write_text(str(os.getpid()))
            return Path(p)

        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            assert draw_all([FigureJob(draw, (path,), "s", "c"), FigureJob(draw, (tmp_path / "b.txt",), "s", "d")]) == [
                (path, "s", "c"), (tmp_path / "b.txt", "s", "d")]
        assert path.read_text() == str(os.getpid())  # no fork while another thread runs (its locks would stay held)
        assert [str(w.message) for w in seen] == ["drawn here", "drawn here"]
    finally:
        stop.set()
