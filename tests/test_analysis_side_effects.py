"""The analysis stage has no process-wide side effects: importing it or drawing its figures leaves
matplotlib's backend (and pyplot) alone; EEVEE's thread limits are scoped (see tests/test_eevee.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

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
# torchmetrics imports pyplot when matplotlib is installed (the dataset configs are read into DatasetSpec, whose
# task-family lookup imports the adapters, hence torchmetrics); gate never draws through it (the scan below), so
# what must hold is that no pyplot figure is left open and the backend is the user's.
plt = sys.modules.get("matplotlib.pyplot")
assert plt is None or plt.get_fignums() == [], "a pyplot figure was left open"
print("ok", len(pngs))
"""


def test_importing_and_drawing_leaves_matplotlib_alone(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    env["MPLCONFIGDIR"] = str(tmp_path / "mpl")
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.startswith("ok")


def test_no_gate_module_draws_through_pyplot():
    """Figures are drawn on ``matplotlib.figure.Figure`` objects (no global figure manager, no backend switch)."""
    import gate

    root = Path(gate.__file__).resolve().parent
    imports = re.compile(r"^\s*(import matplotlib\.pyplot|from matplotlib import .*\bpyplot\b|from matplotlib\.pyplot import)",
                         re.MULTILINE)
    users = [str(p.relative_to(root)) for p in root.rglob("*.py") if imports.search(p.read_text())]
    assert users == [], users
