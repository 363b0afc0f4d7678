"""Benchmark metadata: which metric represents a benchmark in tier/group means, its GATE paper group
(``paper_group``: Img Class, Medical Seg, ...), and how a lower-is-better metric is turned so that higher is better.

Where the metadata comes from, first source first (a later source only fills what an earlier one
left out, and every candidate metric is tried in this order until one exists in the data):

1. ``tier_metrics`` overrides given to ``gate-analysis`` (``tier_metrics.<dataset>=<metric>``);
2. the engine's dataset configs, ``conf/dataset/<name>.yaml``, plus any extra config directories, read
   through the engine's own :class:`gate.data.spec.DatasetSpec` (:func:`gate.data.spec.load_dataset_spec`):
   ``tier_metric``, ``paper_group`` and optionally ``tier_turn``, ``tier_bound``, ``tier_scale``,
   ``notes_vs_gate``. The group is stated there only;
3. what a dataset config does not say: ``conf/benchmark_meta/gate_paper.yaml`` (composed into
   ``gate-analysis``'s config as ``benchmark_meta``; it ships inside the package): for each of the GATE
   paper's 31 benchmarks the row of the paper's Table 3 that represents it (acc@1 for classification, mIoU
   for segmentation, the Dice score for ACDC, macro AUC for medical classification, the MAE score for
   iWildCam) and any turn/scale; then an extra file of the same form (``benchmarks_file``), which may also
   give a ``paper_group`` for a benchmark that has no dataset config;
4. a metric named ``acc@1`` (any case), else the benchmark's only metric.

Turning rules (applied to the representative value after ``scale``; recorded in ``tiers_benchmarks.csv``):

* higher-is-better metrics are used as they are;
* ``negate`` (the default for lower-is-better): ``-x`` — losses, MAE/MSE, ranks, discrepancies;
* ``complement``: ``bound - x`` — Brier scores: ``100 - x`` for percentages, ``1 - x`` on a 0–1 scale
  (the default for metrics named Brier/BS; the bound is inferred from the values when not given).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from gate.data.spec import load_dataset_spec

_BRIER = re.compile(r"(brier|(^|[\s_/])bs($|[\s_/]))", re.IGNORECASE)
TURNS = ("negate", "complement")


def default_benchmarks_file() -> Path:
    """The packaged metadata of the GATE paper's benchmarks, ``conf/benchmark_meta/gate_paper.yaml``."""
    return packaged_dataset_dir().parent / "benchmark_meta" / "gate_paper.yaml"


def default_paper_table() -> Path:
    return Path(__file__).resolve().parents[2] / "experiments" / "gate_paper" / "gate_paper_table3.csv"


def packaged_dataset_dir() -> Path:
    import gate.conf

    return Path(gate.conf.__file__).resolve().parent / "dataset"


@dataclasses.dataclass
class BenchmarkMeta:
    key: str
    paper_group: str = ""
    tier_metrics: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (metric, source), first first
    turn: str | None = None
    bound: float | None = None
    scale: float | None = None
    sources: list[str] = dataclasses.field(default_factory=list)
    #: Where this benchmark's numbers depart from the GATE paper's protocol (the dataset config's
    #: ``notes_vs_gate``); the report prints it beside the benchmark.
    notes_vs_gate: str = ""

    def merge(self, paper_group: str | None, metric: str | None, turn: str | None, bound: Any, scale: Any,
              source: str) -> None:
        if paper_group and not self.paper_group:
            self.paper_group = str(paper_group)
        if metric and str(metric) not in [m for m, _ in self.tier_metrics]:
            self.tier_metrics.append((str(metric), source))
        if turn is not None and self.turn is None:
            if turn not in TURNS:
                raise ValueError(f"{source}: tier turn rule for {self.key!r} must be one of {TURNS}, got {turn!r}")
            self.turn = turn
        if bound is not None and self.bound is None:
            self.bound = float(bound)
        if scale is not None and self.scale is None:
            self.scale = float(scale)
        self.sources.append(source)


