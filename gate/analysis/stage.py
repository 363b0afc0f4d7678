"""gate-analysis' and gate-eevee's stages: each composed config parsed once into a frozen request
(:class:`AnalysisRequest`, :class:`EeveeRequest`), then the work (:func:`gate.analysis.pipeline.run_analysis`,
:func:`gate.analysis.eevee.run_eevee`), then the result's ``report()``. Nothing here imports torch.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gate.settings import ANALYSIS, EEVEE_COMMAND


def _checked(cfg: Any, section: Any, what: str) -> dict[str, Any]:
    from gate.engine.validate import validate_command_config

    return validate_command_config(cfg, section, what)


# ------------------------------------------------------------------------------------------------------ gate-analysis
@dataclasses.dataclass(frozen=True)
class AnalysisRequest:
    """conf/analysis.yaml's settings (declared in :data:`gate.settings.ANALYSIS`), checked, as run_analysis reads them."""

    results: str
    out: str | None
    split: str | None
    score_split: str | None
    target: Any
    relative: bool
    num_classes: Mapping[str, float]
    tiers: Mapping[str, Any]
    tier_metrics: Mapping[str, str]
    partial_tiers: bool
    benchmark_meta: Any
    benchmarks_file: str | None
    dataset_config_dirs: tuple[str, ...]
    reference: str | None
    filters: Mapping[str, Any]
    figures: bool
    ranges: Any

    @classmethod
    def parse(cls, cfg: Any) -> AnalysisRequest:
        plain = _checked(cfg, ANALYSIS, "gate-analysis config")
        return cls(results=plain["results"], out=plain["out"], split=plain["split"], score_split=plain["score_split"],
                   target=plain["target"], relative=bool(plain["relative"]), num_classes=plain["num_classes"] or {},
                   tiers=plain.get("tiers") or {}, tier_metrics=plain["tier_metrics"] or {},
                   partial_tiers=bool(plain["partial_tiers"]), benchmark_meta=plain.get("benchmark_meta"),
                   benchmarks_file=plain["benchmarks_file"],
                   dataset_config_dirs=tuple(plain["dataset_config_dirs"] or ()), reference=plain["reference"],
                   filters=plain["filters"] or {}, figures=bool(plain["figures"]), ranges=plain["ranges"])


@dataclasses.dataclass
class AnalysisOutcome:
    request: AnalysisRequest
    result: Any                    # gate.analysis.pipeline.AnalysisResult

    def report(self) -> int:
        s, result = self.result.summary, self.result
        print(f"[gate] analysed {self.request.results}: {s['encoder'].nunique()} encoder(s), "
              f"{s.loc[s['kind'] == 'finetune', 'benchmark'].nunique()} fine-tuned benchmark(s), "
              f"{len(result.correlations)} correlation row(s), {len(result.warnings)} warning(s)")
        for name in sorted(result.files):
            print(f"  {name}")
        print(f"[gate] report: {result.files['report.html']}")
        return 0


def analyse(request: AnalysisRequest) -> AnalysisOutcome:
    from gate.analysis.pipeline import run_analysis  # heavy imports after Hydra has parsed the command line

    fields = {f.name: getattr(request, f.name) for f in dataclasses.fields(request)}
    return AnalysisOutcome(request, run_analysis(fields.pop("results"), fields.pop("out"), **fields))


# --------------------------------------------------------------------------------------------------------- gate-eevee
def k_values(k: Any) -> list[int]:
    """``k`` as a list: 8, [1, 2, 3], "1-8" (a range, both ends included) or "1,2,3"."""
    if isinstance(k, bool):
        raise ValueError(f"k must be an integer, a list [1,2,3] or a range 1-8; got {k!r}")
    if isinstance(k, (list, tuple)):
        try:
            return [int(v) for v in k]
        except (TypeError, ValueError):
            raise ValueError(f"k must be an integer, a list [1,2,3] or a range 1-8; got {k!r}") from None
    text = str(k).strip()
    if re.fullmatch(r"\d+\s*-\s*\d+", text):
        lo, hi = (int(v) for v in text.split("-"))
        if lo > hi:
            raise ValueError(f"k range {text!r} is empty: write it low-high, e.g. 1-8")
        return list(range(lo, hi + 1))
    try:
        return [int(v) for v in text.strip("[]").split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"k must be an integer, a list [1,2,3] or a range 1-8; got {k!r}") from None


@dataclasses.dataclass(frozen=True)
class EeveeRequest:
    """gate-eevee's settings (conf/eevee.yaml, :data:`gate.settings.EEVEE_COMMAND`), checked: the table, the subset
    sizes, where the outputs go and the search's own settings (:class:`gate.analysis.eevee.EeveeConfig`)."""

    table: Path
    ks: tuple[int, ...]
    out: Path
    search: Any                    # gate.analysis.eevee.EeveeConfig
    importance: bool
    figures: bool

    @classmethod
    def parse(cls, cfg: Any) -> EeveeRequest:
        from gate.analysis.eevee import EeveeConfig

        plain = _checked(cfg, EEVEE_COMMAND, "gate-eevee config")
        table = Path(plain["table"])
        return cls(table, tuple(k_values(plain["k"])), Path(plain["out"]) if plain.get("out") else table.parent / "eevee",
                   EeveeConfig.from_settings(plain), bool(plain["importance"]), bool(plain["figures"]))


@dataclasses.dataclass
class EeveeOutcome:
    out: Path
    run: Any                       # gate.analysis.eevee.EeveeRun

    def report(self) -> int:
        for row in self.run.summary.itertuples(index=False):
            print(f"[gate] k={row.k}: best subset {row.best_subset.replace(';', ', ')} "
                  f"(validation MSE {row.best_fitness:.4f}; {row.n_evaluated} subsets in {row.seconds:.1f}s)")
        for name in sorted(self.run.files):
            print(f"  {name}")
        print(f"[gate] results: {self.out}")
        return 0


def search(request: EeveeRequest) -> EeveeOutcome:
    from gate.analysis.eevee import run_eevee

    run = run_eevee(request.table, list(request.ks), request.out, request.search, with_importance=request.importance,
                    figures=request.figures)
    return EeveeOutcome(request.out, run)
