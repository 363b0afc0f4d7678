"""One fine-tuning experiment, start to finish: validate, build, (resume,) fit, test best + ensembles, record.
With ``evaluate_test=false`` the test step is left out: the run records its best validation value only.

The run is killable at any moment and safe beside its twin: a per-experiment lock keeps two identical runs
apart; records are appended as one complete set (a torn set does not count as done); an interrupted run
resumes from its newest complete checkpoint; checkpoints other than the best are removed once the records
are stored (``keep_checkpoints``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import time
import warnings
from pathlib import Path
from typing import Any

from ... import signals
from ...data.hub import unavailable_copy_of
from ...errors import DatasetUnavailable
from ...files import no_space
from ...paths import checkpoints_folder
from ...results import ExperimentLock, Record, ResultsStore, git_describe, identity
from ..validate import Checked
from .devices import check_devices
from .distributed import process_rank


@dataclasses.dataclass
class FinetuneResult:
    experiment: str
    skipped: bool
    metrics: dict[str, float]
    results_path: Path
    run_dir: Path
    logger_dir: str | None = None
    facts: dict[str, Any] | None = None
    label: str = ""          # encoder × dataset × adapter × recipe (seed), as gate-run prints it

    def report(self) -> int:
        """gate-run's lines: the test metrics and where everything went (rank 0 of a data-parallel run only)."""
        if process_rank() != 0:
            return 0
        if self.skipped:
            print(f"[gate] experiment {self.experiment} ({self.label}) is already in {self.results_path}; "
                  f"skipping (force=true reruns it)")
            return 0
        print(f"[gate] experiment {self.experiment}: {self.label}")
        width = max(len(k) for k in self.metrics) if self.metrics else 0
        for key, value in sorted(self.metrics.items()):
            print(f"  test/{key:<{width}}  {value:.4f}")
        print(f"[gate] results store: {self.results_path}")
        print(f"[gate] checkpoints:   {self.run_dir}")
        if self.logger_dir:
            print(f"[gate] logger run dir: {self.logger_dir}")
        return 0


def run_finetune(checked: Checked) -> FinetuneResult:
    """Run the experiment ``checked`` (a composed ``run.yaml`` parsed once, where it was composed:
    :func:`gate.engine.validate.parse_run`, which reports every problem before anything is built) unless the store
    already has it."""
    if not isinstance(checked, Checked):
        raise TypeError(f"run_finetune takes gate-run's parse, got a {type(checked).__name__}: "
                        f"run_finetune(gate.engine.validate.parse_run(cfg))")
    result = _run(checked)
    run = checked.run
    label = f"{run.encoder['name']} × {checked.spec.name} × {run.adapter['name']} × {run.recipe.name} (seed {run.seed})"
    return dataclasses.replace(result, label=label)


def _run(checked: Checked) -> FinetuneResult:
    run, exp, run_dir = checked.run, checked.experiment, checked.run_dir
    store = ResultsStore(run.paths.results)
    force = run.force
    store.check_writable()  # a store that cannot take the records: said now, not after hours of training
    if store.has_experiment(exp, kind="finetune") and not force:
        return FinetuneResult(exp, True, {}, store.path, run_dir)
    # A run answered without training (stored above, or its data missing here) never imports the training stack
    # (Lightning, torchmetrics: seconds); the checks that need it come next.
    missing = unavailable_copy_of(checked.config["dataset"])
    if missing:
        raise DatasetUnavailable(missing)
    check_devices(run.trainer)  # a GPU asked for on a machine without one: before any work
    # a full disk anywhere in the run (a checkpoint, the logger's files, the records) names the file and what to free
    with no_space(run_dir, "the run's checkpoints, logs and records"):
        if process_rank() != 0:  # another rank of a data-parallel run: rank 0 holds the lock and writes (read-only)
            return _finetune(checked, exp, store, run_dir, force, lead=False)
        with ExperimentLock(run_dir, exp):
            if store.has_experiment(exp, kind="finetune") and not force:  # a twin finished while we waited
                return FinetuneResult(exp, True, {}, store.path, run_dir)
            return _finetune(checked, exp, store, run_dir, force, lead=True)