def load_benchmark_meta(benchmarks_file: str | Path | None = None,
                        dataset_dirs: Iterable[str | Path] | None = None,
                        overrides: Mapping[str, str] | None = None,
                        benchmarks: Mapping[str, Any] | None = None) -> dict[str, BenchmarkMeta]:
    """Benchmark key → metadata, merged from overrides, dataset configs, ``benchmarks`` (a mapping such
    as ``gate-analysis``'s composed ``benchmark_meta``; default: the packaged GATE paper file) and an
    extra ``benchmarks_file``."""
    meta: dict[str, BenchmarkMeta] = {}

    def entry(key: str) -> BenchmarkMeta:
        return meta.setdefault(key, BenchmarkMeta(key))

    for key, metric in (overrides or {}).items():
        entry(str(key)).merge(None, str(metric), None, None, None, "tier_metrics override")
    for d in [packaged_dataset_dir(), *(dataset_dirs or [])]:
        d = Path(d)
        if not d.is_dir():
            continue
        for f in sorted(d.glob("*.yaml")):
            spec = load_dataset_spec(f)  # the engine's reader: a config it would refuse is refused here too
            entry(spec.name).merge(spec.paper_group, spec.tier_metric, spec.tier_turn, spec.tier_bound,
                                   spec.tier_scale, f"dataset config {f.name}")
            if spec.notes_vs_gate and not entry(spec.name).notes_vs_gate:
                entry(spec.name).notes_vs_gate = spec.notes_vs_gate
    sources: list[tuple[Mapping[str, Any], str]] = []
    if benchmarks is None:
        path = default_benchmarks_file()
        sources.append((_read_meta_file(path), f"benchmark_meta {path.stem}"))
    else:
        sources.append((benchmarks, "benchmark_meta"))
    if benchmarks_file:
        path = Path(benchmarks_file)
        if not path.exists():
            raise FileNotFoundError(f"benchmarks file {str(path)!r} does not exist")
        sources.append((_read_meta_file(path), f"benchmarks file {path.name}"))
    for items, source in sources:
        for key, m in items.items():
            m = m or {}
            if not isinstance(m, Mapping):
                raise ValueError(f"{source}: entry {key!r} must be a mapping (paper_group, tier_metric, turn, bound, "
                                 f"scale), got {m!r}")
            if "family" in m:
                raise ValueError(f"{source}: entry {key!r}: family was renamed: write paper_group (the GATE paper's "
                                 f"benchmark group)")
            entry(str(key)).merge(m.get("paper_group"), m.get("tier_metric"), m.get("turn"), m.get("bound"),
                                  m.get("scale"), source)
    return meta


def _read_meta_file(path: Path) -> Mapping[str, Any]:
    doc = yaml.safe_load(path.read_text()) or {}
    if isinstance(doc, Mapping) and isinstance(doc.get("benchmarks"), Mapping):
        doc = doc["benchmarks"]  # also accept a top-level `benchmarks:` mapping
    if not isinstance(doc, Mapping):
        raise ValueError(f"benchmarks file {path} must map benchmark keys to metadata")
    return doc


def match_metric(available: Iterable[str], wanted: str) -> str | None:
    """The metric of ``available`` named ``wanted`` (exactly, else ignoring case)."""
    available = list(available)
    if wanted in available:
        return wanted
    low = {a.lower(): a for a in available}
    return low.get(wanted.lower())


def choose_tier_metric(benchmark: str, dataset: str, available: Iterable[str],
                       meta: Mapping[str, BenchmarkMeta]) -> tuple[str | None, str]:
    """(metric, why) for one benchmark, or (None, why not)."""
    available = list(available)
    m = meta.get(benchmark) or meta.get(dataset)
    tried = []
    if m is not None:
        for cand, source in m.tier_metrics:
            hit = match_metric(available, cand)
            if hit is not None:
                return hit, f"tier_metric from {source}"
            tried.append(cand)
    hit = match_metric(available, "acc@1")
    if hit is not None:
        return hit, "default: acc@1"
    if len(available) == 1:
        return available[0], "default: the benchmark's only metric"
    return None, (f"no tier metric for {benchmark!r}: tried {tried or 'none configured'} and acc@1 among "
                  f"{available}; set tier_metric in conf/dataset/{dataset}.yaml or tier_metrics.{dataset}=<metric>")


def turn_rule(metric: str, higher_is_better: bool, values: np.ndarray | pd.Series,
              meta: BenchmarkMeta | None = None) -> tuple[str, float | None]:
    """How to turn a metric so that higher is better: ("identity"|"negate"|"complement", bound)."""
    if higher_is_better:
        return "identity", None
    turn = meta.turn if meta is not None and meta.turn else None
    bound = meta.bound if meta is not None else None
    if turn is None:
        turn = "complement" if _BRIER.search(metric) else "negate"
    if turn == "complement" and bound is None:
        vals = np.asarray(values, dtype=float)
        vals = vals[~np.isnan(vals)]
        bound = 1.0 if vals.size and vals.max() <= 1.0 else 100.0
    return turn, bound


def apply_turn(values, rule: str, bound: float | None):
    if rule == "identity":
        return values
    if rule == "negate":
        return -values
    if rule == "complement":
        return bound - values
    raise ValueError(f"unknown turn rule {rule!r}")


def describe_turn(rule: str, bound: float | None) -> str:
    if rule == "identity":
        return "x"
    if rule == "negate":
        return "-x"
    return f"{bound:g} - x"


#: The mark printed beside a benchmark whose numbers depart from the GATE paper's protocol (its ``notes_vs_gate``).
DEPARTS_MARK = "†"


def note_of(benchmark: str, notes: Mapping[str, str] | None) -> str:
    """The ``notes_vs_gate`` of a benchmark label (a protocol variant ``acdc[...]`` shares its dataset's)."""
    if not notes:
        return ""
    return notes.get(benchmark) or notes.get(str(benchmark).split("[", 1)[0], "")
