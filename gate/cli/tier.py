"""gate-tier: a tier into jobs (composed by Hydra from conf/tier_run.yaml), then the tier's report.

    gate-tier                                                  # demo tier: efficientnet_lite0 vs resnet18_scratch
    gate-tier tier=small encoder=my_encoder launch=commands    # one gate-run command per pending experiment
    gate-tier tier=demo encoder=efficientnet_lite0,efficientnet_lite1,resnet18_scratch

``encoder=a,b`` (Hydra's sweep syntax) is read as the list ``encoders=[a,b]`` and ``tier=<path>.yaml`` as a tier
file, before Hydra parses the command line: gate-tier runs its experiments itself, never as a Hydra sweep.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from gate.cli.common import fail, prepare_process, run_cli
from gate.errors import ConfigError

CMD = "gate-tier"
_LIST_KEYS = {"encoder": "encoders", "encoders": "encoders", "seeds": "seeds", "seed": "seeds"}


def normalise_args(argv: list[str]) -> list[str]:
    """``encoder=a,b`` → ``encoders=[a,b]``, ``seeds=0,1`` → ``seeds=[0,1]``, ``tier=x.yaml`` → ``tier_file=x.yaml``;
    an unknown tier name is refused here with the list of known ones."""
    from gate.tiers.expand import known_tiers

    out = []
    has_searchpath = any(a.startswith("hydra.searchpath=") for a in argv)
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep:
            out.append(arg)
        elif key in _LIST_KEYS:
            items = value if value.startswith("[") else "[" + ",".join(v.strip() for v in value.split(",") if v.strip()) + "]"
            out.append(f"{_LIST_KEYS[key]}={items}")
        elif key == "tier" and (value.endswith((".yaml", ".yml")) or "/" in value):
            out.append(f"tier_file={value}")
        elif key == "tier" and not has_searchpath and value not in known_tiers():
            fail(CMD, f"tier={value!r} is unknown: known tiers are {known_tiers()} (or give the path of a tier "
                      f"YAML file, or add your config dir with hydra.searchpath=[file://DIR] for DIR/tier/{value}.yaml)")
        else:
            out.append(arg)
    return out


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


def _check(plain: dict[str, Any]) -> None:
    problems = []
    enc = plain.get("encoders")
    if not isinstance(enc, list) or not enc or not all(isinstance(e, str) and e for e in enc):
        problems.append(f"encoders={enc!r} is invalid: expected encoder names (encoder=a or encoder=a,b)")
    seeds = plain.get("seeds")
    if seeds is not None and (not isinstance(seeds, list) or not seeds or not all(
            isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)):
        problems.append(f"seeds={seeds!r} is invalid: expected integers >= 0 (seeds=0,1,2) or null (the tier's)")
    for key in ("force", "report"):
        if not isinstance(plain.get(key), bool):
            problems.append(f"{key}={plain.get(key)!r} is invalid: expected true or false")
    if plain.get("score") is not None and not isinstance(plain.get("score"), bool):
        problems.append(f"score={plain.get('score')!r} is invalid: expected true, false or null (the tier's)")
    ovs = plain.get("overrides")
    if not isinstance(ovs, list) or not all(isinstance(o, str) and "=" in o for o in ovs):
        problems.append(f"overrides={ovs!r} is invalid: expected a list of gate-run overrides ([key=value,...])")
    if problems:
        raise ConfigError("; ".join(problems))


@hydra.main(version_base=None, config_path="pkg://gate.conf", config_name="tier_run")
def _main(cfg: DictConfig) -> None:
    prepare_process(cfg)
    started = time.monotonic()
    from hydra.core.hydra_config import HydraConfig

    from gate.tiers.expand import expand_tier, load_tier
    from gate.tiers.launchers import LaunchContext, LaunchResult, get_launcher

    plain = run_cli(CMD, OmegaConf.to_container, cfg, resolve=True)
    searchpath = [str(s) for s in (HydraConfig.get().searchpath or [])]
    run_cli(CMD, _check, plain)
    tier = run_cli(CMD, load_tier, plain["tier_file"] or plain["tier"])
    launch = plain["launch"]
    launcher = run_cli(CMD, get_launcher, launch)  # refuses launch=slurm without submitit/sbatch before anything
    describe_only = launch in ("commands", "json")
    say = (lambda *a, **k: print(*a, file=sys.stderr, **k)) if launch == "commands" else print
    say(f"[gate] expanding tier {tier.name} for {', '.join(plain['encoders'])} ...", flush=True)
    plan = run_cli(CMD, expand_tier, tier, plain["encoders"], plain["paths"]["root"], seeds=plain["seeds"],
                   overrides=plain["overrides"], searchpath=searchpath)
    if not plain["force"]:
        run_cli(CMD, plan.mark_done, plan.store())
    for line in plan.describe():
        say(line, flush=True)
    pending = plan.experiments if plain["force"] else plan.pending
    ctx = LaunchContext(tier=tier.name, run_dir=plan.run_dir, options=plain["launcher"], force=plain["force"],
                        out=plain["out"], gpus=visible_gpus() if launch == "local" else [],
                        interactive=sys.stdout.isatty(), echo=print)
    result = run_cli(CMD, launcher, pending, ctx) if pending or describe_only else LaunchResult(ran=True)
    if not result.ran:
        return
    if not pending:
        print(f"[gate] tier {tier.name}: all {len(plan.experiments)} experiment(s) are done; nothing to train", flush=True)
    score = tier.score if plain["score"] is None else plain["score"]
    score_ids: set[str] = set()
    score_failures: list[str] = []
    if score:
        from gate.cli.common import quiet_lightning
        from gate.tiers.summary import score_tier

        quiet_lightning()
        score_ids, score_failures = run_cli(CMD, score_tier, plan, searchpath=searchpath)
    report = None
    if plain["report"]:
        from gate.tiers.summary import summarise_tier

        summary = run_cli(CMD, summarise_tier, plan, plain["paths"]["reports"], score_ids=score_ids,
                          score_failures=score_failures, failed=result.failed)
        report = summary.report
    elapsed = time.monotonic() - started
    print(f"[gate] tier {tier.name}: {len(plan.experiments) - len(result.failed)} of {len(plan.experiments)} "
          f"experiment(s) done, {len(result.failed)} failed; {elapsed / 60:.1f} min", flush=True)
    for exp, log in result.failed:
        print(f"  FAILED {exp.label} [{exp.id}]: log {log}", flush=True)
    if report is not None:
        print(f"[gate] report: {Path(report).resolve()}", flush=True)
    if result.failed:
        sys.exit(1)


def main() -> None:
    sys.argv = [sys.argv[0], *normalise_args(sys.argv[1:])]
    _main()


if __name__ == "__main__":
    main()
