"""Reading results (JSONL records, long CSV, the paper's wide CSV), validation and seed averaging."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from gate.analysis.load import from_frame, load_results, summarize
from gate.analysis.meta import default_paper_table
from gate.metrics import guess_higher_is_better
from gate.results import Record, ResultsStore

PAPER = default_paper_table()


def _rec(encoder="r18", dataset="digits", metric="acc@1", value=0.9, seed=0, kind="finetune", split="test",
         experiment=None, timestamp="", hib=True, recipe="conv", config=None):
    cfg = config if config is not None else {"dataset": {"name": dataset, "num_classes": 10, "paper_group": "Img Class"},
                                             "recipe": {"name": recipe}, "encoder": {"name": encoder}, "seed": seed}
    return Record(experiment=experiment or f"{encoder}-{dataset}-{seed}-{recipe}", kind=kind, encoder=encoder,
                  dataset=dataset, task="classification", adapter="linear", recipe=recipe, seed=seed, split=split,
                  metric=metric, value=value, higher_is_better=hib, timestamp=timestamp, config=cfg)


def test_paper_table_loads_with_aggregates_kept_apart():
    loaded = load_results(PAPER)
    assert loaded.format == "wide-csv"
    long = loaded.long
    assert long["encoder"].nunique() == 21
    assert long["dataset"].nunique() == 31
    assert len(long) == 175 * 21  # 192 rows - 17 aggregate rows, no missing values
    assert set(long["kind"]) == {"finetune"}
    assert loaded.aggregates is not None and len(loaded.aggregates) == 17
    assert "Small GATE Mean" in set(loaded.aggregates["metric"])
    loss = long[(long["dataset"] == "cifar100") & (long["metric"] == "CIFAR-100 Loss")]
    assert not loss["higher_is_better"].any()
    assert float(long[(long.dataset == "cifar100") & (long.metric == "CIFAR-100 Acc@1") & (long.encoder == "clip")]
                 ["value"].iloc[0]) == 76.9


def test_jsonl_with_a_corrupt_line_keeps_the_rest(tmp_path):
    store = ResultsStore(tmp_path / "records.jsonl")
    store.append([_rec(encoder="a", value=0.5), _rec(encoder="b", value=0.7)])
    with open(store.path, "a") as fh:
        fh.write('{"experiment": "broken", "kind": "fine\n')
    store.append([_rec(encoder="c", value=0.9)])
    with pytest.warns(UserWarning, match=r"records.jsonl:3: skipping corrupt record line"):
        loaded = load_results(store.path)
    assert sorted(loaded.long["encoder"]) == ["a", "b", "c"]
    assert loaded.long["num_classes"].iloc[0] == 10
    assert loaded.long["paper_group"].iloc[0] == "Img Class"


def test_seeds_are_averaged_and_the_latest_duplicate_wins(tmp_path):
    store = ResultsStore(tmp_path / "r.jsonl")
    store.append([
        _rec(seed=0, value=0.80, timestamp="2024-01-01T00:00:00+00:00"),
        _rec(seed=1, value=0.90, timestamp="2024-01-01T00:00:00+00:00"),
        _rec(seed=1, value=0.70, timestamp="2024-01-02T00:00:00+00:00"),  # rerun of seed 1: wins
        _rec(seed=2, value=0.60, timestamp="2024-01-01T00:00:00+00:00"),
    ])
    s = summarize(load_results(store.path).long)
    row = s[(s.encoder == "r18") & (s.metric == "acc@1")].iloc[0]
    assert row["n"] == 3
    assert row["mean"] == pytest.approx(np.mean([0.8, 0.7, 0.6]))
    assert row["std"] == pytest.approx(np.std([0.8, 0.7, 0.6], ddof=1))


def test_split_filter_and_variants_kept_apart(tmp_path):
    store = ResultsStore(tmp_path / "r.jsonl")
    bigger = {"dataset": {"name": "digits", "num_classes": 10, "paper_group": "Img Class"}, "recipe": {"name": "conv"},
              "encoder": {"name": "r18"}, "seed": 0, "image_size": 64}
    store.append([_rec(value=0.8), _rec(value=0.5, split="val"), _rec(value=0.6, config=bigger, experiment="big"),
                  _rec(encoder="vit", value=0.7)])
    with pytest.warns(UserWarning, match="2 different protocols"):
        s = summarize(load_results(store.path).long, split="test")
    # The main variant (more encoders) keeps the bare name; the other is labelled by what differs.
    assert sorted(s["benchmark"]) == ["digits", "digits", "digits[image_size=64]"]
    assert dict(zip(s["benchmark"], s["main_variant"])) == {"digits": True, "digits[image_size=64]": False}
    assert set(s["split"]) == {"test"}
    with pytest.raises(ValueError, match="no fine-tuning results on split 'train'"):
        summarize(load_results(store.path).long, split="train")


def test_long_csv_minimal_columns_and_direction_from_the_registry(tmp_path):
    p = tmp_path / "theirs.csv"
    pd.DataFrame({"encoder": ["a", "a", "b", "b"], "dataset": ["x"] * 4, "metric": ["acc", "loss"] * 2,
                  "value": [0.5, 1.2, 0.7, 0.9]}).to_csv(p, index=False)
    # "loss" is registered (no guess); "acc" is not: guessed from its name, with a warning naming it.
    with pytest.warns(UserWarning, match=r"metric\(s\) \['acc'\] are not in the registry") as caught:
        loaded = load_results(p)
    assert not any("'loss'" in str(w.message) for w in caught)
    assert loaded.format == "long-csv"
    assert dict(zip(loaded.long["metric"], loaded.long["higher_is_better"])) == {"acc": True, "loss": False}
    assert set(loaded.long["kind"]) == {"finetune"}


@pytest.mark.parametrize("name", ["Loss", "IWildCam MAE Score", "Chexpert 0 BS", "Full GATE Rank", "coral",
                                  "brier", "mse"])
def test_lower_is_better_names(name):
    assert not guess_higher_is_better(name)


@pytest.mark.parametrize("name", ["acc@1", "CIFAR-100 Acc@1", "ADE20K mIoU", "logme", "leep", "Chexpert AUC Macro",
                                  "ACDC Dice Score", "h_score", "rankme"])
def test_higher_is_better_names(name):
    assert guess_higher_is_better(name)


def test_csv_missing_required_columns_is_a_clear_error(tmp_path):
    p = tmp_path / "bad.csv"
    pd.DataFrame({"encoder": ["a"], "dataset": ["x"], "score": [1.0]}).to_csv(p, index=False)
    with pytest.raises(ValueError, match=r"missing required column\(s\) \['metric', 'value'\]"):
        load_results(p)


def test_empty_inputs_are_clear_errors(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(ValueError, match="empty"):
        load_results(empty)
    header_only = tmp_path / "header.csv"
    header_only.write_text("encoder,dataset,metric,value\n")
    with pytest.raises(ValueError, match="empty"):
        load_results(header_only)
    wide_all_missing = tmp_path / "wide.csv"
    wide_all_missing.write_text("paper_group,dataset,metric,higher_is_better,a,b\nF,x,acc,true,,\n")
    with pytest.warns(UserWarning, match="no value for any encoder"), pytest.raises(ValueError, match="empty"):
        load_results(wide_all_missing)
    jsonl = tmp_path / "r.jsonl"
    jsonl.write_text("not json\n")
    with pytest.warns(UserWarning), pytest.raises(ValueError, match="no readable records"):
        load_results(jsonl)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_results(tmp_path / "nope.jsonl")


def test_bad_values_are_clear_errors(tmp_path):
    p = tmp_path / "bad.csv"
    pd.DataFrame({"encoder": ["a"], "dataset": ["x"], "metric": ["acc"], "value": ["high"]}).to_csv(p, index=False)
    with pytest.raises(ValueError, match="non-numbers"):
        load_results(p)
    p2 = tmp_path / "kind.csv"
    pd.DataFrame({"encoder": ["a"], "dataset": ["x"], "metric": ["acc"], "value": [1.0],
                  "kind": ["eval"]}).to_csv(p2, index=False)
    with pytest.raises(ValueError, match="kind"):
        load_results(p2)


def test_mixed_direction_for_one_metric_is_refused():
    frame = pd.DataFrame({"encoder": ["a", "b"], "dataset": ["x", "x"], "metric": ["acc", "acc"],
                          "value": [1.0, 2.0], "higher_is_better": [True, False]})
    with pytest.raises(ValueError, match="both as higher- and as lower-is-better"):
        summarize(from_frame(frame).long)


def test_wide_table_round_trip(tmp_path):
    from gate.analysis.table import wide_table

    s = summarize(load_results(PAPER).long)
    wide = wide_table(s)
    p = tmp_path / "table.csv"
    wide.to_csv(p, index=False)
    s2 = summarize(load_results(p).long)
    pd.testing.assert_frame_equal(s.reset_index(drop=True)[["encoder", "benchmark", "metric", "mean"]],
                                  s2.reset_index(drop=True)[["encoder", "benchmark", "metric", "mean"]])
    raw = json.loads(json.dumps(list(wide.columns[:4])))
    assert raw == ["paper_group", "dataset", "metric", "higher_is_better"]


REGISTERED = {"rankme": True, "logme": True, "acc@1": True, "cmd": False, "ot": False, "kld": False, "wd": False,
              "loss": False}


def test_registered_metrics_get_the_registry_direction_without_a_guess(tmp_path):
    """A CSV without a direction column: the registry decides (the old name regex called rankme lower- and the
    discrepancies cmd/ot/kld/wd higher-is-better, flipping their correlations); only unknown names are guessed."""
    p = tmp_path / "scores.csv"
    names = list(REGISTERED) + ["my_score", "my_error"]
    rows = [{"encoder": e, "dataset": "digits", "metric": m, "value": v + i,
             "kind": "finetune" if m in ("acc@1", "loss") else "score"}
            for i, m in enumerate(names) for e, v in (("a", 0.1), ("b", 0.2))]
    pd.DataFrame(rows).to_csv(p, index=False)
    with pytest.warns(UserWarning, match=r"metric\(s\) \['my_error', 'my_score'\] are not in the registry") as caught:
        loaded = load_results(p)
    directions = dict(zip(loaded.long["metric"], loaded.long["higher_is_better"]))
    assert {m: directions[m] for m in REGISTERED} == REGISTERED
    assert directions["my_score"] is True and directions["my_error"] is False  # the name-pattern guess
    for w in caught:  # no registered name is mentioned as guessed
        text = str(w.message)
        assert not any(f"'{m}'" in text for m in REGISTERED), text


def test_a_file_contradicting_the_registry_is_overruled_with_a_warning(tmp_path):
    old = tmp_path / "old.jsonl"  # written by old code (a Record refuses this today): raw lines
    good = _rec(encoder="a", metric="coral", value=0.1, kind="score", hib=False).to_dict()
    rows = [{**good, "encoder": e, "metric": "rankme", "value": v, "higher_is_better": False}
            for e, v in (("a", 3.0), ("b", 5.0))] + [good]
    old.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.warns(UserWarning, match=r"higher_is_better of metric\(s\) \['rankme'\] contradicts the registry"):
        loaded = load_results(old)
    assert dict(zip(loaded.long["metric"], loaded.long["higher_is_better"])) == {"rankme": True, "coral": False}
    wide = tmp_path / "wide.csv"
    wide.write_text("paper_group,dataset,metric,higher_is_better,a,b\nF,x,loss,true,1,2\nF,x,My Thing,false,3,4\n")
    with pytest.warns(UserWarning, match=r"\['loss'\] contradicts the registry"):
        long = load_results(wide).long
    assert dict(zip(long["metric"], long["higher_is_better"])) == {"loss": False, "My Thing": False}


def test_a_store_with_nul_bytes_after_a_crash_keeps_its_good_records(tmp_path):
    """A crash can leave a run of NUL bytes in an append-only file: that line is skipped, not the file refused."""
    store = ResultsStore(tmp_path / "records.jsonl")
    store.append([_rec(encoder="a", value=0.5)])
    with open(store.path, "ab") as fh:
        fh.write(b"\x00" * 64 + b"\n")
    store.append([_rec(encoder="b", value=0.7)])
    with pytest.warns(UserWarning, match="records.jsonl:2"):
        loaded = load_results(store.path)
    assert sorted(loaded.long["encoder"]) == ["a", "b"]


def test_records_written_before_the_rename_keep_their_paper_group(tmp_path):
    """A store written before issue 16 names the paper group dataset.family: it is still read as the group (the
    same fact under its old key), so old results are not left out of the group means."""
    store = ResultsStore(tmp_path / "records.jsonl")
    old = {"dataset": {"name": "digits", "num_classes": 10, "family": "Img Class"}, "recipe": {"name": "conv"},
           "encoder": {"name": "a"}, "seed": 0}
    store.append([_rec(encoder="a", config=old, value=0.5), _rec(encoder="b", value=0.7)])
    assert load_results(store.path).long["paper_group"].tolist() == ["Img Class", "Img Class"]


@pytest.mark.parametrize("header", ["family,dataset,metric,higher_is_better,a\nF,x,acc@1,true,1\n",
                                    "family,encoder,dataset,metric,value\nF,a,x,acc@1,1\n"])
def test_a_table_with_the_old_family_column_reads_it_as_the_paper_group(tmp_path, header):
    """gate's tables before issue 16 name the paper group 'family': read as it was, a wide table would take it for
    an encoder (a long one's would be dropped); it is the same fact under its old name."""
    path = tmp_path / "old.csv"
    path.write_text(header)
    long = load_results(path).long
    assert long["encoder"].tolist() == ["a"] and long["paper_group"].tolist() == ["F"]
    both = tmp_path / "both.csv"
    both.write_text("family,paper_group,dataset,metric,higher_is_better,a\nF,F,x,acc@1,true,1\n")
    with pytest.raises(ValueError) as err:
        load_results(both)
    assert "\n" not in str(err.value) and "'family' is the old name of 'paper_group'" in str(err.value)
