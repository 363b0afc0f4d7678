"""gate-rank's entry point: bad input is one line and exit 2 before any work (in process), and one real end-to-end
run of a tiny pool (in process), the rerun reading everything back from the store."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from helpers import call_cli, compose_run

# A tiny tier: scikit-learn digits at 32 px, batches of 8, 8 steps (the proxy's 10 % ... 50 %: a few steps).
TINY = {"name": "tiny", "seeds": [0], "score": False,
        "overrides": {"logger": "csv", "image_size": 32, "ensembles": [1], "trainer.max_steps": 8,
                      "trainer.val_check_interval": 4, "data.batch_size": 8, "data.max_train_samples": 48,
                      "data.max_val_samples": 24, "data.max_test_samples": 24, "callbacks.count_flops": False,
                      "callbacks.visuals.enabled": False, "callbacks.grad_norms.enabled": False},
        "benchmarks": ["digits"]}
POOL = "encoder=resnet18_scratch,vit_tiny_scratch,efficientnet_lite0"


def write_tier(path: Path, doc=None) -> Path:
    path.write_text(yaml.safe_dump(doc or TINY))
    return path


def rank_in_process(monkeypatch, capsys, args):
    from gate.cli import rank

    monkeypatch.setattr(sys, "argv", ["gate-rank", *args])
    monkeypatch.delenv("GATE_DEBUG", raising=False)
    with pytest.raises(SystemExit) as exit_:
        rank.main()
    err = capsys.readouterr().err.strip()
    return exit_.value.code, err


@pytest.mark.parametrize("args, message", [
    (["budget=1.5"], "budget=1.5 is invalid: expected a fraction of the full tier's compute, 0 < budget < 1"),
    (["budget=0"], "budget=0 is invalid"),
    (["budget=1"], "budget=1 is invalid"),
    (["budget=-0.1"], "budget=-0.1 is invalid"),
    (["budget=cheap"], "budget='cheap' is invalid"),
    (["encoder=resnet18_scratch,efficientnet_lite0"], "a ranking needs at least 3 distinct encoders"),
    (["encoder=resnet18_scratch,resnet18_scratch,efficientnet_lite0"], "a ranking needs at least 3 distinct encoders"),
    (["prior=[no_such_score]"], "prior: unknown score 'no_such_score'; known scores are ['logme'"),
    (["baseline_scores=[knn_acc,nope]"], "baseline_scores: unknown score 'nope'"),
    (["static=[params,height]"], "static: unknown fact 'height'; known: ['params', 'source_top1']"),
    (["overrides=['trainer.max_steps=1','trainer.val_check_interval=1']"],
     "has nothing the proxy can run for ['resnet18_scratch', 'vit_tiny_scratch', 'efficientnet_lite0']: digits: "
     "trainer.max_steps=1 (the proxy needs a step budget >= 2)"),
    # the proxy's runs never test, but the full experiments it is validated against must
    (["overrides=[evaluate_test=false]"], "evaluate_test=false is invalid in a tier"),
    (["proxy_benchmarks=[digits,nope]"], "proxy_benchmarks: 'nope' is not among the benchmarks the proxy can run"),
    (["proxy_benchmarks=0"], "proxy_benchmarks=0 is invalid"),
    (["run_fraction=1.5"], "run_fraction=1.5 is invalid"),
    (["min_per_family=-1"], "min_per_family=-1 is invalid"),
    (["val_points=1"], "val_points=1 is invalid"),
    (["proxy_seeds=[]"], "proxy_seeds=[] is invalid"),
    (["proxy_seeds=[100,100]"], "proxy_seeds=[100, 100] is invalid"),
    (["history=/no/such/table.csv"], "history='/no/such/table.csv': no such file"),
    (["history=[paper,nope]"], "history='nope': no such file"),
    (["seed=3"], "seed was replaced by proxy_seeds"),
    (["cost_probe_steps=4"], "cost_probe_steps was replaced by the cost model"),
    (["overhead_steps=2"], "overhead_steps was replaced by the cost model's fixed seconds per run"),
    (["max_rungs=2"], "max_rungs was replaced by halving=contested (v1's successive halving over every encoder was "
                      "removed"),
    (["halving=always"], "halving='always' is invalid"),
    (["encoder=resnet18_scratch,minilm,efficientnet_lite0", "static=[source_top1]"],
     "static=[source_top1]: encoder(s) minilm declare no source_top1"),
])
def test_bad_input_is_one_line_and_exit_2_before_any_work(tmp_path, monkeypatch, capsys, args, message):
    tier = write_tier(tmp_path / "tiny.yaml", dict(TINY, overrides={**TINY["overrides"], "trainer.max_steps": 6}))
    base = [f"tier={tier}", POOL, f"paths.root={tmp_path / 'root'}"]
    code, err = rank_in_process(monkeypatch, capsys, [*base, *args])
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("gate-rank: error: "), err
    assert message in err, err
    assert not (tmp_path / "root" / "runs").exists() and not (tmp_path / "root" / "results").exists()


def test_an_encoder_that_cannot_be_built_is_one_line_before_any_run(tmp_path, monkeypatch, capsys):
    """An encoder of your own config dir that cannot be built at the tier's image size (timm's test ViT is built for
    160 px; the tier runs 32 px): its proxy runs would fail. gate-rank used to plan with its parameters as NaN, fall
    to the static ranking, and die writing a NaN into ledger.json."""
    timm = (Path(__file__).resolve().parents[1] / "conf" / "encoder" / "timm.yaml").read_text()
    encoders = tmp_path / "my_configs" / "encoder"
    encoders.mkdir(parents=True)
    for model in ("test_resnet", "test_efficientnet", "test_vit"):
        (encoders / f"tiny_{model}.yaml").write_text(timm.replace("name: timm_${encoder.model_name}", f"name: tiny_{model}")
                                                     .replace("model_name: resnet50", f"model_name: {model}"))
    tier = write_tier(tmp_path / "tiny.yaml")
    code, err = rank_in_process(monkeypatch, capsys, [
        f"tier={tier}", "encoder=tiny_test_resnet,tiny_test_efficientnet,tiny_test_vit",
        f"hydra.searchpath=[file://{tmp_path / 'my_configs'}]", f"paths.root={tmp_path / 'root'}"])
    assert code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("gate-rank: error: encoder 'tiny_test_vit' cannot be built here") and "160 px" in err, err
    assert not (tmp_path / "root" / "runs").exists() and not (tmp_path / "root" / "reports").exists()


def test_unknown_tier_is_refused_before_hydra(monkeypatch, capsys, tmp_path):
    code, err = rank_in_process(monkeypatch, capsys, ["tier=nosuch", f"paths.root={tmp_path}"])
    assert code == 2 and "gate-rank: error: tier='nosuch' is unknown" in err


def test_an_empty_encoder_name_is_refused_not_dropped(monkeypatch, capsys, tmp_path):
    # gate-rank reads its command line by gate-tier's rules: `encoder=a,,b` used to rank a and b silently
    code, err = rank_in_process(monkeypatch, capsys, ["encoder=resnet18_scratch,,efficientnet_lite0,minilm",
                                                      f"paths.root={tmp_path}"])
    assert code == 2 and len(err.splitlines()) == 1 and "has an empty name" in err, err


@pytest.mark.slow
def test_gate_rank_end_to_end_on_a_tiny_pool(tmp_path, capsys):
    """Real gate-run fits: 3 encoders × digits, 160-step full runs (never run here) and 20-step proxy runs
    (run_fraction=0.125, one proxy seed); no prior, so the budget goes to the proxy. The plan is printed, the runs
    are stored and ranked on their extrapolated curves, every file is written, and a rerun trains nothing. (The full
    runs are long enough that a proxy run is well below one at the cold start's margin: with 40-step full runs
    validating as often as the proxy, no proxy run fits budget=0.9.)"""
    from gate.cli import rank

    doc = dict(TINY, overrides={**TINY["overrides"], "trainer.max_steps": 160, "trainer.val_check_interval": 40})
    tier = write_tier(tmp_path / "tiny.yaml", doc)
    root = tmp_path / "root"
    args = [f"tier={tier}", POOL, f"paths.root={root}", "budget=0.9", "n_boot=20", "baseline_scores=[]", "prior=[]",
            "history=[store]", "run_fraction=0.125", "proxy_seeds=[100]"]
    out = call_cli(rank.main, args, capsys, prog="gate-rank")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "[gate] plan: the proxy" in out.stdout and "predicted ranking on tier tiny (proxy's" in out.stdout
    # each mean rank is a prediction and says so where it is shown
    assert "mean rank" in out.stdout and out.stdout.count("†") == len(POOL.split("=")[1].split(",")) + 1
    assert "† predicted from short proxy runs" in out.stdout
    reports = list((root / "reports").glob("rank-tiny-*"))
    assert len(reports) == 1
    for name in ("report.html", "selection.csv", "predictions.csv", "tier_ranking.csv", "seeds.csv", "cost.csv",
                 "ledger.json"):
        assert (reports[0] / name).is_file(), name
    ledger = json.loads((reports[0] / "ledger.json").read_text())
    assert 0 < ledger["spent_seconds"] and ledger["planned_fraction"] <= 0.9 + 1e-9
    records = [json.loads(x) for x in (root / "results" / "records.jsonl").read_text().splitlines()]
    val = [r for r in records if r["split"] == "val"]
    assert val and all(r["facts"]["val_curve"] for r in val) and {r["seed"] for r in val} <= {100, 101, 102}
    again = call_cli(rank.main, args, capsys, prog="gate-rank")
    assert again.returncode == 0 and again.stdout.count("already stored") >= len(val), again.stdout[-2000:]
    # the runs read back count what they cost, in the plan as in the ledger (not 0 planned against their seconds)
    ledger = json.loads((reports[0] / "ledger.json").read_text())
    assert ledger["spent_seconds"] > 0 and ledger["planned_seconds"] == pytest.approx(ledger["spent_seconds"], rel=1e-6)


def test_proxy_seeds_outside_the_tiers_get_their_own_experiments(tmp_path):
    """proxy_seeds=[3] on a tier of seeds [0, 1]: the proxy's experiments are seed 3's (sharing no step with the
    full runs), the full runs stay the tier's."""
    from gate.ranking.request import proxy_entries
    from gate.ranking.stage import prepare

    doc = {**TINY, "seeds": [0, 1], "benchmarks": ["digits", "fashion_mnist"]}
    tier = write_tier(tmp_path / "two.yaml", doc)
    cfg = compose_run(tmp_path / "root", [f"tier_file={tier}", f"encoders=[{POOL.split('=')[1]}]", "proxy_seeds=[3]"],
                      config_name="rank")
    from omegaconf import OmegaConf

    prepared = prepare(OmegaConf.to_container(cfg, resolve=True), [])
    plan, request = prepared.plan, prepared.request
    assert request.proxy_seeds == (3,) and tuple(plan.tier.seeds) == (0, 1)
    assert sorted({e.seed for e in plan.experiments}) == [0, 1, 3]
    entries, _ = proxy_entries(plan, [3])
    assert list(entries) == ["digits", "fashion_mnist"] and all(set(x) == {3} for x in entries.values())


