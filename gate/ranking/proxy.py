"""The budgeted fine-tuning proxy: successive halving over a pool of encoders, per benchmark, with short runs of
the benchmark's real protocol.

Per benchmark: every encoder trains ``r0`` steps (rung 0); the better ``1/eta`` by the validation value of the
benchmark's checkpoint monitor (the adapter's own, e.g. ``acc@1``, ``miou``, ``mae``) continue **from their
checkpoint** to ``eta · r0`` steps, and so on down to two (or at most ``max_rungs`` rungs: gate-rank's default
is one, every encoder one longer run, which ranked the whole pool better than halving on the validation in
docs/ranking.md). The predicted order: encoders that reached a later rung first; within a rung, by their value
there. Optionally rung 0 is *seeded* by zero-training scores: its
promotion and its order use the mean of the rung-0 rank and each score's rank (the scores need the benchmark's
features: classification benchmarks only; elsewhere the rung alone decides).

Each rung run is an ordinary ``gate-run`` experiment: the tier's protocol with ``trainer.max_steps=r_k``,
validation every ``r0`` steps, ``keep_checkpoints=all`` (``none`` on the last planned rung: nothing continues
from it) and ``evaluate_test=false`` (a rung records its validation
value only; the test split is never evaluated); its experiment id is its own (the step count is part
of it), its records land in the results store, and a rerun skips what is stored (complete-or-redo). A survivor's
next rung starts from a copy of its previous rung's ``last.ckpt`` (the run's resume path, ``facts.resumed_from_step``
says so); an interrupted rung resumes from its own checkpoint. The GATE recipes' schedulers do not depend on the
run length (ReduceLROnPlateau on the training loss), so a run stopped at ``r_k`` and continued is the same
schedule as one run to ``r_{k+1}``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gate.errors import GateError
from gate.ranking.budget import Ledger, RunCost, plan_schedule


@dataclasses.dataclass
class RungResult:
    encoder: str
    rung: int
    steps: int
    experiment: str
    value: float            # the best validation value of the monitor in this rung, oriented higher-is-better
    cost: RunCost
    params: float
    stored: bool            # already in the store before this call (not trained now)


@dataclasses.dataclass
class BenchmarkRanking:
    benchmark: str
    monitor: str
    higher_is_better: bool
    full_steps: int
    steps: tuple[int, ...]
    results: list[RungResult]
    order: list[str]                            # predicted best first
    seeded_by: tuple[str, ...] = ()
    source: str = "proxy"                       # "proxy" | "full" (every encoder's full run was stored)

    @property
    def predicted(self) -> pd.Series:
        """Higher-is-better prediction per encoder: minus the predicted position (0 = first)."""
        return pd.Series({e: -float(i) for i, e in enumerate(self.order)})

    def table(self) -> pd.DataFrame:
        rows = [{"benchmark": self.benchmark, "encoder": r.encoder, "rung": r.rung, "steps": r.steps,
                 "monitor": self.monitor, "value": r.value if self.higher_is_better else -r.value,
                 "experiment": r.experiment, "wall_seconds": r.cost.wall_seconds, "stored": r.stored}
                for r in self.results]
        return pd.DataFrame(rows)


def _orient(value: float, higher_is_better: bool) -> float:
    return value if higher_is_better else -value


def _rank_desc(values: Mapping[str, float]) -> dict[str, float]:
    s = pd.Series(values, dtype=float)
    return s.rank(ascending=False, method="average").to_dict()


def seeded_key(values: Mapping[str, float], scores: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Higher-is-better key combining a rung's values with score values: minus the mean of the ranks
    (1 = best) under the rung and under each score. Encoders a score lacks are ranked by the rung alone."""
    ranks = [_rank_desc(values)] + [_rank_desc({e: s[e] for e in values if e in s}) for s in scores]
    return {e: -float(np.mean([r[e] for r in ranks if e in r])) for e in values}


