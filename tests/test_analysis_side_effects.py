"""The analysis stage has no process-wide side effects: importing it or drawing its figures leaves
matplotlib's backend (and pyplot) alone; EEVEE's thread limits are scoped (see tests/test_eevee.py)."""

from __future__ import annotations

import os
import subprocess
import sys

SCRIPT = r"""
import sys
from pathlib import Path

import matplotlib

matplotlib.use("svg")  # the user's choice, not Agg


def refuse(*args, **kwargs):
    raise AssertionError("matplotlib.use was called")


matplotlib.use = refuse
import gate.analysis  # noqa: E402
import gate.analysis.eevee  # noqa: E402
import gate.analysis.figures as figs  # noqa: E402
import gate.analysis.pipeline  # noqa: E402
assert matplotlib.get_backend() == "svg", matplotlib.get_backend()

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

out = Path(sys.argv[1])
rows = []
for i, enc in enumerate("abcd"):
    rows.append({"encoder": enc, "dataset": "digits", "metric": "acc@1", "value": 0.5 + 0.1 * i, "kind": "finetune"})
    rows.append({"encoder": enc, "dataset": "digits", "metric": "logme", "value": float(i), "kind": "score"})
    rows.append({"encoder": enc, "dataset": "fashion_mnist", "metric": "acc@1", "value": 0.9 - 0.1 * i,
                 "kind": "finetune"})
pd.DataFrame(rows).to_csv(out / "r.csv", index=False)
res = gate.analysis.pipeline.run_analysis(out / "r.csv", out / "report", tiers={"t": ["digits", "fashion_mnist"]})
pngs = sorted((out / "report" / "figures").glob("*.png"))
assert len(pngs) >= 3, pngs
imp = pd.DataFrame({"benchmark": ["x", "y"], "increase": [0.2, 0.1], "fitness_with": [0.5, 0.5]})
pngs += [figs.importance_bar(imp, 2, out / "imp.png"), figs.k_sweep_box({1: np.array([1.0, 2.0])}, out / "k.png")]
for p in pngs:
    assert p.read_bytes().startswith(b"\x89PNG"), p
assert matplotlib.get_backend() == "svg", matplotlib.get_backend()
assert "matplotlib.pyplot" not in sys.modules, "pyplot was imported"
print("ok", len(pngs))
"""


def test_importing_and_drawing_leaves_matplotlib_alone(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    env["MPLCONFIGDIR"] = str(tmp_path / "mpl")
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("ok")
