import json
import os

import pytest

from gate.results import FIELDS, Record, ResultsStore, experiment_id, read_jsonl


def record(**overrides):
    base = dict(experiment="e1", kind="finetune", encoder="enc", dataset="digits", task="classification",
                adapter="linear_classifier", recipe="conv", seed=0, split="test", metric="acc@1", value=0.5,
                higher_is_better=True)
    return Record(**{**base, **overrides})


def test_schema_is_the_design_contract():
    assert FIELDS == ("experiment", "kind", "encoder", "dataset", "task", "adapter", "recipe", "seed", "split",
                      "metric", "value", "higher_is_better", "timestamp", "git", "config")


def test_append_and_read_back(tmp_path):
    store = ResultsStore(tmp_path / "r" / "records.jsonl")
    assert store.records() == []
    assert store.append([record(), record(metric="acc@5", value=0.9)]) == 2
    rows = store.records()
    assert [r["metric"] for r in rows] == ["acc@1", "acc@5"]
    assert rows[0]["value"] == 0.5 and rows[0]["timestamp"]
    assert store.has_experiment("e1", kind="finetune") and not store.has_experiment("e1", kind="score")


def test_a_torn_last_line_is_skipped_with_a_warning_and_never_glued_to(tmp_path):
    store = ResultsStore(tmp_path / "records.jsonl")
    store.append([record()])
    with open(store.path, "a") as fh:  # a writer that crashed mid-line
        fh.write('{"experiment": "e2", "kind": "fin')
    store.append([record(experiment="e3")])
    with pytest.warns(UserWarning, match=r"records.jsonl:2: skipping corrupt record line"):
        rows = store.records()
    assert [r["experiment"] for r in rows] == ["e1", "e3"]


def test_bad_records_are_refused():
    with pytest.raises(ValueError, match="kind"):
        record(kind="bogus")
    with pytest.raises(ValueError, match="NaN"):
        record(value=float("nan"))
    with pytest.raises(ValueError, match="metric"):
        record(metric="")


def test_experiment_id_is_stable_and_ignores_run_only_keys():
    cfg = {"encoder": {"name": "a"}, "seed": 0, "paths": {"root": "/x"}, "logger": {"mode": "offline"}}
    same = {"seed": 0, "encoder": {"name": "a"}, "paths": {"root": "/elsewhere"}, "logger": None}
    assert experiment_id(cfg) == experiment_id(same)
    assert experiment_id(cfg) != experiment_id({**cfg, "seed": 1})
    quiet = {**cfg, "trainer": {"max_steps": 5, "enable_progress_bar": False}}
    assert experiment_id(quiet) == experiment_id({**cfg, "trainer": {"max_steps": 5, "enable_progress_bar": True}})
    assert experiment_id(quiet) != experiment_id({**cfg, "trainer": {"max_steps": 6, "enable_progress_bar": False}})
    assert len(experiment_id(cfg)) == 16


def test_concurrent_appends_never_interleave(tmp_path):
    path = tmp_path / "records.jsonl"
    pids = []
    for worker in range(4):
        pid = os.fork()
        if pid == 0:
            store = ResultsStore(path)
            for i in range(25):
                store.append([record(experiment=f"w{worker}", seed=i, config={"pad": "x" * 5000})])
            os._exit(0)
        pids.append(pid)
    for pid in pids:
        assert os.waitpid(pid, 0)[1] == 0
    rows = list(read_jsonl(path))
    assert len(rows) == 100
    assert all(json.dumps(r) for r in rows)
