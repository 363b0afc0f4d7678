"""gate-rank's output folder, ``<paths.reports>/rank-<tier>-<key>/``: its key is the request's identity (every
setting of conf/rank.yaml but the run-only ones, the tier as loaded and expanded), so two requests
that can give different files never share a folder; and the folder is written as one set of files (a failure leaves
the old set, a rerun leaves no file of the old set behind)."""

from __future__ import annotations

import copy
import types

import pandas as pd
import pytest
import yaml
from omegaconf import OmegaConf

from gate.ranking import stage
from gate.ranking.budget import Ledger
from gate.ranking.pipeline import RankResult
from gate.ranking.plan import Plan

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
    "budget": 0.2, "proxy_benchmarks": None, "run_fraction": 0.5, "halving": "contested", "history": ["store"],
    "min_per_family": 0,
    "val_points": 3, "prior": ["logme"], "static": [], "baseline_scores": ["logme"], "use_full_runs": False,
    "validate": False, "n_boot": 50,
    # these change the plan: expanded again
    "encoders": list(reversed(POOL)),
    "overrides": ["data.max_train_samples=40"],
    "proxy_seeds": [7, 8],
    "tier_file": "reordered",                   # the same name and experiments, the benchmarks in another order
}
REPLANNED = ("encoders", "overrides", "proxy_seeds", "tier_file")


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


def _result(validation: bool) -> RankResult:
    encs = ["a", "b", "c"]
    ranking = pd.DataFrame({"mean_rank": [1.0, 2.0, 3.0], "rank": [1.0, 2.0, 3.0]}, index=encs)
    plan = Plan("proxy", (), ("x",), (100,), 0.5, 0.0, 30.0, 60.0, 600.0, "the proxy as wanted")
    predictions = pd.DataFrame([{"encoder": e, "benchmark": "x", "value": v, "source": "observed"}
                                for e, v in zip(encs, (0.9, 0.5, 0.1))])
    result = RankResult(ranking, "proxy", "one seed", plan, None, [], predictions, pd.DataFrame({100: [1.0, 2.0, 3.0]},
                                                                                                index=encs),
                        None, {}, {}, {}, Ledger({"run 1": 20.0}, {"run 1": 30.0}, {"a × x": 600.0}), [], [])
    if validation:
        result.validation = pd.DataFrame([{"method": "v2", "tau": 1.0, "tau_w": 1.0, "regret": 0.0, "top3_recall": 1.0,
                                           "degenerate": ""}])
        result.ceiling = {"n_seeds": 2, "one_seed_vs_rest": 0.8, "v2_vs_rest": 1.0, "ratio": 1.25}
        result.paired = pd.DataFrame(columns=["baseline", "tau_difference", "lo", "hi", "p_v2_not_better", "draws"])
    return result


class _Plan:
    encoders = ("a", "b", "c")

    class tier:
        name = "t"


def test_the_folder_is_replaced_as_a_whole(tmp_path, monkeypatch):
    out = tmp_path / "reports" / "rank-t-0000"
    prepared = stage.Prepared(_Plan, None)
    files = stage.write(_result(validation=True), prepared, out, report=False)
    assert set(files) == {"predictions", "tier_ranking", "seeds", "cost", "ledger", "validation", "ceiling", "paired"}
    assert all(p.parent == out and p.is_file() for p in files.values())
    # the same request again, now without full results to validate against: no validation.csv of the first run stays
    files = stage.write(_result(validation=False), prepared, out, report=False)
    assert "validation" not in files and not (out / "validation.csv").exists() and not (out / "ceiling.json").exists()
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    # a failure while writing (a full disk, a kill) leaves the old set untouched, and no staging folder behind
    def broken(result, staging):
        (staging / "predictions.csv").write_text("half")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(stage, "write_outputs", broken)
    with pytest.raises(OSError):
        stage.write(_result(validation=True), prepared, out, report=False)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["rank-t-0000"]


def test_a_benchmark_a_re_plan_added_is_named_as_run_in_the_printout_and_selection_csv(tmp_path, capsys):
    """Pool C on a GPU (docs/ranking.md): the rule chose fmnist_video_speed, the re-plan on the measured costs added
    fmnist_video and its runs entered the ranking, yet the printout and selection.csv named only the chosen one."""
    from gate.ranking.pipeline import ADDED_WHY
    from gate.ranking.proxy import ProxyRun
    from gate.ranking.select import Selection

    sel = Selection(("speed", "seg"), "rule", {"speed": "the cheapest", "seg": "one per family"}, float("nan"),
                    float("nan"), float("nan"), {}, "f00", 0)

    def run(enc, bench):
        return ProxyRun(enc, bench, 100, 64, f"{enc}-{bench}", "mae", False, 1.0, 1.0, 1.0, 1.0, "last value", 5.0,
                        5.0, False, {})

    result = _result(validation=False)
    result.selection = sel
    result.runs = [run(e, b) for b in ("speed", "video") for e in ("a", "b", "c")]  # seg dropped, video added
    assert result.benchmarks_run == ["speed", "video"]
    stage.print_result(stage.RankRun(result, tmp_path, {}), stage.Prepared(_Plan, None))
    printed = capsys.readouterr().out.splitlines()
    line = next(x for x in printed if x.startswith("[gate] benchmarks run:"))
    assert line.startswith("[gate] benchmarks run: speed, video (rule: speed, seg; added when re-planned: video; "
                           "chosen, not run: seg;"), line
    # the rule (no usable history) says what it cannot see and how to choose instead, on the next line
    hint = printed[printed.index(line) + 1]
    assert hint.startswith("[gate] rule: no usable history") and "proxy_benchmarks=[…]" in hint, hint
    request = types.SimpleNamespace(budget=0.1)
    files = stage.write(result, stage.Prepared(_Plan, request), tmp_path / "rank-t-0001", report=True)
    table = pd.read_csv(files["selection"]).set_index("benchmark")
    assert table.loc[["speed", "seg", "video"], "chosen"].tolist() == [True, True, False]
    assert table.loc[["speed", "seg", "video"], "ran"].tolist() == [True, False, True]
    assert table.loc["video", "why"] == ADDED_WHY and table.loc["seg", "why"] == "one per family"
    assert "added when re-planned" in files["report"].read_text()
