"""gate-tier's stage, from its checked settings (conf/tier_run.yaml composed) to the tier's account: the tier loaded
and expanded into experiments, the pending ones handed to the launcher, then (where the jobs ran here) the tier's
scores and its report. The CLI (:func:`gate.cli.common.gate_command`) composes, calls :func:`parse` once, then
:func:`run`, and prints what :meth:`TierOutcome.report` says.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


@dataclasses.dataclass(frozen=True)
class TierCall:
    """gate-tier's settings, checked once, with what they name loaded: the tier and the launcher."""

    plain: Mapping[str, Any]
    searchpath: list[str]
    tier: Any                      # gate.tiers.spec.Tier
    launcher: Any                  # gate.tiers.launchers.Launcher

    @property
    def score(self) -> bool:
        return bool(self.tier.score if self.plain["score"] is None else self.plain["score"])

    @property
    def uses_lightning(self) -> bool:
        """Scores are computed in this process only where the jobs run here."""
        return self.score and not self.launcher.kind.describes_only


@dataclasses.dataclass
class TierOutcome:
    name: str
    plan: Any = None               # gate.tiers.expand.Plan
    result: Any = None             # gate.tiers.launchers.LaunchResult
    seconds: float = 0.0
    report_path: Path | None = None
    accounted: bool = True         # False: the launcher only described the jobs (nothing to account for)

    def report(self) -> int:
        """The tier's closing lines (how many experiments are done, which failed and how to go on) and its exit code:
        1 when an experiment failed or none is done."""
        if not self.accounted:
            return 0
        failed = len(self.result.failed)
        stopped = len(self.result.stopped)
        total = len(self.plan.experiments)
        print(f"[gate] tier {self.name}: {total - failed} of {total} experiment(s) done, {failed} failed"
              f"{f' ({stopped} stopped by a signal)' if stopped else ''}; {self.seconds / 60:.1f} min", flush=True)
        for exp, log in self.result.failed:
            print(f"  FAILED {exp.label} [{exp.id}]: log {log}", flush=True)
        if failed:
            print("[gate] rerun the same command to run what failed (done experiments are skipped, stopped ones "
                  "resume from their last checkpoint)", flush=True)
        if self.report_path is not None:
            print(f"[gate] report: {Path(self.report_path).resolve()}", flush=True)
        return 1 if failed or total == failed else 0


def parse(cfg: Any) -> TierCall:
    """gate-tier's settings and the launcher's (:func:`gate.engine.validate.validate_tier_config`), the tier file,
    the launcher (launch=slurm without submitit or sbatch is refused here) and the file it writes to (launch=json's
    out=), before any work."""
    from hydra.core.hydra_config import HydraConfig

    from gate.engine.validate import validate_tier_config
    from gate.tiers.expand import load_tier
    from gate.tiers.launchers import get_launcher

    plain = validate_tier_config(cfg)
    searchpath = [str(s) for s in (HydraConfig.get().searchpath or [])]
    tier = load_tier(plain["tier_file"] or plain["tier"])
    launcher = get_launcher(plain["launch"])
    launcher.check_out(plain["out"])
    return TierCall(plain, searchpath, tier, launcher)


def visible_gpus() -> list[str]:
    """The GPU ids jobs may be pinned to: ``CUDA_VISIBLE_DEVICES``'s entries (else 0..n-1), as many as torch sees."""
    try:
        import torch

        count = torch.cuda.device_count()
    except Exception:  # noqa: BLE001 - no usable CUDA: the CPU
        count = 0
    if count == 0:
        return []
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [x.strip() for x in env.split(",") if x.strip()] if env else [str(i) for i in range(count)]
    return ids[:count]


def run(call: TierCall, echo: Callable[..., None] = print) -> TierOutcome:
    """Expand, launch what is pending, then score and summarise what ran (:mod:`gate.tiers.summary`)."""
    from gate.tiers.expand import expand_tier
    from gate.tiers.launchers import LaunchContext, LaunchResult

    started = time.monotonic()
    plain, tier, launcher = call.plain, call.tier, call.launcher
    describe_only = launcher.kind.describes_only
    say = (lambda *a, **k: print(*a, file=sys.stderr, **k)) if launcher.kind.output_on_stdout else echo
    say(f"[gate] expanding tier {tier.name} for {', '.join(plain['encoders'])} ...", flush=True)
    plan = expand_tier(tier, plain["encoders"], plain["paths"]["root"], seeds=plain["seeds"],
                       overrides=plain["overrides"], searchpath=call.searchpath, unprepared_is_error=not describe_only,
                       progress=lambda line: say(line, flush=True))
    if not plain["force"]:
        plan.mark_done(plan.store())
    for line in plan.describe():
        say(line, flush=True)
    pending = plan.experiments if plain["force"] else plan.pending
    ctx = LaunchContext(tier=tier.name, run_dir=plan.run_dir, options=plain["launcher"], force=plain["force"],
                        out=plain["out"], gpus=visible_gpus() if launcher.kind.pins_gpus else [],
                        interactive=sys.stdout.isatty(), echo=echo)
    result = launcher(pending, ctx) if pending or describe_only else LaunchResult(ran=True)
    outcome = TierOutcome(tier.name, plan, result, accounted=result.ran)
    if not result.ran:
        return outcome
    if not pending:
        echo(f"[gate] tier {tier.name}: all {len(plan.experiments)} experiment(s) are done; nothing to train", flush=True)
    if len(plan.experiments) == len(result.failed):  # nothing to score or report on: the account, not an error
        outcome.seconds = time.monotonic() - started
        return outcome
    score_ids: set[str] = set()
    score_failures: list[str] = []
    if call.score:
        from gate.tiers.summary import score_tier

        score_ids, score_failures = score_tier(plan, searchpath=call.searchpath)
    if plain["report"]:
        from gate.tiers.summary import summarise_tier

        outcome.report_path = summarise_tier(plan, plain["paths"]["reports"], score_ids=score_ids,
                                             score_failures=score_failures, failed=result.failed).report
    outcome.seconds = time.monotonic() - started
    return outcome