def _finetune(checked: Checked, exp: str, store: ResultsStore, run_dir: Path, force: bool,
              lead: bool) -> FinetuneResult:
    """The run itself. ``lead``: this process is global rank 0, the only one that changes files (checkpoints set
    aside or removed, records, pruning); other ranks of a data-parallel run follow read-only."""
    from ..build import build_adapter, build_datamodule, build_encoder, build_model, instantiate_component, run_splits
    from .usage import cpu_seconds

    run, config, spec = checked.run, checked.config, checked.spec  # checked and typed once (gate.settings.RunConfig)
    since, started = (cpu_seconds(), time.monotonic()), time.perf_counter()  # the run's cost counts its data
    # The data first, then the training stack (Lightning, torchmetrics: seconds): a run already stored, one whose data
    # is missing, and one whose data the run cannot use (a class count its train split contradicts) never import it
    splits = run_splits(run, spec)
    import lightning as L

    from .checkpoints import prune, resume_point
    from .ensemble import ranked_checkpoints, test_best_and_ensembles
    from .loggers import finish as finish_logger
    from .trainer import build_trainer, checkpoint_callback, logging_callbacks

    facts, logging = logging_callbacks(config.get("callbacks"), since)  # facts count CPU time from ``since``
    ckpt_dir = checkpoints_folder(run_dir)
    if force and lead and ckpt_dir.exists():
        shutil.rmtree(ckpt_dir)  # force: train from scratch (we hold the lock: no twin is using them)
    resume = None if force else resume_point(ckpt_dir, set_aside_damaged=lead)
    L.seed_everything(run.seed, workers=True, verbose=False)

    encoder = build_encoder(run.encoder, spec.modality, seed=run.seed)
    adapter = build_adapter(run.adapter, encoder, spec)  # one spec: the adapter and the data module share it
    facts.monitor = f"val/{adapter.monitor}"  # its curve is a fact of the run (val_curve)
    if spec.tier_metric != adapter.monitor:   # and the tier metric's, where it differs (tier_val_curve)
        facts.tier_monitor = f"val/{spec.tier_metric}"
    datamodule = build_datamodule(run, encoder, adapter, spec, splits)
    model = build_model(run.recipe, encoder, adapter, compile=run.compile)

    logger = instantiate_component(run.logger, name=exp) if run.logger else None
    ensemble_sizes = run.ensembles if run.evaluate_test else ()
    checkpoints = checkpoint_callback(ckpt_dir, adapter.monitor, adapter.monitor_mode,
                                      top_k=max(ensemble_sizes + (1,)))
    trainer = build_trainer(config["trainer"], [checkpoints, facts, *logging], logger, run_dir)

    if resume is not None:
        print(f"[gate] resuming experiment {exp} from {resume}")
    with (signals.lightning_stops(), _naming_passed_on_keys(config),  # a stop signal: Stopped (exit 128 + n), never 0
          _quiet_resume(resume is not None)):
        trainer.fit(model, datamodule=datamodule, ckpt_path=str(resume) if resume is not None else None,
                    weights_only=True)  # SafeCheckpointIO reads it as data only in any case
    # Before testing (loading a checkpoint restores callback state). Rank 0 ranks; the others test its pick: every
    # rank's callback saw the same reduced val metric, and the broadcast makes "the same" exact, ties included.
    ranked = trainer.strategy.broadcast(ranked_checkpoints(checkpoints), src=0)
    # the best of every validation the run made (its curve survives a resume); the checkpoint callback forgets the
    # validations of a checkpoint written in another directory (gate-rank's longer run continuing a shorter one)
    values = [v for _, v in facts.curve]
    best_val = ((max if adapter.monitor_mode == "max" else min)(values) if values
                else checkpoints.best_model_score)
    if not ranked:
        raise RuntimeError(f"experiment {exp}: no validation checkpoint was saved; set trainer.val_check_interval "
                           f"<= trainer.max_steps ({run.trainer.max_steps})")
    # evaluate_test=false (gate-rank's rungs): the test split is never evaluated; only the val record is stored
    with signals.lightning_stops():
        metrics = (test_best_and_ensembles(trainer, model, datamodule, ranked, ensemble_sizes) if run.evaluate_test
            else {})
    if logger is not None and metrics:
        logger.log_metrics({f"test/{k}": v for k, v in metrics.items()}, step=trainer.global_step)

    wall = round(time.perf_counter() - started, 2)
    device = trainer.strategy.root_device  # not model.device: Lightning moves the model to the CPU after fit/test
    gpus = int(trainer.num_devices) if device.type == "cuda" else 0
    run_facts = {**facts.facts(resumed=resume is not None, wall_seconds=wall, gpus=gpus),
                 "global_step": int(trainer.global_step), "device": str(device),
                 "precision": str(trainer.precision), "world_size": int(trainer.world_size),
                 "split_rows": datamodule.split_rows(),
                 # the loader as resolved on this machine (data.num_workers / data.pin_memory: auto)
                 "num_workers": int(datamodule.num_workers), "pin_memory": bool(datamodule.pin_memory)}
    if not trainer.is_global_zero:
        return FinetuneResult(exp, False, metrics, store.path, run_dir, None, run_facts)
    with signals.critical():  # the record set goes out whole; a stop signal waits for it
        store.append_set(finetune_records(config, exp, adapter, metrics, float(best_val)), facts=run_facts)
        signals.recorded(f"experiment {exp}")
    prune(ckpt_dir, ranked, run.keep_checkpoints)
    logger_dir = finish_logger(logger)
    return FinetuneResult(exp, False, metrics, store.path, run_dir, logger_dir, run_facts)


