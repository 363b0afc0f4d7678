"""The pictures a person reads: the analysis overview on each benchmark's representative metric (with seed
intervals), and gate-rank's page with its predicted-vs-full figure."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from scipy import stats as st

from gate.analysis.pipeline import representative_figure, representative_values_with_intervals
from gate.ranking.budget import Ledger
from gate.ranking.pipeline import FullResults, RankResult, Request, validate_against_full
from gate.ranking.proxy import BenchmarkRanking
from gate.ranking.report import write_report
from gate.ranking.stats import rank_intervals


def test_overview_is_one_column_per_benchmark_on_its_metric_with_a_seed_interval(tmp_path):
    rows = []
    for bench, metric, hib, extra in (("digits", "acc@1", True, ["loss", "acc@5"]), ("speed", "mae", False, ["loss"])):
        for enc, mean, std, n in (("a", 0.9, 0.02, 3), ("b", 0.7, math.nan, 1)):
            for m in [metric, *extra]:
                rows.append({"kind": "finetune", "benchmark": bench, "encoder": enc, "metric": m, "mean": mean,
                             "std": std, "n": n, "higher_is_better": hib})
    summary = pd.DataFrame(rows)
    info = pd.DataFrame([{"benchmark": "digits", "metric": "acc@1", "higher_is_better": True},
                         {"benchmark": "speed", "metric": "mae", "higher_is_better": False}])
    means, halves, hib, metrics = representative_values_with_intervals(summary, info)
    assert list(means.columns) == ["digits", "speed"] and metrics == {"digits": "acc@1", "speed": "mae"}
    assert halves.loc["a", "digits"] == pytest.approx(st.t.ppf(0.975, 2) * 0.02 / math.sqrt(3), rel=1e-9)
    assert math.isnan(halves.loc["b", "digits"]) and hib == {"digits": True, "speed": False}
    assert representative_figure(summary, info, tmp_path / "h.png").stat().st_size > 1000


def test_rank_page_has_the_ranking_cost_full_heatmap_and_predicted_vs_full(tmp_path):
    encs = ["a", "b", "c", "d"]
    full = pd.DataFrame({"x": [0.9, 0.8, 0.7, 0.1], "y": [0.5, 0.9, 0.4, 0.3]}, index=encs)
    fr = FullResults(full, {b: {0: full[b], 1: full[b] * 0.98} for b in full}, {"x": ("acc@1", True),
                                                                                "y": ("acc@1", True)}, {}, {})
    rankings = {b: BenchmarkRanking(b, "acc@1", True, 10, (2, 4), [], list(encs)) for b in full}
    result = RankResult(rankings, Ledger({"run 1": 30.0}, {"a × x": 600.0}), pd.DataFrame(), [], fr)
    result.tier_ranking = rank_intervals(result.predicted(), n_boot=20)

    class Plan:
        encoders = tuple(encs)

        class tier:
            name = "t"

    request = Request(None, tuple(encs), 0.1, eta=2, overhead_steps=0, n_boot=20, use_full_runs=True)
    result.validation = validate_against_full(result, Plan, request, ["x", "y"])
    result.ceiling = {"x": 1.0, "y": 1.0, "tier": 1.0}
    page = write_report(result, Plan, request, tmp_path).read_text()
    assert "0.050</b> of it" in page and "Predicted vs full" in page and "Mean rank over the benchmarks" in page
    for name in ("full_heatmap.png", "predicted_vs_full.png"):
        assert (tmp_path / "figures" / name).stat().st_size > 1000 and f"figures/{name}" in page
