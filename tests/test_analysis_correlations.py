"""Score-vs-fine-tuning correlations on hand-made tables with known answers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from gate.analysis.correlations import COLUMNS, correlation_row, rel_top1, score_target_correlations, top_k_hit
from gate.analysis.load import from_frame, summarize


def _summary(scores: dict[str, list[float]], targets: list[float], dataset="d", target="acc@1",
             score_hib: dict[str, bool] | None = None, num_classes=None):
    encoders = [f"e{i}" for i in range(len(targets))]
    rows = [{"encoder": e, "dataset": dataset, "metric": target, "value": v, "kind": "finetune",
             "higher_is_better": True} for e, v in zip(encoders, targets)]
    for name, vals in scores.items():
        hib = (score_hib or {}).get(name, True)
        rows += [{"encoder": e, "dataset": dataset, "metric": name, "value": v, "kind": "score",
                  "higher_is_better": hib} for e, v in zip(encoders, vals)]
    frame = pd.DataFrame(rows)
    if num_classes is not None:
        frame["num_classes"] = num_classes
    return summarize(from_frame(frame).long)


def test_perfect_agreement_is_all_ones():
    s = _summary({"logme": [1, 2, 3, 4, 5]}, [10, 20, 30, 40, 50])
    corr, _ = score_target_correlations(s, target="acc@1")
    assert list(corr.columns) == COLUMNS
    row = corr.iloc[0]
    assert row["n"] == 5
    for col in ("pearson", "spearman", "kendall", "weighted_tau", "rel_top1"):
        assert row[col] == pytest.approx(1.0)
    assert bool(row["top1"]) and bool(row["top3"])


def test_reversed_is_minus_one_and_misses_the_best():
    s = _summary({"logme": [5, 4, 3, 2, 1]}, [10, 20, 30, 40, 50])
    row = score_target_correlations(s, target="acc@1")[0].iloc[0]
    for col in ("pearson", "spearman", "kendall", "weighted_tau"):
        assert row[col] == pytest.approx(-1.0)
    assert not bool(row["top1"]) and not bool(row["top3"])
    assert row["rel_top1"] == pytest.approx(10 / 50)


def test_lower_is_better_scores_are_negated_first():
    s = _summary({"coral": [5, 4, 3, 2, 1]}, [10, 20, 30, 40, 50], score_hib={"coral": False})
    row = score_target_correlations(s, target="acc@1")[0].iloc[0]
    assert row["spearman"] == pytest.approx(1.0) and row["weighted_tau"] == pytest.approx(1.0)
    assert bool(row["top1"]) and row["rel_top1"] == pytest.approx(1.0)


def test_ties_are_handled():
    # Two encoders tie on the score; Kendall's tau-b and Spearman use average ranks.
    score, target = [1, 2, 2, 3], [1, 2, 3, 4]
    row = correlation_row(score, target)
    assert row["kendall"] == pytest.approx(stats.kendalltau(score, target)[0])
    assert row["spearman"] == pytest.approx(stats.spearmanr(score, target)[0])
    assert row["kendall"] == pytest.approx(5 / np.sqrt(6 * 5))  # tau-b by hand: (C - D) / sqrt((n0-n1)(n0-n2))
    assert row["spearman"] == pytest.approx(np.corrcoef([1, 2.5, 2.5, 4], [1, 2, 3, 4])[0, 1])
    # A constant score: correlations undefined (NaN), never a crash.
    const = correlation_row([1, 1, 1], [1, 2, 3])
    assert np.isnan(const["pearson"]) and np.isnan(const["weighted_tau"])


def test_weighted_tau_equals_scipy_on_random_vectors():
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(3, 30))
        x, y = rng.normal(size=n), rng.normal(size=n)
        assert correlation_row(x, y)["weighted_tau"] == pytest.approx(stats.weightedtau(x, y)[0], abs=1e-12)
    s = _summary({"logme": [0.3, 0.1, 0.4, 0.2, 0.9, 0.5]}, [70, 60, 65, 50, 80, 90])
    row = score_target_correlations(s, target="acc@1")[0].iloc[0]
    assert row["weighted_tau"] == pytest.approx(stats.weightedtau([0.3, 0.1, 0.4, 0.2, 0.9, 0.5],
                                                                  [70, 60, 65, 50, 80, 90])[0])


def test_top_k_and_rel_top1_by_hand():
    score = np.array([0.9, 0.8, 0.7, 0.1, 0.5])
    target = np.array([60.0, 70.0, 90.0, 40.0, 50.0])  # best fine-tuned: index 2, the score's 3rd
    assert not top_k_hit(score, target, 1)
    assert not top_k_hit(score, target, 2)
    assert top_k_hit(score, target, 3)
    assert rel_top1(score, target) == pytest.approx(60 / 90)
    # A tie for the top score: the pick is the mean of the tied targets; ties at the cut count as top-1.
    tie = np.array([0.9, 0.9, 0.1])
    assert rel_top1(tie, np.array([40.0, 80.0, 20.0])) == pytest.approx(60 / 80)
    assert top_k_hit(tie, np.array([40.0, 80.0, 20.0]), 1)
    # Lower-is-better target (turned to higher-is-better by negation): best ÷ pick on the original values.
    loss = np.array([2.0, 1.0, 4.0])
    assert rel_top1(np.array([3.0, 2.0, 1.0]), -loss, False, loss) == pytest.approx(1.0 / 2.0)


def test_fewer_than_three_encoders_gives_no_row():
    s = _summary({"logme": [1, 2]}, [10, 20])
    corr, _ = score_target_correlations(s, target="acc@1")
    assert corr.empty and list(corr.columns) == COLUMNS


def test_unknown_target_metric_is_a_clear_error():
    s = _summary({"logme": [1, 2, 3]}, [10, 20, 30])
    with pytest.raises(ValueError, match=r"unknown target metric\(s\) \['acc@5'\].*acc@1"):
        score_target_correlations(s, target="acc@5")


def test_default_target_is_the_representative_metric():
    s = _summary({"logme": [1, 2, 3]}, [10, 20, 30])
    corr, _ = score_target_correlations(s)
    assert list(corr["target_metric"]) == ["acc@1"]


def test_relative_accuracy_and_pooled_rows():
    a = _summary({"logme": [1, 2, 3, 4]}, [0.2, 0.3, 0.4, 0.5], dataset="ten", num_classes=10)
    b = _summary({"logme": [4, 3, 2, 1]}, [0.6, 0.7, 0.8, 0.9], dataset="two", num_classes=2)
    s = pd.concat([a, b], ignore_index=True)
    corr, pairs = score_target_correlations(s, target="acc@1", relative=True)
    ten = pairs[pairs.dataset == "ten"].sort_values("encoder")
    assert ten["target"].to_numpy() == pytest.approx([(x - 0.1) / 0.1 for x in (0.2, 0.3, 0.4, 0.5)])
    per = corr[corr.dataset != "ALL"].set_index("dataset")
    assert per.loc["ten", "spearman"] == pytest.approx(1.0) and per.loc["two", "spearman"] == pytest.approx(-1.0)
    assert per.loc["ten", "rel_top1"] == pytest.approx(1.0)
    assert per.loc["two", "rel_top1"] == pytest.approx(((0.6 - 0.5) / 0.5) / ((0.9 - 0.5) / 0.5))
    assert (corr["dataset"] == "ALL").sum() == 1
    with pytest.raises(ValueError, match="number of classes"):
        score_target_correlations(_summary({"logme": [1, 2, 3]}, [0.1, 0.2, 0.3]), relative=True)


def test_a_degenerate_score_is_marked_beside_its_correlation(tmp_path):
    """gate-score marks a score that cannot discriminate on its rows (facts.degenerate, e.g. SFDA where the features'
    rank reaches rows − classes); correlations.csv says on how many encoders, beside the number."""
    from gate.analysis.load import load_results
    from gate.results import Record, ResultsStore

    store = ResultsStore(tmp_path / "records.jsonl")
    why = "feature rank 499 ≥ 500 rows − 10 classes"
    for i, enc in enumerate(["a", "b", "c", "d"]):
        common = dict(encoder=enc, dataset="digits", task="classification", seed=0,
                      config={"dataset": {"name": "digits", "num_classes": 10}, "encoder": {"name": enc}})
        store.append_set([Record(experiment=f"ft-{enc}", kind="finetune", adapter="x", recipe="conv", split="test",
                                 metric="acc@1", value=0.5 + 0.1 * i, **common)])
        store.append_set([Record(experiment=f"sc-{enc}", kind="score", adapter="", recipe="", split="train",
                                 metric="sfda", value=1.0 if i < 2 else 0.5 + 0.1 * i, **common)],
                         facts={"degenerate": why} if i < 2 else {})
    corr, pairs = score_target_correlations(summarize(load_results(store.path).long), target="acc@1")
    assert corr.set_index("score_metric").loc["sfda", "degenerate"] == f"on 2 of 4 encoders: {why}"
    assert pairs["degenerate"].tolist().count(why) == 2
