"""gate-score: transferability scores of one encoder on one dataset split (composed from conf/score.yaml)."""

from __future__ import annotations

import hydra
from omegaconf import DictConfig

from gate.cli.common import hydra_entry, prepare_process, quiet_lightning, run_cli
from gate.engine.validate import validate_score_config


@hydra.main(version_base=None, config_path="pkg://gate.conf", config_name="score")
def _main(cfg: DictConfig) -> None:
    prepare_process(cfg)
    run_cli("gate-score", validate_score_config, cfg)  # every config problem, before the heavy imports
    from gate.scoring.stage import run_score

    quiet_lightning()

    result = run_cli("gate-score", run_score, cfg)
    name = f"{cfg.encoder.name} × {cfg.dataset.name}/{cfg.split}"
    if result.skipped:
        print(f"[gate] scores of experiment {result.experiment} ({name}) are already in {result.results_path}; "
              f"skipping (force=true recomputes them)")
        return
    source = "cache" if result.features_from_cache else f"extracted in {result.extract_seconds:.1f}s"
    print(f"[gate] experiment {result.experiment}: {name} (features: {source})")
    width = max((len(k) for k in result.values), default=0)
    for key, value in result.values.items():
        why = f"  degenerate: {result.degenerate[key]}" if key in result.degenerate else ""
        print(f"  {key:<{width}}  {value:12.6g}   ({result.seconds[key]:.2f}s){why}")
    print(f"[gate] results store: {result.results_path}")
    if result.features_path is not None:
        print(f"[gate] features:      {result.features_path}")


def main() -> None:
    hydra_entry("gate-score", _main)  # an unknown key or an unparsable override: one line, not Hydra's report


if __name__ == "__main__":
    main()
