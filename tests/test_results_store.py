import json
import os
from pathlib import Path

import pytest

from gate.errors import GateError
from gate.results import FIELDS, ExperimentLock, Record, ResultsStore, experiment_id, identity, protocol, read_jsonl


def record(**overrides):
    base = dict(experiment="e1", kind="finetune", encoder="enc", dataset="digits", task="classification",
                adapter="linear_classifier", recipe="conv", seed=0, split="test", metric="acc@1", value=0.5,
                higher_is_better=True)
    return Record(**{**base, **overrides})


def test_schema_is_the_design_contract():
    assert FIELDS == ("experiment", "kind", "encoder", "dataset", "task", "adapter", "recipe", "seed", "split",
                      "metric", "value", "higher_is_better", "timestamp", "git", "config", "attempt", "set_size",
                      "facts")


def test_append_and_read_back(tmp_path):
    store = ResultsStore(tmp_path / "r" / "records.jsonl")
    assert store.records() == []
    assert store.append([record(), record(metric="acc@5", value=0.9)]) == 2
    rows = store.records()
    assert [r["metric"] for r in rows] == ["acc@1", "acc@5"]
    assert rows[0]["value"] == 0.5 and rows[0]["timestamp"]
    assert store.has_experiment("e1", kind="finetune") and not store.has_experiment("e1", kind="score")


def test_to_frame_is_the_stores_records_as_a_table(tmp_path):
    """The README's ``df = ResultsStore(...).to_frame()``: one row per record with the schema's columns, the values
    as stored; an empty store is an empty table that still has every column."""
    store = ResultsStore(tmp_path / "records.jsonl")
    empty = store.to_frame()
    assert empty.empty and list(empty.columns) == list(FIELDS)
    store.append_set([record(), record(metric="acc@5", value=0.9), record(split="val", value=0.25)])
    df = store.to_frame()
    assert set(FIELDS) <= set(df.columns) and len(df) == 3
    assert df[["split", "metric", "value"]].values.tolist() == [["test", "acc@1", 0.5], ["test", "acc@5", 0.9],
                                                                 ["val", "acc@1", 0.25]]
    assert df["higher_is_better"].tolist() == [True, True, True] and (df["set_size"] == 3).all()
    assert df.groupby("metric")["value"].mean().to_dict() == {"acc@1": 0.375, "acc@5": 0.9}

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
    with pytest.raises(ValueError, match="non-finite"):
        record(value=float("nan"))
    with pytest.raises(ValueError, match="non-finite"):
        record(value=float("inf"))
    with pytest.raises(ValueError, match="lower-is-better in the metric registry"):
        record(metric="loss", higher_is_better=True)
    with pytest.raises(ValueError, match="not in the metric registry"):
        Record(**{**record().to_dict(), "metric": "my_new_metric", "higher_is_better": None})
    with pytest.raises(ValueError, match="metric"):
        record(metric="")


def test_experiment_id_is_stable_and_ignores_run_only_keys():
    cfg = {"encoder": {"name": "a"}, "seed": 0, "paths": {"root": "/x"}, "logger": {"mode": "offline"}}
    same = {"seed": 0, "encoder": {"name": "a"}, "paths": {"root": "/elsewhere"}, "logger": None}
    assert experiment_id(cfg, "finetune") == experiment_id(same, "finetune")
    assert experiment_id(cfg, "finetune") != experiment_id({**cfg, "seed": 1}, "finetune")
    quiet = {**cfg, "trainer": {"max_steps": 5, "enable_progress_bar": False}}
    loud = {**cfg, "trainer": {"max_steps": 5, "enable_progress_bar": True}}
    assert experiment_id(quiet, "finetune") == experiment_id(loud, "finetune")
    longer = {**cfg, "trainer": {"max_steps": 6, "enable_progress_bar": False}}
    assert experiment_id(quiet, "finetune") != experiment_id(longer, "finetune")
    assert len(experiment_id(cfg, "finetune")) == 16
    # Which scores to compute is not part of a score experiment; for a fine-tune there is no such key.
    assert experiment_id({**cfg, "metrics": ["logme"]}, "score") == experiment_id(cfg, "score")
    assert identity({**cfg, "metrics": ["logme"]}, "score") == identity(cfg, "score")
    with pytest.raises(ValueError, match="kind"):
        experiment_id(cfg, "bogus")


def test_protocol_leaves_out_seed_and_entrant():
    cfg = {"encoder": {"name": "a"}, "recipe": {"name": "conv"}, "seed": 3, "image_size": 64, "paths": {"root": "/x"}}
    assert protocol(cfg, "finetune") == {"image_size": 64}


def test_a_non_utf8_line_is_skipped_with_a_warning(tmp_path):
    store = ResultsStore(tmp_path / "records.jsonl")
    store.append([record()])
    with open(store.path, "ab") as fh:
        fh.write(b'{"experiment": "\xff\xfe bad"}\n')
    store.append([record(experiment="e3")])
    with pytest.warns(UserWarning, match=r"records.jsonl:2: skipping a record line that is not UTF-8"):
        rows = store.records()
    assert [r["experiment"] for r in rows] == ["e1", "e3"]


