"""The pictures a person reads: the analysis overview on each benchmark's representative metric (with seed
intervals), and gate-rank's page with its predicted-vs-full figure."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from scipy import stats as st

from gate.analysis.pipeline import representative_figure, representative_values_with_intervals
from gate.ranking.report import write_report


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


def test_rank_page_says_whose_ranking_it_is_what_was_chosen_and_how_it_did(tmp_path):
    from test_rank_outputs import _Plan, _result

    result = _result(validation=True)
    result.paired = pd.DataFrame([{"baseline": "score:logme", "tau_difference": 0.33, "lo": -0.1, "hi": 0.8,
                                   "p_v2_not_better": 0.12, "draws": 100}])
    page = write_report(result, _Plan, type("R", (), {"budget": 0.1})(), tmp_path).read_text()
    assert "The ranking is the proxy's</b>: one seed." in page and "Predicted ranking on the tier" in page
    assert "0.050</b> of it" in page and "Predicted vs full" in page and "ratio 1.250" in page
    assert "score:logme" in page and "Values behind it" in page and "Proxy seeds" in page
