"""What gate-analysis pays for, on the GATE paper's table (21 encoders × 31 benchmarks, no transferability scores):
scipy.stats only where a score is correlated or a published tier compared, each figure rendered once, the 42 dataset
configs read by libyaml's parser with OmegaConf's rules (the timings: docs/analysis.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

PAPER = Path(__file__).resolve().parents[1] / "experiments" / "gate_paper" / "gate_paper_table3.csv"

SCRIPT = r"""
import sys
from pathlib import Path

import gate.analysis.pipeline as P

res = P.run_analysis(sys.argv[1], Path(sys.argv[2]), figures=False)
means = P.representative_values_with_intervals(res.summary, P.pd.read_csv(Path(sys.argv[2]) / "tiers_benchmarks.csv"))[0]
assert means.shape == (21, 31), means.shape
print(sorted(m for m in ("scipy.stats", "torch") if m in sys.modules))
# the 95 % half-widths are scipy.stats' t quantiles: computed here with it, they are the same numbers
from scipy import stats

n = P.pd.Series([1.0, 2.0, 3.0, 5.0], index=list("abcd"))
summary = P.pd.DataFrame({"kind": "finetune", "benchmark": "x", "metric": "acc@1", "encoder": list("abcd"),
                          "n": n.values, "mean": [0.5, 0.6, 0.7, 0.8], "std": [0.0, 0.1, 0.05, 0.2]})
info = P.pd.DataFrame({"benchmark": ["x"], "metric": ["acc@1"], "higher_is_better": [True]})
halves = P.representative_values_with_intervals(summary, info)[1]["x"]
expected = summary.set_index("encoder")["std"] / n.pow(0.5) * n.map(lambda k: stats.t.ppf(0.975, k - 1) if k > 1 else float("nan"))
print(bool((expected.iloc[1:] == halves.iloc[1:]).all()), int(halves.notna().sum()))
"""


def test_the_paper_table_without_scores_is_reported_without_scipy_stats_or_torch(tmp_path):
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(PAPER), str(tmp_path / "report")], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    loaded, same = out.stdout.strip().splitlines()[-2:]
    assert loaded == "[]", loaded  # scipy.stats is 0.5 s of imports; torch would be seconds
    assert same == "True 3", same  # one seed has no interval


def test_a_figure_is_rendered_once(tmp_path, monkeypatch):
    """``tight_layout`` leaves a layout engine on the figure, and ``savefig`` then renders the whole figure once more
    (to a PNG it throws away) before writing it: the figures drop the engine once laid out."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from gate.analysis import figures as figs

    draws = []
    real = FigureCanvasAgg.draw
    monkeypatch.setattr(FigureCanvasAgg, "draw", lambda self, *a, **k: (draws.append(1), real(self, *a, **k))[1])
    tiers = pd.DataFrame({"encoder": ["a", "b", "c"], "tier:small": [0.5, 0.7, 0.6]})
    assert figs.tier_bars(tiers, tmp_path / "t.png") == tmp_path / "t.png"
    assert len(draws) == 1
    assert (tmp_path / "t.png").read_bytes().startswith(b"\x89PNG")


def test_config_yaml_is_read_as_omegaconf_reads_it(tmp_path):
    import yaml
    from omegaconf import OmegaConf

    from gate.files import read_config_yaml
    from gate.settings import conf_dir

    files = sorted(conf_dir().rglob("*.yaml"))
    assert len(files) > 100
    for f in files:  # every packaged config: the same data
        assert read_config_yaml(f) == OmegaConf.to_container(OmegaConf.load(f), resolve=False), f
    odd = tmp_path / "odd.yaml"
    odd.write_text("lr: 1e-3\nday: 2001-12-14\nx: ${dataset.y}\n")  # YAML 1.1 reads 1e-3 as a string, a date as a date
    assert read_config_yaml(odd) == {"lr": 0.001, "day": "2001-12-14", "x": "${dataset.y}"}
    dup = tmp_path / "dup.yaml"
    dup.write_text("name: a\nname: b\n")  # a plain YAML loader keeps the last; OmegaConf refuses it
    with pytest.raises(yaml.YAMLError, match=r"(?s)found duplicate key name.*dup\.yaml"):
        read_config_yaml(dup)