def test_a_torn_record_set_does_not_count_as_done(tmp_path):
    store = ResultsStore(tmp_path / "records.jsonl")
    store.append_set([record(experiment="whole"), record(experiment="whole", metric="acc@5")],
                     facts={"wall_seconds": 1.0})
    assert store.has_experiment("whole", "finetune")
    rows = store.records()
    assert {r["set_size"] for r in rows} == {2} and len({r["attempt"] for r in rows}) == 1
    assert rows[0]["facts"] == {"wall_seconds": 1.0}
    # A crash mid-append: the first record of a two-record set landed, the second was cut short.
    store.append_set([record(experiment="torn"), record(experiment="torn", metric="acc@5")])
    text = store.path.read_bytes()
    cut = text.rindex(b"\n", 0, len(text) - 1) + 1  # the start of the set's last line
    store.path.write_bytes(text[:cut] + text[cut:][:40])
    with pytest.warns(UserWarning, match="corrupt"):
        assert not store.has_experiment("torn", "finetune")
    with pytest.warns(UserWarning, match="corrupt"):
        assert [r["metric"] for r in store.complete_records("torn")] == []
    with pytest.warns(UserWarning, match="corrupt"):
        assert store.has_experiment("whole", "finetune")
    # Legacy records (no set size) are trusted.
    store.append([record(experiment="legacy")])
    with pytest.warns(UserWarning, match="corrupt"):
        assert store.has_experiment("legacy")


def test_experiment_lock_keeps_twins_apart_and_is_released(tmp_path):
    with ExperimentLock(tmp_path / "run", "abc"):
        with pytest.raises(GateError, match=r"experiment abc is already running \(pid \d+"):
            with ExperimentLock(tmp_path / "run", "abc"):
                pass
    with ExperimentLock(tmp_path / "run", "abc"):  # released on exit
        pass
    # A holder that dies releases the lock (the OS drops flocks of dead processes).
    pid = os.fork()
    if pid == 0:
        lock = ExperimentLock(tmp_path / "run", "abc").__enter__()  # noqa: F841 - held until _exit
        os._exit(0)
    assert os.waitpid(pid, 0)[1] == 0
    with ExperimentLock(tmp_path / "run", "abc"):
        pass


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


# Ids computed by the code before issue 16's renames (commit 3ffa028: dataset/encoder `family`, dataset `protocol`, the
# HF towers' `architecture`, loaders under gate.data.benchmarks). A user's store holds experiments under these ids: a
# rename that changed them would re-run a whole tier and split gate-analysis' variants.
PINNED_IDS = {
    ("run", ("dataset=cifar100",)): "52175dc14970db57",
    ("run", ("dataset=ade20k",)): "22208e90a05624f0",
    ("run", ("dataset=fmnist_fewshot",)): "0dc89efe23789375",
    ("run", ("dataset=digits", "encoder=clip_vitb16")): "d20d631849b976e3",
    ("run", ("dataset=digits", "encoder=siglip_vitb16")): "3ee4830859a42cef",
    ("run", ("dataset=digits", "encoder=efficientnet_lite0")): "4b7de0601056fca1",
    ("score", ("dataset=cifar100", "encoder=bert_base")): "ced506ee1e2b7c78",
}


@pytest.mark.parametrize(("config_name", "overrides"), sorted(PINNED_IDS), ids=lambda v: v if isinstance(v, str) else "-".join(v))
def test_renamed_keys_and_modules_keep_every_stored_experiment_id(config_name, overrides, tmp_path):
    from gate.engine.validate import resolved_config

    from helpers import compose_run

    kind = "finetune" if config_name == "run" else "score"
    cfg = compose_run(Path("/tmp/x"), list(overrides), config_name=config_name)
    assert experiment_id(resolved_config(cfg), kind) == PINNED_IDS[(config_name, overrides)]


def test_evaluate_test_at_its_default_keeps_every_existing_experiment_id(tmp_path):
    """evaluate_test was added to conf/run.yaml after stores already held experiments: at its default (true) it is
    left out of the identity, so the id of a default config equals the id computed before the key existed (the same
    config without it); false is another experiment."""
    from gate.engine.validate import resolved_config

    from helpers import FAST, compose_run

    config = resolved_config(compose_run(tmp_path, FAST))
    assert config["evaluate_test"] is True
    before = {k: v for k, v in config.items() if k != "evaluate_test"}  # what every config held before the key
    assert experiment_id(config, "finetune") == experiment_id(before, "finetune")
    assert identity(config, "finetune") == identity(before, "finetune")
    val_only = {**config, "evaluate_test": False}
    assert experiment_id(val_only, "finetune") != experiment_id(config, "finetune")
    assert identity(val_only, "finetune")["evaluate_test"] is False
