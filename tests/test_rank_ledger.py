"""gate-rank's compute ledger after a kill and a resume (issue 27): a rung killed after its last checkpoint resumes
with no training step to time, so its encoder's full-run cost is unmeasured. The ledger says so — null in
``ledger.json`` (strict JSON, never a bare NaN), "not measured" in the printed line and the report — instead of
"nan min"."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from test_rank_proxy import FakeGateRun, experiments

from gate.ranking.budget import Ledger
from gate.ranking.pipeline import RankResult, write_outputs
from gate.ranking.proxy import ProxyContext, run_benchmark


class KilledOnce(FakeGateRun):
    """gate-run killed once, for one encoder, after its last checkpoint was written and before its records."""

    def __init__(self, runs_dir, victim):
        super().__init__(runs_dir, overhead=1.0)
        self.victim = victim

    def run(self, cfg):
        if cfg.encoder.name == self.victim:
            self.victim = None
            from gate.engine.build import resolved_config
            from gate.results import experiment_id

            ckpt = self.runs_dir / experiment_id(resolved_config(cfg), "finetune") / "checkpoints" / "last.ckpt"
            ckpt.parent.mkdir(parents=True, exist_ok=True)
            ckpt.write_text(str(cfg.trainer.max_steps))
            raise KeyboardInterrupt  # SIGTERM at the time limit
        super().run(cfg)


def strict_json(text: str):
    def refuse(constant):
        raise ValueError(f"bare {constant} in JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture
def resumed(tmp_path):
    fake = KilledOnce(tmp_path / "runs", victim="b")
    ctx = ProxyContext(fake.compose, fake.run, lambda: list(fake.records), tmp_path / "runs",
                       echo=lambda *a, **k: None)
    bench = experiments(list("abcd"))
    with pytest.raises(KeyboardInterrupt):
        run_benchmark("d", bench, ctx, budget=0.3, eta=2, overhead_steps=0, full_seeds=1, ledger=Ledger(), max_rungs=1)
    ledger = Ledger()  # the resumed gate-rank: b's run restarts from its last checkpoint, at the last step
    ranking = run_benchmark("d", bench, ctx, budget=0.3, eta=2, overhead_steps=0, full_seeds=1, ledger=ledger,
                            max_rungs=1)
    assert ("b", ranking.steps[0], ranking.steps[0]) in fake.calls  # resumed with nothing left to train
    return ledger, ranking


def test_an_unmeasured_cost_is_null_never_nan(resumed):
    ledger, _ = resumed
    assert ledger.full["b × d"] is None and ledger.estimated["b × d"] is None
    assert ledger.full["a × d"] == pytest.approx(1.0 + 40 * 1.0)
    # a total over an unmeasured part is not a number either: unmeasured, and which part says why
    assert ledger.full_seconds is None and ledger.fraction is None and ledger.estimated_fraction is None
    assert ledger.unmeasured == ["b × d"]
    assert ledger.overrun(0.1) == ""  # nothing to claim


def test_ledger_json_is_strict_json_with_null_for_unmeasured(resumed, tmp_path):
    ledger, ranking = resumed
    result = RankResult({"d": ranking}, ledger, pd.DataFrame(), [], ceiling={"d": float("nan"), "tier": 0.5})
    files = write_outputs(result, tmp_path / "out")
    data = strict_json(files["ledger"].read_text())
    assert data["full_seconds"] is None and data["fraction"] is None and data["full"]["b × d"] is None
    assert data["unmeasured"] == ["b × d"] and data["spent_seconds"] > 0


def test_the_printed_compute_line_says_not_measured_instead_of_nan(resumed):
    from gate.ranking.pipeline import compute_line  # the line gate-rank prints (it printed "nan min")

    ledger, ranking = resumed
    result = RankResult({"d": ranking}, ledger, pd.DataFrame(), [])
    line = compute_line(result, budget=0.3)
    assert "nan" not in line.lower()
    assert "not measured" in line and "b × d" in line and "min spent" in line