def successive_halving(encoders: Sequence[str], steps: Sequence[int], keeps: Sequence[int],
                       evaluate: Callable[[str, int, int, int | None], float],
                       seed_scores: Sequence[Mapping[str, float]] = (),
                       adjust: Callable[[int, list[str], list[int]], int | None] | None = None
                       ) -> tuple[list[str], list[int]]:
    """The halving itself, independent of how a run is made. ``evaluate(encoder, rung, steps, previous_steps)``
    trains (or reads) the encoder to ``steps`` and returns its higher-is-better value. ``adjust(k, alive, steps)``
    (before every rung after the first) returns the steps rung ``k`` may end at, or None to stop there (the
    budget). Returns the predicted order (best first) and the steps of the rungs that ran."""
    planned = list(steps)
    alive = list(encoders)
    eliminated: list[list[str]] = []
    ran: list[int] = []
    for k in range(len(planned)):
        if k and adjust is not None:
            allowed = adjust(k, alive, planned)
            if allowed is None or allowed <= planned[k - 1]:
                break
            if allowed < planned[k]:
                planned[k] = allowed
                del planned[k + 1:]
        values = {e: evaluate(e, k, planned[k], planned[k - 1] if k else None) for e in alive}
        key = seeded_key(values, seed_scores) if k == 0 and seed_scores else values
        ranked = sorted(alive, key=lambda e: (-key[e], list(encoders).index(e)))
        ran.append(planned[k])
        n_next = len(ranked) if k == len(planned) - 1 else min(len(ranked), keeps[k + 1])
        eliminated.append(ranked[n_next:])
        alive = ranked[:n_next]
    eliminated.append(alive)  # the last rung's order (or, stopped by the budget, the last promotion's)
    return [e for group in reversed(eliminated) for e in group], ran


def copy_checkpoint(src: Path, dst_dir: Path) -> bool:
    """Seed ``dst_dir`` with ``src`` as ``last.ckpt`` (written aside, then renamed: never a torn file) unless
    ``dst_dir`` already holds a checkpoint (an interrupted run of its own resumes from that)."""
    if dst_dir.exists() and any(dst_dir.glob("*.ckpt")):
        return False
    if not src.is_file():
        return False
    dst_dir.mkdir(parents=True, exist_ok=True)
    tmp = dst_dir / f".last.ckpt.{os.getpid()}.tmp"
    shutil.copyfile(src, tmp)
    os.replace(tmp, dst_dir / "last.ckpt")
    return True


@dataclasses.dataclass
class ProxyContext:
    """How the proxy makes one rung run: ``compose(overrides) -> DictConfig`` (Hydra's compose over conf/run.yaml),
    ``run(cfg) -> experiment id`` (gate's run_finetune), and the store's records for reading values back."""

    compose: Callable[[list[str]], Any]
    run: Callable[[Any], Any]
    records: Callable[[], list[dict[str, Any]]]
    runs_dir: Path
    echo: Callable[..., None] = print


def rung_overrides(steps: int, val_every: int, keep: str = "all") -> list[str]:
    """A rung's gate-run overrides. ``evaluate_test=false``: the proxy ranks on validation, so a rung never tests
    (no test pass, no ensembles: not part of its cost)."""
    return [f"trainer.max_steps={steps}", f"trainer.val_check_interval={val_every}", f"keep_checkpoints={keep}",
            "evaluate_test=false", "trainer.enable_progress_bar=false"]


