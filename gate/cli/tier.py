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

import hydra
from omegaconf import DictConfig

from gate.cli.common import fail, hydra_entry, prepare_process, run_cli
from gate.engine.validate import validate_tier_config
from gate.errors import ConfigError

CMD = "gate-tier"
_LIST_KEYS = {"encoder": "encoders", "encoders": "encoders", "seeds": "seeds", "seed": "seeds"}


def normalise_args(argv: list[str], list_keys: dict[str, str] | None = None) -> list[str]:
    """``encoder=a,b`` → ``encoders=[a,b]``, ``seeds=0,1`` → ``seeds=[0,1]``, ``tier=x.yaml`` → ``tier_file=x.yaml``,
    ``overrides=[trainer.max_steps=10]`` → ``overrides=["trainer.max_steps=10"]`` (Hydra's parser takes an ``=``
    inside a list only quoted). A ConfigError for an empty name in a list (``encoder=a,,b``) or an unknown tier
    name (with the list of known ones). ``list_keys``: which keys take a comma list, and the key each becomes
    (gate-tier's by default; gate-rank passes its own)."""
    from gate.tiers.expand import known_tiers

    list_keys = _LIST_KEYS if list_keys is None else list_keys
    out = []
    has_searchpath = any(a.startswith("hydra.searchpath=") for a in argv)
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep:
            out.append(arg)
        elif key in list_keys:
            if value.startswith("["):
                out.append(f"{list_keys[key]}={value}")
                continue
            items = [v.strip() for v in value.split(",")]
            if not all(items):
                raise ConfigError(f"{key}={value!r} has an empty name: give {list_keys[key]} separated by single "
                                  f"commas ({key}=a,b)")
            out.append(f"{list_keys[key]}=[{','.join(items)}]")
        elif key == "overrides" and value.startswith("[") and value.endswith("]"):
            out.append(f"overrides={quote_items(value)}")
        elif key == "tier" and (value.endswith((".yaml", ".yml")) or "/" in value):
            out.append(f"tier_file={value}")
        elif key == "tier" and not has_searchpath and value not in known_tiers():
            raise ConfigError(f"tier={value!r} is unknown: known tiers are {known_tiers()} (or give the path of a "
                              f"tier YAML file, or add your config dir with hydra.searchpath=[file://DIR] for "
                              f"DIR/tier/{value}.yaml)")
        else:
            out.append(arg)
    return out


def quote_items(value: str) -> str:
    """``[a=1,b=[1,2]]`` → ``["a=1","b=[1,2]"]``: each top-level item of a list double-quoted (those already
    quoted, or holding a double quote, are kept as they are), so that Hydra reads ``key=value`` items as strings."""
    items, depth, current, quote = [], 0, "", ""
    for ch in value[1:-1]:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(current.strip())
            current = ""
            continue
        current += ch
    if current.strip():
        items.append(current.strip())
    quoted = [i if not i or i[0] in "'\"" or '"' in i else f'"{i}"' for i in items]
    return "[" + ",".join(quoted) + "]"


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


@hydra.main(version_base=None, config_path="pkg://gate.conf", config_name="tier_run")
def _main(cfg: DictConfig) -> None:
    prepare_process(cfg)
    started = time.monotonic()
    from hydra.core.hydra_config import HydraConfig

    from gate.tiers.expand import expand_tier, load_tier
    from gate.tiers.launchers import LaunchContext, LaunchResult, get_launcher

    plain = run_cli(CMD, validate_tier_config, cfg)  # gate-tier's settings and the launcher's, before any work
    searchpath = [str(s) for s in (HydraConfig.get().searchpath or [])]
    tier = run_cli(CMD, load_tier, plain["tier_file"] or plain["tier"])
    launch = plain["launch"]
    launcher = run_cli(CMD, get_launcher, launch)  # refuses launch=slurm without submitit/sbatch before anything
    describe_only = launcher.kind.describes_only
    say = (lambda *a, **k: print(*a, file=sys.stderr, **k)) if launcher.kind.output_on_stdout else print
    say(f"[gate] expanding tier {tier.name} for {', '.join(plain['encoders'])} ...", flush=True)
    plan = run_cli(CMD, expand_tier, tier, plain["encoders"], plain["paths"]["root"], seeds=plain["seeds"],
                   overrides=plain["overrides"], searchpath=searchpath, unprepared_is_error=not describe_only)
    if not plain["force"]:
        run_cli(CMD, plan.mark_done, plan.store())
    for line in plan.describe():
        say(line, flush=True)
    pending = plan.experiments if plain["force"] else plan.pending
    ctx = LaunchContext(tier=tier.name, run_dir=plan.run_dir, options=plain["launcher"], force=plain["force"],
                        out=plain["out"], gpus=visible_gpus() if launcher.kind.pins_gpus else [],
                        interactive=sys.stdout.isatty(), echo=print)
    result = run_cli(CMD, launcher, pending, ctx) if pending or describe_only else LaunchResult(ran=True)
    if not result.ran:
        return
    if not pending:
        print(f"[gate] tier {tier.name}: all {len(plan.experiments)} experiment(s) are done; nothing to train", flush=True)
    done = len(plan.experiments) - len(result.failed)
    if done == 0:  # nothing to score or report on: the tier's own account, not an error about an empty store
        _account(tier.name, plan, result, time.monotonic() - started)
        sys.exit(1)
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
    _account(tier.name, plan, result, time.monotonic() - started)
    if report is not None:
        print(f"[gate] report: {Path(report).resolve()}", flush=True)
    if result.failed:
        sys.exit(1)


def _account(name: str, plan, result, elapsed: float) -> None:
    """The tier's closing lines: how many experiments are done, which failed (or were stopped) and how to go on."""
    failed = len(result.failed)
    stopped = len(result.stopped)
    print(f"[gate] tier {name}: {len(plan.experiments) - failed} of {len(plan.experiments)} experiment(s) done, "
          f"{failed} failed{f' ({stopped} stopped by a signal)' if stopped else ''}; {elapsed / 60:.1f} min", flush=True)
    for exp, log in result.failed:
        print(f"  FAILED {exp.label} [{exp.id}]: log {log}", flush=True)
    if failed:
        print("[gate] rerun the same command to run what failed (done experiments are skipped, stopped ones resume "
              "from their last checkpoint)", flush=True)


def main() -> None:
    try:
        sys.argv = [sys.argv[0], *normalise_args(sys.argv[1:])]
    except ConfigError as err:
        fail(CMD, str(err))
    hydra_entry(CMD, _main)  # an unknown key or an unparsable override: one line, not Hydra's report


if __name__ == "__main__":
    main()
