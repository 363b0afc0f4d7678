"""gate-run: fine-tune an encoder on a dataset (composed by Hydra from conf/run.yaml)."""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from gate.cli.common import hydra_entry, prepare_process, quiet_lightning, run_cli
from gate.engine.validate import validate_run_config


@hydra.main(version_base=None, config_path="pkg://gate.conf", config_name="run")
def _main(cfg: DictConfig) -> None:
    prepare_process(cfg)
    run_cli("gate-run", validate_run_config, cfg)  # every config problem, before the heavy imports
    from gate.engine.training.finetune import run_finetune

    quiet_lightning()

    result = run_cli("gate-run", run_finetune, cfg)
    from gate.engine.training.distributed import process_rank

    if process_rank() != 0:  # another rank of a data-parallel run: rank 0 reports
        return
    name = f"{cfg.encoder.name} × {cfg.dataset.name} × {cfg.adapter.name} × {cfg.recipe.name} (seed {cfg.seed})"
    if result.skipped:
        print(f"[gate] experiment {result.experiment} ({name}) is already in {result.results_path}; "
              f"skipping (force=true reruns it)")
        return
    print(f"[gate] experiment {result.experiment}: {name}")
    width = max(len(k) for k in result.metrics) if result.metrics else 0
    for key, value in sorted(result.metrics.items()):
        print(f"  test/{key:<{width}}  {value:.4f}")
    print(f"[gate] results store: {result.results_path}")
    print(f"[gate] checkpoints:   {result.run_dir}")
    if result.logger_dir:
        print(f"[gate] logger run dir: {result.logger_dir}")


def main() -> None:
    hydra_entry("gate-run", _main)  # an unknown key or an unparsable override: one line, not Hydra's report


if __name__ == "__main__":
    main()
