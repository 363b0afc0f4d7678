"""The proxy's runs: one short run of each encoder per (proxy seed, benchmark), ranked on its extrapolated end.

A block (:class:`gate.ranking.plan.Block`) runs every encoder of the pool on one benchmark with one proxy seed: the
tier's own ``gate-run`` protocol for that seed with ``trainer.max_steps`` and ``trainer.val_check_interval`` set so
that it validates ``val_points`` times, ``evaluate_test=false`` (a proxy run records its validation only; the test
split is never evaluated) and ``keep_checkpoints=none`` (``all`` where ``halving=contested`` may continue it: a
longer run then starts from its last checkpoint, :func:`continue_into`). Each run is an ordinary
experiment in the results store (its step count and validation interval are part of its id): a rerun reads it back.

A benchmark whose runs no encoder lifts above its metric's no-skill value (:func:`no_skill`: r2 0, AUC 0.5) ranks
nothing but its noise: gate-rank leaves it out of the ranking and re-plans without it (its seconds still count).

Its value is the validation curve of the metric the tier ranks the benchmark by — ``facts.tier_val_curve`` where
that is not the checkpoint monitor, else the monitor's ``facts.val_curve`` — extrapolated to the full run's steps
(:func:`gate.ranking.curves.extrapolate`); a run recorded without a curve is ranked by its best validation value.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from gate.errors import GateError
from gate.paths import LAST_CHECKPOINT, checkpoints_folder, run_folder
from gate.ranking.curves import extrapolate, ranked_curve


@dataclasses.dataclass
class ProxyRun:
    encoder: str
    benchmark: str
    seed: int
    steps: int
    experiment: str
    monitor: str
    higher_is_better: bool
    best: float                 # the best validation value (the metric's own sign)
    value: float                # the extrapolated end of the curve at the full run's steps (the metric's own sign)
    lo: float
    hi: float
    method: str                 # how ``value`` was read: "ensemble" (extrapolated) or "last value" / "best value"
    seconds: float | None       # the run's wall seconds (None: not measured)
    planned: float              # its predicted seconds when the block was planned
    stored: bool                # read back from the store (run by an earlier call)
    facts: dict[str, Any]
    run_dir: Path | None = None  # its checkpoints' folder (halving continues a shorter run from its last one)

    @property
    def oriented(self) -> float:
        """Higher is better."""
        return self.value if self.higher_is_better else -self.value


@dataclasses.dataclass
class ProxyContext:
    """How a proxy run is made: ``compose(overrides) -> DictConfig`` (Hydra's compose over conf/run.yaml),
    ``run(cfg)`` (gate's run_finetune), and the store's records for reading values back."""

    compose: Callable[[list[str]], Any]
    run: Callable[[Any], Any]
    records: Callable[[], list[dict[str, Any]]]
    runs_dir: Path
    echo: Callable[..., None] = print


#: A benchmark's proxy runs rank nothing when no encoder's best validation value gets this share of the way from
#: its metric's no-skill value to the metric's best (r2: 0.05; AUC: 0.525). Set before pool E was measured
#: (docs/ranking.md), after pool C showed a benchmark no encoder learns; never tuned on a pool's results.
NO_SKILL_SHARE = 0.05


def no_skill(runs: Sequence[ProxyRun]) -> str | None:
    """Why one benchmark's proxy runs (every seed's so far) rank nothing — no encoder got :data:`NO_SKILL_SHARE` of
    the way from the metric's no-skill value to its best — or None: some encoder did, or the metric declares no
    constant no-skill value (accuracy's is the data's chance rate, not the metric's)."""
    from gate.metrics import lookup

    info = lookup(runs[0].monitor) if runs else None
    if info is None or info.no_skill is None:
        return None
    perfect = info.high if info.higher_is_better else info.low
    if not math.isfinite(perfect):
        return None
    bar = info.no_skill + NO_SKILL_SHARE * (perfect - info.no_skill)
    values = [r.best for r in runs if math.isfinite(r.best)]
    if not values:
        return None
    top = max(values) if info.higher_is_better else min(values)
    if (top > bar) if info.higher_is_better else (top < bar):
        return None
    return (f"no encoder learnt it (best validation {info.name} {top:.3g} of {len(values)} runs; no skill is "
            f"{info.no_skill:g}, the bar {bar:g} is {NO_SKILL_SHARE:.0%} of the way to {perfect:g})")


def proxy_overrides(steps: int, val_every: int, keep: str = "none") -> list[str]:
    """A proxy run's gate-run overrides after the tier's protocol (``keep``: its checkpoints once stored; none, or
    all for a run that halving may continue)."""
    return [f"trainer.max_steps={steps}", f"trainer.val_check_interval={val_every}", f"keep_checkpoints={keep}",
            "evaluate_test=false", "trainer.enable_progress_bar=false"]


def continue_into(checkpoint: Path, run_dir: Path) -> bool:
    """Start a run in ``run_dir`` from a shorter run's ``checkpoint`` (gate-run resumes from it: a run resumed
    mid-epoch is the run never stopped, tests/test_resume_exact.py). False where there is nothing to start from: the
    checkpoint is gone (pruned, or a twin call's), or the run has a checkpoint of its own (an interrupted start)."""
    from gate.files import atomic_write

    target = checkpoints_folder(run_dir) / LAST_CHECKPOINT
    if target.exists():
        return False
    try:
        atomic_write(target, lambda tmp: _share(checkpoint, tmp), "a checkpoint to continue from")
    except (OSError, GateError):
        return False
    return True


def _share(checkpoint: Path, tmp: str) -> None:
    """``checkpoint`` under the name ``tmp``: a hard link where the filesystem allows one (a large model's state is not
    copied; safe because a checkpoint is only ever replaced by a rename, never rewritten in place:
    :class:`gate.engine.training.trainer.SafeCheckpointIO`), else a copy."""
    import shutil

    os.unlink(tmp)
    try:
        os.link(checkpoint, tmp)
    except OSError:
        shutil.copyfile(checkpoint, tmp)


def continued_seconds(facts: Mapping[str, Any], from_step: int) -> float | None:
    """A run's own seconds: a run continued from a shorter run's checkpoint at ``from_step`` carries that run's
    seconds up to it (``earlier_wall_seconds``), which the shorter run's own record already counts."""
    wall = facts.get("wall_seconds")
    if not isinstance(wall, (int, float)) or not math.isfinite(wall):
        return None
    earlier = facts.get("earlier_wall_seconds")
    if facts.get("resumed_from_step") == from_step and isinstance(earlier, (int, float)):
        return float(wall) - float(earlier)
    return float(wall)


def composed(ctx: ProxyContext, exp: Any, overrides: Sequence[str]) -> tuple[Any, str]:
    """The gate-run config of ``exp`` with ``overrides`` after its own, and that experiment's id."""
    from gate.engine.validate import resolved_config
    from gate.results import experiment_id

    cfg = ctx.compose([*exp.overrides, *overrides])
    return cfg, experiment_id(resolved_config(cfg), "finetune")


def stored(records: Sequence[Mapping[str, Any]], exp_id: str) -> list[dict[str, Any]]:
    return [dict(r) for r in records if r.get("experiment") == exp_id and r.get("kind") == "finetune"]


def read_run(rows: Sequence[Mapping[str, Any]], full_steps: int) -> tuple[str, bool, float, float, float, float, str,
                                                                             dict[str, Any]]:
    """(monitor, higher_is_better, best, value, lo, hi, method, facts) of a stored proxy run's records."""
    from gate.metrics import lookup, monitor_mode

    val = [r for r in rows if r.get("split") == "val"]
    if not val:
        raise GateError(f"experiment {rows[0].get('experiment') if rows else '?'}: no validation record of the "
                        f"checkpoint monitor")
    facts = dict(val[0].get("facts") or {})
    monitor, curve = ranked_curve(facts, str(val[0]["metric"]))
    hib = monitor_mode(monitor) == "max"
    best = float(val[0]["value"]) if monitor == val[0]["metric"] else (max if hib else min)(float(v) for _, v in curve)
    known = lookup(monitor)
    low = known.low if known is not None else -math.inf
    high = known.high if known is not None else math.inf
    if len(curve) >= 1:
        e = extrapolate(curve, full_steps, higher_is_better=hib, low=low, high=high)
        if e.method != "none" and math.isfinite(e.value):
            return monitor, hib, best, e.value, e.lo, e.hi, e.method, facts
    return monitor, hib, best, best, best, best, "best value", facts


def run_block(block: Any, experiments: Mapping[str, Any], ctx: ProxyContext, *, full_steps: int,
              planned: Mapping[str, float], order: Sequence[str], keep: str = "none",
              continue_from: Mapping[str, tuple[Path, int]] | None = None) -> Iterator[ProxyRun]:
    """Every encoder's run of ``block`` (a :class:`gate.ranking.plan.Block`), in ``order`` (the prior's, where it
    ranks the pool), each yielded as it ends, so that the caller can stop a block the budget no longer holds:
    ``experiments`` maps each encoder to its full experiment of the block's seed and benchmark; ``planned`` each
    encoder's predicted seconds; ``keep``: the runs' checkpoints once stored; ``continue_from``: per encoder, a
    shorter run's last checkpoint and its step, to start from (its seconds are then the run's own)."""
    for enc in order:
        exp = experiments[enc]
        cfg, exp_id = composed(ctx, exp, proxy_overrides(block.steps, block.val_every, keep))
        run_dir = run_folder(str(cfg.paths.runs), exp_id)
        rows = stored(ctx.records(), exp_id)
        was_stored = bool(rows)
        start = (continue_from or {}).get(enc)
        if not rows and start is not None and continue_into(start[0], run_dir):
            ctx.echo(f"[gate] rank  {block.benchmark} seed {block.seed}: {enc} continues from its {start[1]}-step "
                     f"run", flush=True)
        if not rows:
            ctx.echo(f"[gate] rank  {block.benchmark} seed {block.seed}: {enc} → {block.steps} steps "
                     f"(validating every {block.val_every})", flush=True)
            ctx.run(cfg)
            rows = stored(ctx.records(), exp_id)
            if not rows:
                raise GateError(f"{enc} × {block.benchmark}: the proxy run ({block.steps} steps, experiment {exp_id}) "
                                f"left no complete record set in the store")
        monitor, hib, best, value, lo, hi, method, facts = read_run(rows, full_steps)
        seconds = continued_seconds(facts, start[1]) if start is not None else continued_seconds(facts, -1)
        if was_stored:
            ctx.echo(f"[gate] rank  {block.benchmark} seed {block.seed}: {enc} ({block.steps} steps) already stored",
                     flush=True)
        yield ProxyRun(enc, block.benchmark, block.seed, block.steps, exp_id, monitor, hib, best, value, lo, hi,
                       method, seconds, float(planned.get(enc, math.nan)), was_stored, facts, run_dir)