def run_benchmark(benchmark: str, experiments: Sequence[Any], ctx: ProxyContext, *, budget: float, eta: int,
                  overhead_steps: float, full_seeds: int, ledger: Ledger, max_rungs: int | None = None,
                  seed_scores: Mapping[str, Mapping[str, float]] | None = None,
                  score_seconds: float = 0.0, known_full: Mapping[str, float] | None = None) -> BenchmarkRanking:
    """Successive halving on one benchmark. ``experiments``: the tier's full experiments of this benchmark for
    the proxy's seed, one per encoder (:class:`gate.tiers.expand.Experiment`). Every run's seconds go to
    ``ledger`` (``score_seconds``: the feature passes of the seeding scores), and each encoder's full-run seconds:
    ``known_full["<encoder> × <benchmark>"]`` (the stored full runs' own wall seconds, every seed) where given, else
    the estimate from its rung-0 run (the ledger keeps both: ``full`` and ``estimated``).
    Later rungs shrink (in multiples of ``r0``) or stop when the measured seconds would pass the budget."""
    from gate.metrics import monitor_mode

    encoders = [e.encoder for e in experiments]
    by_enc = {e.encoder: e for e in experiments}
    first = experiments[0].config
    full_steps = int(first["trainer"]["max_steps"])
    schedule = plan_schedule(len(encoders), full_steps, full_seeds, budget, eta, overhead_steps, max_rungs)
    r0 = schedule.r0
    planned = list(schedule.steps)
    ledger.spend(f"scores {benchmark}", score_seconds)
    results: list[RungResult] = []
    state: dict[str, Any] = {"monitor": None, "hib": True}

    def evaluate(enc: str, k: int, steps: int, prev: int | None) -> float:
        exp = by_enc[enc]
        # a survivor continues from its rung's checkpoint; nothing continues from the last planned rung (with one
        # rung: every run), so its checkpoints go once its records are stored (keep_checkpoints is not in the id)
        keep = "none" if k == len(schedule.steps) - 1 else "all"
        cfg, exp_id = _composed(ctx, exp, rung_overrides(steps, r0, keep))
        stored = _stored(ctx.records(), exp_id)
        was_stored = bool(stored)
        if not stored:
            ckpts = ctx.runs_dir / exp_id / "checkpoints"
            if prev is not None:
                src = ctx.runs_dir / _rung_id(ctx, exp, prev, r0) / "checkpoints" / "last.ckpt"
                if not copy_checkpoint(src, ckpts) and not any(ckpts.glob("*.ckpt")):
                    warnings.warn(f"{enc} × {benchmark}: rung {k} finds no checkpoint of rung {k - 1} ({src}); it "
                                  f"trains from scratch (the same experiment, at its full cost)", stacklevel=2)
            ctx.echo(f"[gate] rank  {benchmark}: {enc} rung {k} → {steps} steps", flush=True)
            ctx.run(cfg)
            stored = _stored(ctx.records(), exp_id)
            if not stored:
                raise GateError(f"{enc} × {benchmark}: rung {k} ({steps} steps, experiment {exp_id}) left no complete "
                                f"record set in the store")
        val = [r for r in stored if r.get("split") == "val"]
        if not val:
            raise GateError(f"experiment {exp_id}: no validation record of the checkpoint monitor")
        monitor = str(val[0]["metric"])
        hib = monitor_mode(monitor) == "max"
        state["monitor"], state["hib"] = monitor, hib
        facts = val[0].get("facts") or {}
        cost = RunCost.from_facts(facts)
        ledger.spend(f"run {exp_id}", cost.wall_seconds)
        if k == 0:
            key = f"{enc} × {benchmark}"
            ledger.estimate(key, full_seeds * cost.full_estimate(full_steps), (known_full or {}).get(key))
        value = _orient(float(val[0]["value"]), hib)
        params = facts.get("params")
        results.append(RungResult(enc, k, steps, exp_id, value, cost, float(params) if params else math.nan,
                                  was_stored))
        if was_stored:
            ctx.echo(f"[gate] rank  {benchmark}: {enc} rung {k} ({steps} steps) already stored", flush=True)
        return value

    def adjust(k: int, alive: list[str], steps: list[int]) -> int | None:
        """Rung k's end, shrunk (in multiples of r0) so the seconds measured so far stay within the budget."""
        spent = sum(r.cost.wall_seconds for r in results) + score_seconds
        full = [ledger.full.get(f"{e} × {benchmark}", 0.0) for e in encoders]
        first = {r.encoder: r.cost for r in results if r.rung == 0}
        per_step = sum(first[e].seconds_per_step for e in alive)
        if None in full or not math.isfinite(per_step):  # a rung-0 run resumed at its end timed no step
            ctx.echo(f"[gate] rank  {benchmark}: rung {k} keeps its planned {steps[k]} steps (a rung-0 run's cost was "
                     f"not measured: it resumed with no step left to time)", flush=True)
            return steps[k]
        allowed = budget * sum(full)
        overhead = sum(first[e].overhead_seconds for e in alive)
        affordable = (allowed - spent - overhead) / per_step if per_step > 0 else 0.0
        increment = min(steps[k] - steps[k - 1], int(affordable // r0) * r0)
        if increment < r0:
            ctx.echo(f"[gate] rank  {benchmark}: budget reached after rung {k - 1} ({spent:.0f} of {allowed:.0f} s)",
                     flush=True)
            return None
        return steps[k - 1] + increment

    seeds = [dict(s) for s in (seed_scores or {}).values() if s]
    order, ran = successive_halving(encoders, planned, schedule.keeps, evaluate, seeds, adjust)
    return BenchmarkRanking(benchmark, state["monitor"] or "", state["hib"], full_steps, tuple(ran), results,
                            order, tuple((seed_scores or {}).keys()))


def probe_costs(entries: Mapping[str, Sequence[Any]], benchmarks: Sequence[str], ctx: ProxyContext,
                steps: int) -> tuple[dict[str, RunCost], dict[str, float]]:
    """What a full run of each benchmark costs, measured: the pool's first encoder trains ``steps`` steps of the
    benchmark's own protocol (an ordinary gate-run experiment, stored: a rerun reads it back) and its full run is
    estimated as the probe's overhead + full steps × its seconds per step (:meth:`RunCost.full_estimate`).
    Benchmarks of one tier differ per step (a segmentation decoder, a video's frames), so a budget split by
    steps alone spends more seconds than planned on a costly benchmark (measured: 0.116 at budget 0.1 on a tier
    whose first benchmark was segmentation). Returns (the probe's :class:`RunCost` per benchmark — its
    ``full_estimate`` and its fixed cost in steps —, seconds each probe took)."""
    cost: dict[str, RunCost] = {}
    spent: dict[str, float] = {}
    for bench in benchmarks:
        exp = entries[bench][0]
        full_steps = int(exp.config["trainer"]["max_steps"])
        n = max(1, min(steps, full_steps))
        cfg, exp_id = _composed(ctx, exp, rung_overrides(n, n, "none"))
        stored = _stored(ctx.records(), exp_id)
        if not stored:
            ctx.echo(f"[gate] rank  {bench}: measuring its cost ({exp.encoder}, {n} steps)", flush=True)
            ctx.run(cfg)
            stored = _stored(ctx.records(), exp_id)
        facts = next((r.get("facts") for r in stored if r.get("facts")), None)
        run = RunCost.from_facts(facts or {})
        if not (math.isfinite(run.wall_seconds) and run.trained_steps > 0 and run.seconds_per_step > 0):
            raise GateError(f"{exp.encoder} × {bench}: the cost probe (experiment {exp_id}) recorded no step times")
        cost[bench] = run
        spent[f"probe {exp_id}"] = run.wall_seconds
    return cost, spent


def _stored(records: Sequence[Mapping[str, Any]], exp_id: str) -> list[dict[str, Any]]:
    return [dict(r) for r in records if r.get("experiment") == exp_id and r.get("kind") == "finetune"]


def _composed(ctx: ProxyContext, exp: Any, overrides: Sequence[str]) -> tuple[Any, str]:
    """The gate-run config of ``exp`` with ``overrides`` after its own, and that experiment's id."""
    from gate.engine.build import resolved_config
    from gate.results import experiment_id

    cfg = ctx.compose([*exp.overrides, *overrides])
    return cfg, experiment_id(resolved_config(cfg), "finetune")


def _rung_id(ctx: ProxyContext, exp: Any, steps: int, r0: int) -> str:
    return _composed(ctx, exp, rung_overrides(steps, r0))[1]
