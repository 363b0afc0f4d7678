"""gate-analysis: tables, tier summaries, score-vs-accuracy correlations, figures and an HTML report
(composed by Hydra from conf/analysis.yaml). A bad input is one line on stderr and exit code 2."""

from __future__ import annotations

from typing import Any

import hydra
from omegaconf import DictConfig

from gate.cli.common import hydra_entry, prepare_process, run_cli
from gate.engine.validate import validate_command_config
from gate.settings import ANALYSIS


def analyse(plain: dict[str, Any]):
    from gate.analysis.pipeline import run_analysis  # heavy imports after Hydra has parsed the command line

    return run_analysis(
        plain["results"], plain["out"], split=plain["split"], score_split=plain["score_split"],
        target=plain["target"], relative=bool(plain["relative"]), num_classes=plain["num_classes"] or {},
        tiers=plain.get("tiers") or {}, tier_metrics=plain["tier_metrics"] or {},
        partial_tiers=bool(plain["partial_tiers"]), benchmark_meta=plain.get("benchmark_meta"),
        benchmarks_file=plain["benchmarks_file"],
        dataset_config_dirs=plain["dataset_config_dirs"] or [], reference=plain["reference"],
        filters=plain["filters"] or {}, figures=bool(plain["figures"]), ranges=plain["ranges"],
    )


@hydra.main(version_base=None, config_path="pkg://gate.conf", config_name="analysis")
def _main(cfg: DictConfig) -> None:
    prepare_process(cfg)  # temp files and matplotlib's cache under paths.root
    plain = run_cli("gate-analysis", validate_command_config, cfg, ANALYSIS, "gate-analysis config")
    result = run_cli("gate-analysis", analyse, plain)
    s = result.summary
    print(f"[gate] analysed {plain['results']}: {s['encoder'].nunique()} encoder(s), "
          f"{s.loc[s['kind'] == 'finetune', 'benchmark'].nunique()} fine-tuned benchmark(s), "
          f"{len(result.correlations)} correlation row(s), {len(result.warnings)} warning(s)")
    for name in sorted(result.files):
        print(f"  {name}")
    print(f"[gate] report: {result.files['report.html']}")


def main() -> None:
    hydra_entry("gate-analysis", _main)  # an unknown key or an unparsable override: one line, not Hydra's report


if __name__ == "__main__":
    main()