def test_a_proxy_seed_of_stored_full_runs_is_refused_while_validating(tmp_path, monkeypatch, capsys):
    from gate.results import Record, ResultsStore
    from gate.tiers.expand import expand_tier, load_tier

    tier = write_tier(tmp_path / "tiny.yaml")
    root = tmp_path / "root"
    plan = expand_tier(load_tier(str(tier)), POOL.split("=")[1].split(","), root)
    ResultsStore(root / "results" / "records.jsonl").append([Record(
        experiment=plan.experiments[0].id, kind="finetune", encoder="resnet18_scratch", dataset="digits",
        task="classification", adapter="linear_classifier", recipe="conv", seed=0, split="test", metric="acc@1",
        value=0.5, higher_is_better=True)])
    code, err = rank_in_process(monkeypatch, capsys, [f"tier={tier}", POOL, f"paths.root={root}", "proxy_seeds=[0,9]"])
    assert code == 2 and "proxy_seeds=[0, 9] shares seed(s) [0] with stored full runs of this tier" in err, err


def test_a_machine_twice_as_slow_as_the_cold_start_stays_within_the_budget(tmp_path, capsys, monkeypatch):
    """Every proxy run costs twice what the cold start predicts (a parallel load): the full tier the budget is a
    fraction of is re-predicted from the same measured runs, so the spent fraction stays within budget=0.2 (it was
    the spent seconds of a loaded machine over a quiet machine's full tier: 2 / COLD_MARGIN of the plan)."""
    from gate.cli import rank
    from gate.ranking import pipeline
    from gate.ranking.cost import COLD_MARGIN, CostModel
    from gate.ranking.pricing import run_features
    from gate.ranking.proxy import ProxyRun

    def slow_block(block, experiments, ctx, *, full_steps, planned, order, **_):
        out = []
        for enc in order:
            cold = CostModel().predict(run_features(experiments[enc], 1e7))  # the cold start's parts
            scale = 2.0 * planned[enc] / (COLD_MARGIN * cold.seconds(block.steps, block.steps // block.val_every))
            train = scale * cold.per_step * block.steps
            vals = block.steps // block.val_every
            facts = {"wall_seconds": 2.0 / COLD_MARGIN * planned[enc], "train_step_seconds": train, "global_step": block.steps,
                     "validations": vals, "validation_seconds": scale * cold.per_validation * vals, "params": 1e7}
            rank_of = order.index(enc)
            out.append(ProxyRun(enc, block.benchmark, block.seed, block.steps, f"x{block.seed}{enc}", "val/acc",
                                True, 0.5 - 0.1 * rank_of, 0.5 - 0.1 * rank_of, 0.4, 0.6, "last value",
                                facts["wall_seconds"], planned[enc], False, facts))
        return out

    monkeypatch.setattr(pipeline, "run_block", slow_block)
    doc = dict(TINY, seeds=[0, 1, 2],
               overrides={**TINY["overrides"], "trainer.max_steps": 200, "trainer.val_check_interval": 50})
    tier = write_tier(tmp_path / "tiny.yaml", doc)
    root = tmp_path / "root"
    args = [f"tier={tier}", POOL, f"paths.root={root}", "budget=0.2", "n_boot=20", "baseline_scores=[]", "prior=[]",
            "history=[store]", "proxy_seeds=[100,101,102,103]"]
    out = call_cli(rank.main, args, capsys, prog="gate-rank")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    ledger = json.loads(next((root / "reports").glob("rank-tiny-*/ledger.json")).read_text())
    assert ledger["spent_over_planned"] == pytest.approx(2.0 / COLD_MARGIN, rel=1e-6)  # the runs did cost more
    assert ledger["full_seconds"] > 1.5 * ledger["planned_full_seconds"]       # ... and so does the full tier
    assert ledger["planned_fraction"] > 0.2 / (2.0 / COLD_MARGIN)               # the plan would have overspent
    assert ledger["fraction"] <= 0.2 + 1e-9 and "OVER THE BUDGET" not in out.stdout


def tier_with_stored_full_runs(tmp_path: Path, without: str = "") -> tuple[Path, Path]:
    """The tiny tier at 200-step full runs, seeds 0-2, and a root whose store holds each of the pool's full runs (but
    ``without``'s) as gate-run records its costs: 200 steps at 0.4 s, four validations of 2 s, 12 s fixed (its test
    pass among them), 100 s of wall time; the tier's values rise with the run's place in the tier."""
    from gate.results import Record, ResultsStore
    from gate.tiers.expand import expand_tier, load_tier

    doc = dict(TINY, seeds=[0, 1, 2], overrides={**TINY["overrides"], "trainer.max_steps": 200,
                                                  "trainer.val_check_interval": 50})
    tier = write_tier(tmp_path / "tiny.yaml", doc)
    root = tmp_path / "root"
    plan = expand_tier(load_tier(str(tier)), POOL.split("=")[1].split(","), root)
    facts = {"wall_seconds": 100.0, "train_step_seconds": 80.0, "global_step": 200, "validations": 4,
             "validation_seconds": 8.0, "params": 1e7}
    ResultsStore(root / "results" / "records.jsonl").append([Record(
        experiment=e.id, kind="finetune", encoder=e.encoder, dataset="digits", task="classification",
        adapter="linear_classifier", recipe="conv", seed=e.seed, split="test", metric="acc@1", value=0.5 + 0.1 * i,
        higher_is_better=True, config=e.config, facts=facts)
        for i, e in enumerate(x for x in plan.experiments if x.seed in (0, 1, 2) and x.encoder != without)])
    return tier, root


def rank_at_a_third(tier: Path, root: Path, capsys, *extra: str):
    """gate-rank on a tier of :func:`tier_with_stored_full_runs` at budget 0.3, one proxy seed, proxy runs only (the
    stored full runs price the plan, never rank); exit 0 checked."""
    from gate.cli import rank

    out = call_cli(rank.main, [f"tier={tier}", POOL, f"paths.root={root}", "budget=0.3", "baseline_scores=[]",
                               "prior=[]", "history=[store]", "proxy_seeds=[100]", "n_boot=5", "use_full_runs=false",
                               *extra], capsys, prog="gate-rank")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out


def test_a_loaded_machine_stops_a_block_the_stored_quiet_runs_priced_and_stays_within_the_budget(tmp_path, capsys,
                                                                                                  monkeypatch):
    """The store holds the full tier's runs (3 encoders × digits × seeds 0-2, 100 s each: 900 s, measured on a quiet
    machine), so the cost model prices the proxy's block from them and budget=0.3 (270 s) buys one block of three
    runs. Each proxy run takes twice its prediction (a parallel load). After the first run, the other two would pass
    the budget (priced at the store's speed: a call's first run pays the process's start, so it is no evidence of a
    load; its seconds still count): the block stops there, its run is listed as 'stopped' and not ranked, and the call
    spends that one run, within the budget (it ran the whole block before and spent 0.472)."""
    from gate.ranking import pipeline
    from gate.ranking.proxy import ProxyRun

    tier, root = tier_with_stored_full_runs(tmp_path)

    def loaded_block(block, experiments, ctx, *, full_steps, planned, order, **_):
        for i, enc in enumerate(order):
            seconds = 2.0 * planned[enc]
            vals = block.steps // block.val_every
            yield ProxyRun(enc, block.benchmark, block.seed, block.steps, f"x{block.seed}{enc}", "acc@1", True,
                           0.5 + 0.1 * i, 0.5 + 0.1 * i, 0.4, 0.6, "last value", seconds, planned[enc], False,
                           {"wall_seconds": seconds, "train_step_seconds": 2 * 0.4 * block.steps, "global_step":
                            block.steps, "validations": vals, "validation_seconds": 2 * 2.0 * vals, "params": 1e7})

    monkeypatch.setattr(pipeline, "run_block", loaded_block)
    out = rank_at_a_third(tier, root, capsys)
    assert "proxy seed(s) × digits" in out.stdout  # the plan: one block of three runs
    assert "digits seed 100 stopped after 1 of 3 runs" in out.stdout, out.stdout[-3000:]
    ledger = json.loads(next((root / "reports").glob("rank-tiny-*/ledger.json")).read_text())
    assert ledger["full_seconds"] == pytest.approx(900.0)  # the stored full tier: the budget is 270 s of it
    assert len([k for k in ledger["items"] if k.startswith("run ")]) == 1
    assert ledger["fraction"] <= 0.3 and "OVER THE BUDGET" not in out.stdout
    predictions = pd.read_csv(next((root / "reports").glob("rank-tiny-*/predictions.csv")))
    assert list(predictions.loc[predictions["benchmark"] == "digits", "source"]) == ["stopped"]
    assert "static's: the budget stopped digits seed 100 before its last run" in out.stdout


def test_a_calls_first_run_paying_the_process_start_is_no_evidence_of_a_load(tmp_path, capsys, monkeypatch):
    """As above, but only the call's first run is dear (1.5× its price: on an H200 the first run of a process took
    1.22-1.45 of its price, the rest 0.52-0.76, docs/ranking.md) and the others cost their price. Read as a load, the
    1.5× priced the other two runs past the budget and stopped a block that fits (3.5 runs' worth of a budget that
    holds 3.8); now the block runs whole, ranks, and spends what it cost, within the budget."""
    from gate.ranking import pipeline
    from gate.ranking.proxy import ProxyRun

    tier, root = tier_with_stored_full_runs(tmp_path)

    def block(block, experiments, ctx, *, full_steps, planned, order, **_):
        for i, enc in enumerate(order):
            seconds = (1.5 if i == 0 else 1.0) * planned[enc]
            yield ProxyRun(enc, block.benchmark, block.seed, block.steps, f"x{block.seed}{enc}", "acc@1", True,
                           0.5 + 0.1 * i, 0.5 + 0.1 * i, 0.4, 0.6, "last value", seconds, planned[enc], False,
                           {"wall_seconds": seconds, "global_step": block.steps, "params": 1e7})

    monkeypatch.setattr(pipeline, "run_block", block)
    out = rank_at_a_third(tier, root, capsys)
    assert "stopped after" not in out.stdout and "predicted ranking on tier tiny (proxy's" in out.stdout, \
        out.stdout[-3000:]
    ledger = json.loads(next((root / "reports").glob("rank-tiny-*/ledger.json")).read_text())
    assert len([k for k in ledger["items"] if k.startswith("run ")]) == 3
    assert ledger["fraction"] <= 0.3 and "OVER THE BUDGET" not in out.stdout


def test_a_run_the_store_cannot_price_by_its_own_pair_is_no_evidence_of_a_load(tmp_path, capsys, monkeypatch):
    """As above, but the store lacks efficientnet_lite0's full runs, so its proxy run is priced by a fit across pairs
    (whose error is 22-46 %, docs/ranking.md): that run takes 1.6× its price and the others exactly theirs. The speed a
    block is stopped at is measured on runs the store prices from their own pair only, so this is no load: the block
    runs whole and ranks (measured against every run, the 1.6× read as a load stopped it after its first run)."""
    from gate.ranking import pipeline
    from gate.ranking.proxy import ProxyRun

    tier, root = tier_with_stored_full_runs(tmp_path, without="efficientnet_lite0")

    def block(block, experiments, ctx, *, full_steps, planned, order, **_):
        for i, enc in enumerate(sorted(order, key=lambda e: e != "efficientnet_lite0")):  # the unpriced one first
            seconds = (1.6 if enc == "efficientnet_lite0" else 1.0) * planned[enc]
            yield ProxyRun(enc, block.benchmark, block.seed, block.steps, f"x{block.seed}{enc}", "acc@1", True,
                           0.5 + 0.1 * i, 0.5 + 0.1 * i, 0.4, 0.6, "last value", seconds, planned[enc], False,
                           {"wall_seconds": seconds, "global_step": block.steps, "params": 1e7})

    monkeypatch.setattr(pipeline, "run_block", block)
    out = rank_at_a_third(tier, root, capsys, "static=[params]")
    assert "stopped after" not in out.stdout and "predicted ranking on tier tiny (proxy's" in out.stdout, \
        out.stdout[-3000:]
    ledger = json.loads(next((root / "reports").glob("rank-tiny-*/ledger.json")).read_text())
    assert len([k for k in ledger["items"] if k.startswith("run ")]) == 3


def test_a_benchmark_no_encoder_learns_is_left_out_of_the_ranking_and_the_plan_moves_on(tmp_path, capsys,
                                                                                          monkeypatch):
    """The stated rule (no history) runs the cheapest benchmark, fmnist_video_speed (16-step full runs), alone: digits
    does not fit beside it. Every encoder's validation r2 stays below 0.05, so that benchmark is left out of the
    ranking (its values listed as 'no skill', its seconds counted); its runs cost a quarter of their prediction, so
    the re-plan adds digits, and the ranking is digits' order (the faked runs make it the reverse of the run
    order)."""
    from gate.cli import rank
    from gate.ranking import pipeline
    from gate.ranking.proxy import ProxyRun

    def block(block, experiments, ctx, *, full_steps, planned, order, **_):
        speed = block.benchmark == "fmnist_video_speed"
        out = []
        for i, enc in enumerate(order):
            value = 0.01 * i - 0.1 if speed else 0.3 + 0.2 * i
            seconds = planned[enc] / 4  # cheaper than predicted: the re-plan finds room for digits
            facts = {"wall_seconds": seconds, "global_step": block.steps}
            out.append(ProxyRun(enc, block.benchmark, block.seed, block.steps, f"x{block.benchmark}{enc}",
                                "r2" if speed else "acc@1", True, value, value, value, value, "last value",
                                seconds, planned[enc], False, facts))
        return out

    monkeypatch.setattr(pipeline, "run_block", block)
    doc = dict(TINY, benchmarks=[{"dataset": "fmnist_video_speed",
                                  "overrides": {"trainer.max_steps": 16, "trainer.val_check_interval": 4}}, "digits"],
               overrides={**TINY["overrides"], "trainer.max_steps": 160, "trainer.val_check_interval": 40})
    tier = write_tier(tmp_path / "tiny.yaml", doc)
    root = tmp_path / "root"
    args = [f"tier={tier}", POOL, f"paths.root={root}", "budget=0.5", "n_boot=5", "baseline_scores=[]", "prior=[]",
            "history=[store]", "proxy_seeds=[100]", "static=[params]"]
    out = call_cli(rank.main, args, capsys, prog="gate-rank")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "fmnist_video_speed left out of the ranking: no encoder learnt it (best validation r2 -0.08" in out.stdout
    assert "added when re-planned: digits; left out of the ranking, no encoder learnt it: fmnist_video_speed" \
        in out.stdout
    report = next((root / "reports").glob("rank-tiny-*"))
    import pandas as pd

    ranking = pd.read_csv(report / "tier_ranking.csv", index_col=0)
    assert list(ranking.index) == list(reversed(POOL.split("=")[1].split(",")))  # digits' values alone
    predictions = pd.read_csv(report / "predictions.csv")
    assert set(predictions.loc[predictions.benchmark == "fmnist_video_speed", "source"]) == {"no skill"}
    selection = pd.read_csv(report / "selection.csv").set_index("benchmark")
    assert selection.loc["fmnist_video_speed", "ran"] and "left out of the ranking" in selection.loc[
        "fmnist_video_speed", "why"]
    assert selection.loc["digits", "ran"]


def test_a_prior_dearer_than_planned_re_plans_before_the_first_block_and_stays_within_the_budget(tmp_path, capsys,
                                                                                               monkeypatch):
    """budget=0.3 plans the prior's three feature passes (10 s each, cold) and one digits block that fills the rest;
    the passes cost three times that, so the plan is re-made before the first block with what is left: the block no
    longer fits and is dropped, and the call spends 0.188 (the passes) instead of ≈ 0.39 (passes and block)."""
    from gate.cli import rank
    from gate.ranking import pipeline
    from gate.ranking.proxy import ProxyRun
    from gate.ranking.scores import COLD_PASS_SECONDS

    def dear_prior(plan, benchmarks, names, **kw):
        pool = list(plan.encoders)
        return ({n: {b: {e: float(i) for i, e in enumerate(pool)} for b in benchmarks} for n in names},
                {f"{e} × {b}": 3 * COLD_PASS_SECONDS for e in pool for b in benchmarks}, {})

    def block(block, experiments, ctx, *, full_steps, planned, order, **_):
        return [ProxyRun(enc, block.benchmark, block.seed, block.steps, f"x{block.seed}{enc}", "acc@1", True,
                         0.5, 0.5, 0.5, 0.5, "last value", planned[enc], planned[enc], False,
                         {"wall_seconds": planned[enc]}) for enc in order]

    monkeypatch.setattr(pipeline, "score_values", dear_prior)
    monkeypatch.setattr(pipeline, "run_block", block)
    doc = dict(TINY, seeds=[0, 1, 2], overrides={**TINY["overrides"], "trainer.max_steps": 200,
                                                  "trainer.val_check_interval": 50})
    tier = write_tier(tmp_path / "tiny.yaml", doc)
    root = tmp_path / "root"
    out = call_cli(rank.main, [f"tier={tier}", POOL, f"paths.root={root}", "budget=0.3", "baseline_scores=[]",
                               "prior=[knn_acc]", "history=[store]", "proxy_seeds=[100]", "n_boot=5"], capsys,
                   prog="gate-rank")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "× digits (32 of 200 steps)" in out.stdout and "re-planned on the costs measured: dropped digits seed 100" \
        in out.stdout
    ledger = json.loads(next((root / "reports").glob("rank-tiny-*/ledger.json")).read_text())
    assert ledger["spent_seconds"] == pytest.approx(3 * 3 * 10.0)  # the three passes at 30 s each, no block
    assert ledger["fraction"] <= 0.3 and "OVER THE BUDGET" not in out.stdout


def test_the_stores_full_runs_of_encoders_outside_the_pool_are_the_history(tmp_path, capsys, monkeypatch):
    """``history: store`` is the store's full runs of the tier under its protocol: those of encoders outside the pool
    (a user's baselines, run by gate-tier) are the history the selection learns from. Six other encoders' full runs
    stored beside the pool's: the selection's history holds those six (it held none: the store was read only for
    the pool's experiments, whose rows the leakage rule drops); a seventh encoder's runs under another protocol (its
    id is not the tier's) and the pool's own runs are not in it."""
    from gate.ranking import pipeline
    from gate.ranking.proxy import ProxyRun
    from gate.results import Record, ResultsStore
    from gate.tiers.expand import expand_tier, load_tier

    tier, root = tier_with_stored_full_runs(tmp_path)
    others = ["resnet50_scratch", "efficientnetv2_scratch", "efficientnet_lite1", "efficientnet_lite2",
              "vit_base_scratch", "flexivit_scratch"]
    plan = expand_tier(load_tier(str(tier)), [*others, "convnextv2_base"], root)
    facts = {"wall_seconds": 100.0, "global_step": 200, "params": 1e7}
    ResultsStore(root / "results" / "records.jsonl").append([Record(
        experiment=e.id if e.encoder != "convnextv2_base" else f"another-protocol-{e.seed}", kind="finetune",
        encoder=e.encoder, dataset="digits", task="classification", adapter="linear_classifier", recipe="conv",
        seed=e.seed, split="test", metric="acc@1", value=0.3 + 0.02 * i + 0.01 * e.seed, higher_is_better=True,
        config=e.config, facts=facts) for i, e in enumerate(plan.experiments)])

    def block(block, experiments, ctx, *, full_steps, planned, order, **_):
        for i, enc in enumerate(order):
            yield ProxyRun(enc, block.benchmark, block.seed, block.steps, f"x{block.seed}{enc}", "acc@1", True,
                           0.5 + 0.1 * i, 0.5 + 0.1 * i, 0.4, 0.6, "last value", planned[enc], planned[enc], False,
                           {"wall_seconds": planned[enc], "global_step": block.steps, "params": 1e7})

    monkeypatch.setattr(pipeline, "run_block", block)
    out = rank_at_a_third(tier, root, capsys)
    assert ("history: the store's full runs of 6 encoder(s) outside the pool (efficientnet_lite1, efficientnet_lite2, "
            "efficientnetv2_scratch, flexivit_scratch, resnet50_scratch, vit_base_scratch)") in out.stdout, out.stdout
    selection = pd.read_csv(next((root / "reports").glob("rank-tiny-*/selection.csv")))
    assert set(selection["history_encoders"]) == {6} and set(selection["method"]) != {"rule"}, selection


def test_a_prior_that_ranks_the_historys_encoders_better_than_the_proxy_seeds_agree_gives_the_ranking(
        tmp_path, capsys, monkeypatch):
    """The prior's reliability measured on the history: six other encoders' full runs and their k-NN scores stored
    under the prior's protocol, computed beside another score (as gate-tier's scoring computes every score: a score
    experiment's id leaves out which were computed). The prior ranks them as it ranks the pool: k-NN (increasing
    with the encoder's place, as their full runs do), parameters (all 1e7: tied) and published source top-1 (the
    pool's encoders all declare it; here lite2 77.6, lite1 76.7, the four random-init 0.1): mean ranks lite2 2.5,
    flexivit 3.0, lite1 3.17, vit_base 3.33, v2 4.33, resnet50 4.67 against the truth's flexivit, vit_base, lite2,
    lite1, v2, resnet50 — 3 of 15 pairs swapped, τ 0.60 by hand. The two proxy seeds swap two of the pool's three
    encoders (τ 1/3 between them, above the 0.2 at which disagreement alone hands over). The ranking is the prior's,
    and says why; without the prior's τ on the history (it was never measured) the proxy's was given."""
    from gate.engine.validate import resolved_config
    from gate.ranking import pipeline
    from gate.ranking.proxy import ProxyRun
    from gate.ranking.scores import score_config
    from gate.ranking.stage import contexts
    from gate.results import Record, ResultsStore, identity
    from gate.tiers.expand import expand_tier, load_tier

    tier, root = tier_with_stored_full_runs(tmp_path)
    others = ["resnet50_scratch", "efficientnetv2_scratch", "efficientnet_lite1", "efficientnet_lite2",
              "vit_base_scratch", "flexivit_scratch"]
    plan = expand_tier(load_tier(str(tier)), others, root)
    _, compose_score, _ = contexts(plan, [])
    place = {e: i for i, e in enumerate(others)}
    store = ResultsStore(root / "results" / "records.jsonl")
    store.append([Record(
        experiment=e.id, kind="finetune", encoder=e.encoder, dataset="digits", task="classification",
        adapter="linear_classifier", recipe="conv", seed=e.seed, split="test", metric="acc@1",
        value=0.3 + 0.05 * place[e.encoder], higher_is_better=True, config=e.config,
        facts={"wall_seconds": 100.0, "global_step": 200, "params": 1e7}) for e in plan.experiments])
    scored = {e.encoder: score_config(plan, e, ["knn_acc", "logme"], compose_score) for e in plan.experiments
              if e.seed == 0}
    store.append([Record(
        experiment=sid, kind="score", encoder=enc, dataset="digits", task="classification", adapter="", recipe="",
        seed=0, split="test", metric=metric, value=0.2 + 0.1 * place[enc], higher_is_better=True,
        config=identity(resolved_config(cfg), "score"), facts={"seconds": 1.0})
        for enc, (cfg, sid) in scored.items() for metric in ("knn_acc", "logme")])

    def prior(plan, benchmarks, names, **kw):  # the pool's own k-NN scores, 1 s a pass
        pool = list(plan.encoders)
        return ({n: {b: {e: float(i) for i, e in enumerate(pool)} for b in benchmarks} for n in names},
                {f"{e} × {b}": 1.0 for e in pool for b in benchmarks}, {})

    value = {100: {"resnet18_scratch": 0.5, "vit_tiny_scratch": 0.6, "efficientnet_lite0": 0.7},
             101: {"resnet18_scratch": 0.5, "vit_tiny_scratch": 0.7, "efficientnet_lite0": 0.6}}

    def block(block, experiments, ctx, *, full_steps, planned, order, **_):
        for enc in order:
            v = value[block.seed][enc]
            yield ProxyRun(enc, block.benchmark, block.seed, block.steps, f"x{block.seed}{enc}", "acc@1", True, v, v,
                           v, v, "last value", planned[enc], planned[enc], False,
                           {"wall_seconds": planned[enc], "global_step": block.steps, "params": 1e7})

    monkeypatch.setattr(pipeline, "score_values", prior)
    monkeypatch.setattr(pipeline, "run_block", block)
    from gate.cli import rank

    out = call_cli(rank.main, [f"tier={tier}", POOL, f"paths.root={root}", "budget=0.9", "baseline_scores=[]",
                               "prior=[knn_acc]", "history=[store]", "proxy_seeds=[100,101]", "n_boot=5",
                               "use_full_runs=false"], capsys, prog="gate-rank")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "the prior ranks the history's 6 encoders at τ 0.60" in out.stdout, out.stdout[-3000:]
    assert ("predicted ranking on tier tiny (prior's: the proxy seeds agree at τ 0.33, below the prior's τ 0.60 on "
            "the history's encoders)") in out.stdout, out.stdout[-3000:]


def test_halving_contested_lengthens_the_runs_of_the_least_settled_pair_and_ranks_by_them(tmp_path, capsys,
                                                                                          monkeypatch):
    """halving=contested at budget 0.5 of the stored full tier (900 s): the first allocation, planned in half of it,
    is one block of three 132-step runs. Their 80 % intervals: lite0 [0.85, 0.95] lies above both others, whose
    intervals overlap (resnet18 [0.50, 0.70], vit_tiny [0.48, 0.68]): by hand, lite0's pairs are settled (certainty
    1), resnet18–vit_tiny not (0). Only those two get longer runs, 198 steps (2 × 132 on the 33-step validation
    interval, under the full 200), which settle them the other way round (vit_tiny 0.70 above resnet18 0.62), so a
    second round finds nothing to lengthen: the ranking follows the longer runs, the shorter two are listed as
    superseded, and the call stays within budget."""
    from gate.cli import rank
    from gate.ranking import pipeline
    from gate.ranking.proxy import ProxyRun

    tier, root = tier_with_stored_full_runs(tmp_path)
    short = {"resnet18_scratch": (0.60, 0.50, 0.70), "vit_tiny_scratch": (0.58, 0.48, 0.68),
             "efficientnet_lite0": (0.90, 0.85, 0.95)}
    longer = {"resnet18_scratch": (0.62, 0.60, 0.64), "vit_tiny_scratch": (0.70, 0.68, 0.72)}
    made = []

    def block(block, experiments, ctx, *, full_steps, planned, order, **_):
        for enc in order:
            value, lo, hi = (short if block.steps < 198 else longer)[enc]
            made.append((enc, block.steps))
            vals = block.steps // block.val_every
            yield ProxyRun(enc, block.benchmark, block.seed, block.steps, f"x{block.steps}{enc}", "acc@1", True,
                           value, value, lo, hi, "ensemble", planned[enc], planned[enc], False,
                           {"wall_seconds": planned[enc], "global_step": block.steps, "validations": vals})

    monkeypatch.setattr(pipeline, "run_block", block)
    out = call_cli(rank.main, [f"tier={tier}", POOL, f"paths.root={root}", "budget=0.5", "baseline_scores=[]",
                               "prior=[]", "history=[store]", "proxy_seeds=[100]", "n_boot=5", "use_full_runs=false",
                               "static=[params]", "halving=contested"], capsys, prog="gate-rank")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "halving=contested: the first allocation is planned in 0.5 of the budget" in out.stdout
    assert "digits (132 of 200 steps)" in out.stdout, out.stdout[-3000:]
    assert sorted(made) == sorted([("resnet18_scratch", 132), ("vit_tiny_scratch", 132), ("efficientnet_lite0", 132),
                                   ("resnet18_scratch", 198), ("vit_tiny_scratch", 198)])
    assert "least settled pairs resnet18_scratch–vit_tiny_scratch 0.00; longer runs of " in out.stdout
    # the second round judges the longer runs: every pair is settled, so the rest of the budget is left
    assert "halving: least settled pairs none; every pair is settled: nothing to lengthen" in out.stdout
    report = next((root / "reports").glob("rank-tiny-*"))
    contested = pd.read_csv(report / "contested.csv")
    assert list(contested["certainty"]) == [1.0, 1.0, 1.0]
    assert list(contested["lengthened"]) == [True, True, True]  # every pair has a lengthened encoder
    ranking = pd.read_csv(report / "tier_ranking.csv", index_col=0)
    assert list(ranking.index) == ["efficientnet_lite0", "vit_tiny_scratch", "resnet18_scratch"]
    predictions = pd.read_csv(report / "predictions.csv")
    sources = predictions.groupby(["encoder", "steps"])["source"].first().to_dict()
    assert sources == {("efficientnet_lite0", 132): "observed", ("resnet18_scratch", 132): "superseded",
                       ("vit_tiny_scratch", 132): "superseded", ("resnet18_scratch", 198): "observed",
                       ("vit_tiny_scratch", 198): "observed"}
    ledger = json.loads((report / "ledger.json").read_text())
    assert len([k for k in ledger["items"] if k.startswith("run ")]) == 5
    assert ledger["fraction"] <= 0.5 and "OVER THE BUDGET" not in out.stdout
    assert "[gate] halving: least settled pairs" in out.stdout and "2 longer run(s)" in out.stdout
