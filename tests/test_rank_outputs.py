"""gate-rank's output folder, ``<paths.reports>/rank-<tier>-<key>/``: its key is the request's identity (every
setting of conf/rank.yaml but the run-only ones, the tier as loaded and expanded, the proxy's seed), so two requests
that can give different files never share a folder; and the folder is written as one set of files (a failure leaves
the old set, a rerun leaves no file of the old set behind)."""

from __future__ import annotations

import copy

import pandas as pd
import pytest
import yaml
from omegaconf import OmegaConf

from gate.ranking import stage
from gate.ranking.budget import Ledger
from gate.ranking.pipeline import RankResult
from gate.ranking.proxy import BenchmarkRanking
from gate.ranking.stats import rank_intervals

from helpers import compose_run

POOL = ["resnet18_scratch", "efficientnet_lite0"]
# two benchmarks and two seeds (6-step runs), so that the tier's order, the proxy's seed and the pool all matter
TIER = {"name": "pair", "seeds": [0, 1], "score": False,
        "overrides": {"logger": "csv", "image_size": 32, "trainer.max_steps": 6, "trainer.val_check_interval": 3,
                      "data.batch_size": 8, "data.max_train_samples": 48, "data.max_val_samples": 24,
                      "data.max_test_samples": 24},
        "benchmarks": ["digits", "fashion_mnist"]}

# One other value of every setting of the request that is part of its identity.
CHANGED = {
    "budget": 0.2, "proxy_benchmarks": None, "run_fraction": 0.5, "cost_probe_steps": 0, "eta": 3, "max_rungs": None,
    "overhead_steps": 2.0, "scores": ["knn_acc"], "baseline_scores": ["logme"], "use_full_runs": False,
    "validate": False, "proxy_without_scores": False, "n_boot": 50,
    # these change the plan: expanded again
    "encoders": list(reversed(POOL)),           # the same pool in another order: the cost probe's encoder is the first
    "overrides": ["data.max_train_samples=40"],
    "seed": 1,                                  # the proxy's seed (null: the tier's first, 0)
    "tier_file": "reordered",                   # the same name and experiments, the benchmarks in another order
}
REPLANNED = ("encoders", "overrides", "seed", "tier_file")


_COMPOSED: dict = {}  # tmp_path -> the request as composed once (a test asks for it a dozen times)


def _plain(tmp_path, **changes):
    if tmp_path not in _COMPOSED:
        tier = tmp_path / "pair.yaml"
        tier.write_text(yaml.safe_dump(TIER))
        cfg = compose_run(tmp_path / "root", [f"tier_file={tier}", f"encoders=[{','.join(POOL)}]"], config_name="rank")
        _COMPOSED[tmp_path] = OmegaConf.to_container(cfg, resolve=True)
    plain = copy.deepcopy(_COMPOSED[tmp_path])
    for key, value in changes.items():
        if key == "tier_file" and value == "reordered":
            other = tmp_path / "other" / "pair.yaml"
            other.parent.mkdir(exist_ok=True)
            other.write_text(yaml.safe_dump({**TIER, "benchmarks": list(reversed(TIER["benchmarks"]))}))
            value = str(other)
        plain[key] = value
    return plain


def test_every_setting_of_the_request_but_the_run_only_ones_gives_its_own_folder(tmp_path):
    base = _plain(tmp_path)
    # the test covers every declared setting: a new one must be given a value here (or be declared run-only)
    assert set(CHANGED) | set(stage.RUN_ONLY) | {"tier"} == set(base), sorted(set(base) ^ set(CHANGED))
    prepared = stage.prepare(base, [])
    folder = stage.output_dir(base, prepared)
    assert folder.parent == tmp_path / "root" / "reports" and folder.name.startswith("rank-pair-")
    assert stage.output_dir(_plain(tmp_path), stage.prepare(_plain(tmp_path), [])) == folder  # stable
    seen = {folder.name: "base"}
    for key, value in CHANGED.items():
        plain = _plain(tmp_path, **{key: value})
        other = stage.output_dir(plain, stage.prepare(plain, []) if key in REPLANNED else prepared)
        assert other.name not in seen, f"{key}={value!r} writes the folder of {seen[other.name]}"
        seen[other.name] = key
    # run-only: whether the page is written beside the tables, and where the outputs go
    assert stage.output_dir(_plain(tmp_path, report=False), prepared) == folder
    moved = _plain(tmp_path)
    moved["paths"] = {**moved["paths"], "reports": str(tmp_path / "elsewhere")}
    assert stage.output_dir(moved, prepared) == tmp_path / "elsewhere" / folder.name


def test_seed_null_and_the_tiers_first_seed_are_one_request(tmp_path):
    plain, explicit = _plain(tmp_path, seed=None), _plain(tmp_path, seed=0)
    assert stage.output_dir(plain, stage.prepare(plain, [])) == stage.output_dir(explicit, stage.prepare(explicit, []))


def _result(validation: bool) -> RankResult:
    encs = ["a", "b", "c"]
    rankings = {"x": BenchmarkRanking("x", "acc@1", True, 10, (2, 4), [], list(encs))}
    result = RankResult(rankings, Ledger({"run 1": 30.0}, {"a × x": 600.0}), pd.DataFrame(), [])
    result.tier_ranking = rank_intervals(result.predicted(), n_boot=10)
    if validation:
        result.validation = pd.DataFrame([{"method": "proxy", "scope": "tier", "tau": 1.0}])
        result.ceiling = {"tier": 1.0}
    return result


class _Plan:
    encoders = ("a", "b", "c")

    class tier:
        name = "t"


def test_the_folder_is_replaced_as_a_whole(tmp_path, monkeypatch):
    out = tmp_path / "reports" / "rank-t-0000"
    prepared = stage.Prepared(_Plan, None, 0)
    files = stage.write(_result(validation=True), prepared, out, report=False)
    assert set(files) == {"rungs", "predictions", "tier_ranking", "cost", "ledger", "validation", "ceiling"}
    assert all(p.parent == out and p.is_file() for p in files.values())
    # the same request again, now without full results to validate against: no validation.csv of the first run stays
    files = stage.write(_result(validation=False), prepared, out, report=False)
    assert "validation" not in files and not (out / "validation.csv").exists() and not (out / "ceiling.json").exists()
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    # a failure while writing (a full disk, a kill) leaves the old set untouched, and no staging folder behind
    def broken(result, staging):
        (staging / "rungs.csv").write_text("half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(stage, "write_outputs", broken)
    with pytest.raises(OSError):
        stage.write(_result(validation=True), prepared, out, report=False)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["rank-t-0000"]
