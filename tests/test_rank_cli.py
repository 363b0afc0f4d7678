"""gate-rank's entry point: bad input is one line and exit 2 before any work (in process), and one real end-to-end
run of a tiny pool (in process), killed-and-rerun semantics coming from the store."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from helpers import call_cli

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
    (["encoder=resnet18_scratch,efficientnet_lite0"], "a ranking needs at least 3 distinct encoders"),
    (["scores=[no_such_score]"], "scores: unknown score 'no_such_score'; known scores are ['logme'"),
    (["baseline_scores=[knn_acc,nope]"], "baseline_scores: unknown score 'nope'"),
    (["overrides=['trainer.max_steps=1','trainer.val_check_interval=1']"],
     "has no entry the proxy can run for ['resnet18_scratch', 'vit_tiny_scratch', 'efficientnet_lite0']: digits: "
     "trainer.max_steps=1 (the proxy needs a step budget >= 2)"),
    (["budget=0.01"], "budget=0.01 buys 0.2 training steps for 3 encoders"),
    (["budget=1"], "budget=1 is invalid"),
    (["budget=-0.1"], "budget=-0.1 is invalid"),
    (["budget=cheap"], "budget='cheap' is invalid"),
    (["encoder=resnet18_scratch,resnet18_scratch,efficientnet_lite0"], "a ranking needs at least 3 distinct encoders"),
    (["scores=[knn_acc]", "baseline_scores=[sfda,no_such]"], "baseline_scores: unknown score 'no_such'"),
    # the proxy's rungs never test, but the full experiments it is validated against must
    (["overrides=[evaluate_test=false]"], "evaluate_test=false is invalid in a tier"),
    (["proxy_benchmarks=[digits,nope]"], "proxy_benchmarks: 'nope' is not among the benchmarks the proxy can rank"),
    (["proxy_benchmarks=0"], "proxy_benchmarks=0 is invalid"),
    (["max_rungs=0"], "max_rungs=0 is invalid: expected null (halve down to two) or an integer >= 1"),
    (["run_fraction=1.5"], "run_fraction=1.5 is invalid"),
    (["cost_probe_steps=-1"], "cost_probe_steps=-1 is invalid: expected an integer >= 0"),
])
def test_bad_input_is_one_line_and_exit_2_before_any_work(tmp_path, monkeypatch, capsys, args, message):
    tier = write_tier(tmp_path / "tiny.yaml", dict(TINY, overrides={**TINY["overrides"], "trainer.max_steps": 6}))
    base = [f"tier={tier}", POOL, f"paths.root={tmp_path / 'root'}"]
    code, err = rank_in_process(monkeypatch, capsys, [*base, *args])
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("gate-rank: error: "), err
    assert message in err, err
    assert not (tmp_path / "root" / "runs").exists() and not (tmp_path / "root" / "results").exists()


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
    """Real gate-run fits: 3 encoders × digits, 8-step full runs; budget 0.3 = 7.2 steps → rungs of 1 and 2 steps
    (5 r0 <= 7.2); the second only if the seconds measured in the first leave room. A rerun trains nothing.
    Successive halving (max_rungs=null), so the survivors' continuation from their checkpoints is a real one."""
    from gate.cli import rank

    tier = write_tier(tmp_path / "tiny.yaml")
    root = tmp_path / "root"
    # gate-rank's main() with this command line, in process (an interpreter start costs seconds; what a signal does
    # to gate-rank's process is tests/test_faults.py's)
    args = [f"tier={tier}", POOL, f"paths.root={root}", "budget=0.3", "n_boot=20", "baseline_scores=[]",
            "max_rungs=null"]
    out = call_cli(rank.main, args, capsys, prog="gate-rank")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "predicted ranking on tier tiny" in out.stdout and "of 8 steps on val acc@1" in out.stdout
    reports = list((root / "reports").glob("rank-tiny-*"))
    assert len(reports) == 1 and (reports[0] / "report.html").is_file()
    ledger = json.loads((reports[0] / "ledger.json").read_text())
    assert 0 < ledger["spent_seconds"] and ledger["full_seconds"] > ledger["spent_seconds"]
    records = [json.loads(x) for x in (root / "results" / "records.jsonl").read_text().splitlines()]
    val = {r["experiment"]: r for r in records if r["split"] == "val"}
    first = [r for r in val.values() if r["facts"]["global_step"] == 1]
    later = [r for r in val.values() if r["facts"]["global_step"] == 2]
    assert len(first) == 3 and all(r["facts"]["resumed_from_step"] is None for r in first)
    assert len(later) in (0, 2) and all(r["facts"]["resumed_from_step"] == 1 for r in later)  # survivors continue
    # the rerun: every run is found stored
    again = call_cli(rank.main, args, capsys, prog="gate-rank")
    assert again.returncode == 0 and again.stdout.count("already stored") == len(val), again.stdout[-2000:]
    assert len((root / "results" / "records.jsonl").read_text().splitlines()) == len(records)


def test_a_proxy_seed_outside_the_tiers_seeds_gets_its_own_experiments_and_auto_picks_the_first_benchmarks(tmp_path):
    """seed=3 on a tier of seeds [0, 1]: the proxy's experiments are seed 3's (sharing no step with the full runs),
    the full runs stay the tier's; auto spends the tier's budget on its first benchmark(s)."""
    from gate.ranking.pipeline import choose_benchmarks, entry_steps, proxy_entries
    from gate.ranking.stage import prepare

    doc = {**TINY, "seeds": [0, 1], "benchmarks": ["digits", "fashion_mnist"]}
    tier = write_tier(tmp_path / "two.yaml", doc)
    plain = {"tier_file": str(tier), "tier": None, "encoders": POOL.split("=")[1].split(","),
             "paths": {"root": str(tmp_path / "root")}, "overrides": [], "seed": 3, "proxy_benchmarks": "auto",
             "budget": 0.2, "run_fraction": 0.67, "eta": 2, "overhead_steps": 0, "max_rungs": 1, "scores": [],
             "baseline_scores": [], "n_boot": 10, "use_full_runs": True,
             "cost_probe_steps": 4}
    prepared = prepare(plain, [])
    plan, request, seed = prepared.plan, prepared.request, prepared.seed
    assert seed == 3 and tuple(plan.tier.seeds) == (0, 1)
    assert sorted({e.seed for e in plan.experiments}) == [0, 1, 3]
    entries, _ = proxy_entries(plan, 3)
    assert list(entries) == ["digits", "fashion_mnist"] and all(e.seed == 3 for x in entries.values() for e in x)
    # 0.2 × 2 seeds × 2 benchmarks = 0.8 of a benchmark's single-seed run: at 0.67 each, one benchmark
    assert choose_benchmarks(list(entries), "auto", full_cost=entry_steps(entries), budget=0.2, seeds=2,
                             run_fraction=0.67) == ["digits"]
    assert request.proxy_benchmarks == "auto" and request.max_rungs == 1
