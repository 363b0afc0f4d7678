"""One fine-tuning experiment, start to finish: build, (resume,) fit, test best + ensembles, record."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import hydra
import lightning as L
from omegaconf import DictConfig

from ..build import build_adapter, build_datamodule, build_encoder, instantiate_component, resolved_config
from ..model import GATEModel
from ..results import Record, ResultsStore, experiment_id, git_describe
from .ensemble import ranked_checkpoints, test_ensembles
from .loggers import logger_run_dir
from .trainer import build_trainer, checkpoint_callback


@dataclasses.dataclass
class FinetuneResult:
    experiment: str
    skipped: bool
    metrics: dict[str, float]
    results_path: Path
    run_dir: Path
    logger_dir: str | None = None


def run_finetune(cfg: DictConfig) -> FinetuneResult:
    """Run the experiment ``cfg`` (a composed ``run.yaml``) unless the store already has it."""
    config = resolved_config(cfg)
    exp = experiment_id(config)
    store = ResultsStore(config["paths"]["results"])
    run_dir = Path(config["paths"]["runs"]).expanduser().resolve() / exp
    if store.has_experiment(exp, kind="finetune") and not config.get("force", False):
        return FinetuneResult(exp, True, {}, store.path, run_dir)

    ckpt_dir = run_dir / "checkpoints"
    if config.get("force", False) and ckpt_dir.exists():
        shutil.rmtree(ckpt_dir)  # force: train from scratch, do not resume the finished run
    last = ckpt_dir / "last.ckpt"
    L.seed_everything(int(config["seed"]), workers=True, verbose=False)

    encoder = build_encoder(config["encoder"])
    datamodule = build_datamodule(config, encoder)
    adapter = build_adapter(config["adapter"], encoder, datamodule.spec)
    recipe = config["recipe"]
    model = GATEModel(encoder, adapter,
                      optimizer=hydra.utils.instantiate(recipe["optimizer"], _convert_="all"),
                      scheduler=hydra.utils.instantiate(recipe["scheduler"], _convert_="all")
                      if recipe.get("scheduler") else None,
                      scheduler_interval=recipe.get("scheduler_interval", "step"),
                      scheduler_monitor=recipe.get("scheduler_monitor", "train/loss"),
                      freeze_encoder=bool(recipe.get("freeze_encoder", False)))

    logger = instantiate_component(config["logger"], name=exp) if config.get("logger") else None
    ensemble_sizes = tuple(config.get("ensembles", (1, 3, 5)))
    checkpoints = checkpoint_callback(ckpt_dir, adapter.monitor, adapter.monitor_mode,
                                      top_k=max(ensemble_sizes + (1,)))
    trainer = build_trainer(config["trainer"], [checkpoints], logger, run_dir)

    if last.exists():
        print(f"[gate] resuming experiment {exp} from {last}")
    trainer.fit(model, datamodule=datamodule, ckpt_path=str(last) if last.exists() else None)
    ranked = ranked_checkpoints(checkpoints)  # before testing: loading a checkpoint restores callback state
    best_val = checkpoints.best_model_score
    if not ranked:
        raise RuntimeError(f"experiment {exp}: no validation checkpoint was saved; set trainer.val_check_interval "
                           f"<= trainer.max_steps ({config['trainer'].get('max_steps')})")
    tested = trainer.test(model, datamodule=datamodule, ckpt_path=ranked[0], verbose=False)[0]
    metrics = {k.removeprefix("test/"): float(v) for k, v in tested.items() if k.startswith("test/")}
    metrics.update(test_ensembles(trainer, model, datamodule, ranked, ensemble_sizes))
    if logger is not None:
        logger.log_metrics({f"test/{k}": v for k, v in metrics.items()}, step=trainer.global_step)

    records = finetune_records(config, exp, adapter, metrics, float(best_val))
    store.append(records)
    logger_dir = logger_run_dir(logger)
    if logger is not None and hasattr(logger, "experiment") and hasattr(logger.experiment, "finish"):
        logger.experiment.finish()
    return FinetuneResult(exp, False, metrics, store.path, run_dir, logger_dir)


def finetune_records(config: dict[str, Any], exp: str, adapter, metrics: dict[str, float],
                     best_val: float) -> list[Record]:
    common = dict(experiment=exp, kind="finetune", encoder=config["encoder"]["name"],
                  dataset=config["dataset"]["name"], task=config["dataset"]["task"],
                  adapter=config["adapter"]["name"], recipe=config["recipe"]["name"], seed=int(config["seed"]),
                  git=git_describe(), config={k: v for k, v in config.items() if k not in ("paths", "logger")})
    rows = [Record(split="test", metric=name, value=value, higher_is_better=adapter.higher_is_better(name), **common)
            for name, value in sorted(metrics.items())]
    rows.append(Record(split="val", metric=adapter.monitor, value=best_val,
                       higher_is_better=adapter.monitor_mode == "max", **common))
    return rows