@contextlib.contextmanager
def _quiet_resume(resuming: bool):
    """Lightning's notices that a resume expects: its checkpoint folder holds files, and a run continued from a
    shorter run's checkpoint (gate-rank's halving) names that run's folder, whose best checkpoints it does not take
    over (the run's best validation is read from its whole curve instead)."""
    with warnings.catch_warnings():
        if resuming:
            warnings.filterwarnings("ignore", message=r"Checkpoint directory .* exists and is not empty")
            warnings.filterwarnings("ignore", message=r"The dirpath has changed from")
        yield


@contextlib.contextmanager
def _naming_passed_on_keys(config: dict[str, Any]):
    """A failure inside Lightning's loop while the run hands keys gate does not declare on to the Trainer (``+trainer.
    accumulate_grad_batches=...``) names those keys: the error itself (a ZeroDivisionError deep in the loop) would
    name none."""
    from ...errors import ConfigError, GateError
    from ...settings import TRAINER, passed_on

    given = passed_on(config["trainer"], TRAINER, "trainer")
    try:
        yield
    except (GateError, MemoryError):
        raise
    except Exception as err:
        if not given or type(err).__name__ == "OutOfMemoryError":
            raise
        raise ConfigError(f"{type(err).__name__}: {' '.join(str(err).split())[:200]} while training, with keys passed "
                          f"on to Lightning's Trainer unchecked ({', '.join(given)}): check their values (GATE_DEBUG=1 "
                          f"shows the traceback)") from err


def finetune_records(config: dict[str, Any], exp: str, adapter, metrics: dict[str, float],
                     best_val: float) -> list[Record]:
    """One record per test metric (none when ``evaluate_test`` is false) and one for the best validation value of
    the checkpoint monitor; the directions come from the metric registry (:mod:`gate.metrics`)."""
    common = dict(experiment=exp, kind="finetune", encoder=config["encoder"]["name"],
                  dataset=config["dataset"]["name"], task=config["dataset"]["task"],
                  adapter=config["adapter"]["name"], recipe=config["recipe"]["name"], seed=int(config["seed"]),
                  git=git_describe(), config=identity(config, "finetune"))
    rows = [Record(split="test", metric=name, value=value, **common) for name, value in sorted(metrics.items())]
    rows.append(Record(split="val", metric=adapter.monitor, value=best_val, **common))
    return rows
