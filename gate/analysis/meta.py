"""Benchmark metadata: which metric represents a benchmark in tier/group means, its GATE paper group
(``paper_group``: Img Class, Medical Seg, ...), and the scale on which its value enters a mean.

Where the metadata comes from, first source first (a later source only fills what an earlier one
left out, and every candidate metric is tried in this order until one exists in the data):

1. ``tier_metrics`` overrides given to ``gate-analysis`` (``tier_metrics.<dataset>=<metric>``);
2. the engine's dataset configs, ``conf/dataset/<name>.yaml``, plus any extra config directories, read
   through the engine's own :class:`gate.data.spec.DatasetSpec` (:func:`gate.data.spec.load_dataset_spec`):
   ``tier_metric`` (a metric gate records), optionally ``tier_range``, ``paper_group`` and ``notes_vs_gate``. The
   group is stated there only;
3. what a dataset config does not say: ``conf/benchmark_meta/gate_paper.yaml`` (composed into
   ``gate-analysis``'s config as ``benchmark_meta``; it ships inside the package): for each of the GATE
   paper's 31 benchmarks the row of the paper's Table 3 that represents it (acc@1 for classification, mIoU
   for segmentation, the Dice score for ACDC, macro AUC for medical classification, the MAE score for
   iWildCam) and that row's ``range``; then an extra file of the same form (``benchmarks_file``), which may also
   give a ``paper_group`` for a benchmark that has no dataset config;
4. a metric named ``acc@1`` (any case), else the benchmark's only metric.

**One scale (0–1, higher is better).** Every representative value enters a tier or group mean as
``(x − low) / (high − low)``, or ``(high − x) / (high − low)`` for a lower-is-better metric, where
``[low, high]`` is the range declared for *that metric* by the source that names it — never a number attached
to the benchmark and applied to whatever metric is found (the paper's 0–1 ACDC Dice row and gate's own 0–1
``dice`` records are two metrics with their own ranges):

* the candidate's own declaration: a dataset config's ``tier_range`` (values outside it are clipped to it: it
  chooses the span that counts, e.g. ``r2`` below 0, no better than the split's mean, counts as 0), or a
  benchmarks file's ``range`` — ``[0, 100]`` for the paper's percentages, ``[0, 1]`` for its Dice rows, or
  ``pool``: the best and worst value among the table's encoders (the paper's iWildCam MAE score, which has no
  other bound; pool-relative, so declared only for a fixed published table);
* else the metric registry's range (:mod:`gate.metrics`: acc@1, miou, dice, auc_macro, ... are ``[0, 1]``);
  a value outside a registry or benchmarks-file range is never averaged: the benchmark stays out of the tier and
  group means that need it, with one warning naming it and the fix (a published table in percent:
  ``ranges={acc@1:[0,100]}``), and everything that needs no scale (tables, correlations, figures) is computed;
* above all of these, the table's own ranges given on the command line (``ranges={<metric>: [low, high]}``,
  :func:`parse_ranges`): a metric named there has that range in every benchmark, whoever else declares one;
* else the range is undeclared (an unbounded metric such as ``mae`` or a foreign table's unregistered name):
  the value enters as it is (negated when lower is better), with a warning, and ``tiers_benchmarks.csv`` says
  ``range undeclared``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from gate import metrics as metric_registry
from gate.data.spec import load_dataset_spec
from gate.files import regular_file

#: ``range: pool`` in a benchmarks file: the table's best and worst encoder bound the benchmark's scale.
POOL = "pool"
#: Keys of a benchmarks-file entry (the metric's scale is its ``range``; issue 24 replaced scale/turn/bound).
META_FILE_KEYS = ("paper_group", "tier_metric", "range")
_REPLACED_META_KEYS = ("scale", "turn", "bound")


def default_benchmarks_file() -> Path:
    """The packaged metadata of the GATE paper's benchmarks, ``conf/benchmark_meta/gate_paper.yaml``."""
    return packaged_dataset_dir().parent / "benchmark_meta" / "gate_paper.yaml"


def default_paper_table() -> Path:
    return Path(__file__).resolve().parents[2] / "experiments" / "gate_paper" / "gate_paper_table3.csv"


def packaged_dataset_dir() -> Path:
    import gate.conf

    return Path(gate.conf.__file__).resolve().parent / "dataset"


@dataclasses.dataclass(frozen=True)
class TierMetric:
    """One candidate representative metric of a benchmark, with the scale its source declares for it.

    ``range``: ``(low, high)``, :data:`POOL`, or None (then the metric registry's range, where finite).
    ``clip``: values outside ``range`` are clipped to it (a dataset config's ``tier_range``); otherwise a value
    outside a declared range is an error."""

    name: str
    source: str
    range: tuple[float, float] | str | None = None
    clip: bool = False


@dataclasses.dataclass
class BenchmarkMeta:
    key: str
    paper_group: str = ""
    tier_metrics: list[TierMetric] = dataclasses.field(default_factory=list)  # first first
    sources: list[str] = dataclasses.field(default_factory=list)
    #: Where this benchmark's numbers depart from the GATE paper's protocol (the dataset config's
    #: ``notes_vs_gate``); the report prints it beside the benchmark.
    notes_vs_gate: str = ""

    def merge(self, paper_group: str | None, metric: str | None, value_range: Any, source: str,
              clip: bool = False) -> None:
        if paper_group and not self.paper_group:
            self.paper_group = str(paper_group)
        if metric and str(metric) not in [m.name for m in self.tier_metrics]:
            self.tier_metrics.append(TierMetric(str(metric), source, parse_range(value_range, f"{source}: "
                                                                                 f"{self.key!r}"), clip))
        self.sources.append(source)


def parse_range(value: Any, where: str) -> tuple[float, float] | str | None:
    """A declared range: None, ``pool``, or ``[low, high]`` with finite ``low < high`` (a ValueError naming
    ``where`` otherwise)."""
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lower() == POOL:
        return POOL
    try:
        low, high = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: range must be [low, high] or {POOL!r}, got {value!r}") from None
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ValueError(f"{where}: range [low, high] needs finite low < high, got {value!r}")
    return (low, high)


#: Who declares a range given as gate-analysis' ``ranges`` setting.
COMMAND_LINE_RANGE = "ranges (command line)"


def parse_ranges(value: Any) -> dict[str, tuple[float, float] | str]:
    """gate-analysis' ``ranges``: metric name -> ``[low, high]`` (or ``pool``), checked as a benchmarks file's
    ``range`` is (a ValueError naming ``ranges.<metric>`` otherwise)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"ranges={value!r} is invalid: give metric: [low, high] pairs, e.g. ranges={{acc@1:[0,100]}}")
    parsed = {}
    for metric, bounds in value.items():
        parsed[str(metric)] = parse_range(bounds, f"ranges.{metric}")
        if parsed[str(metric)] is None:
            raise ValueError(f"ranges.{metric}: range must be [low, high] or {POOL!r}, got null")
    return parsed


def range_fix(metrics: Iterable[str]) -> str:
    """The command-line setting that declares ``metrics`` as percentages (what a published table usually holds)."""
    return "ranges={" + ",".join(f"{m}:[0,100]" for m in dict.fromkeys(metrics)) + "}"


def load_benchmark_meta(benchmarks_file: str | Path | None = None,
                        dataset_dirs: Iterable[str | Path] | None = None,
                        overrides: Mapping[str, str] | None = None,
                        benchmarks: Mapping[str, Any] | None = None) -> dict[str, BenchmarkMeta]:
    """Benchmark key → metadata, merged from overrides, dataset configs, ``benchmarks`` (a mapping such
    as ``gate-analysis``'s composed ``benchmark_meta``; default: the packaged GATE paper file) and an
    extra ``benchmarks_file``."""
    if benchmarks_file:
        regular_file(benchmarks_file, "benchmarks file")  # a FIFO or a device: refused before any work
    meta: dict[str, BenchmarkMeta] = {}

    def entry(key: str) -> BenchmarkMeta:
        return meta.setdefault(key, BenchmarkMeta(key))

    for key, metric in (overrides or {}).items():
        entry(str(key)).merge(None, str(metric), None, "tier_metrics override")
    for d in [packaged_dataset_dir(), *(dataset_dirs or [])]:
        d = Path(d)
        if not d.is_dir():
            continue
        for f in sorted(d.glob("*.yaml")):
            spec = load_dataset_spec(f)  # the engine's reader: a config it would refuse is refused here too
            entry(spec.name).merge(spec.paper_group, spec.tier_metric, spec.tier_range, f"dataset config {f.name}",
                                   clip=True)
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
                raise ValueError(f"{source}: entry {key!r} must be a mapping ({', '.join(META_FILE_KEYS)}), got {m!r}")
            if "family" in m:
                raise ValueError(f"{source}: entry {key!r}: family was renamed: write paper_group (the GATE paper's "
                                 f"benchmark group)")
            replaced = [k for k in _REPLACED_META_KEYS if k in m]
            if replaced:
                raise ValueError(f"{source}: entry {key!r}: {'/'.join(replaced)} was replaced by range: [low, high] "
                                 f"(the tier_metric's scale, mapped onto 0-1; lower-is-better metrics are turned "
                                 f"by their direction) or range: {POOL}")
            unknown = sorted(set(m) - set(META_FILE_KEYS))
            if unknown:
                raise ValueError(f"{source}: entry {key!r}: unknown key(s) {unknown}; valid: {list(META_FILE_KEYS)}")
            entry(str(key)).merge(m.get("paper_group"), m.get("tier_metric"), m.get("range"), source)
    return meta


def _read_meta_file(path: Path) -> Mapping[str, Any]:
    doc = yaml.safe_load(regular_file(path, "benchmarks file").read_text()) or {}
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


@dataclasses.dataclass(frozen=True)
class Representative:
    """The metric that represents a benchmark (None when none fits), why it was chosen, and its candidate entry
    (None for a default choice: then only the registry can give its range)."""

    metric: str | None
    why: str
    candidate: TierMetric | None = None


def choose_tier_metric(benchmark: str, dataset: str, available: Iterable[str],
                       meta: Mapping[str, BenchmarkMeta]) -> Representative:
    """The representative metric of one benchmark among the ``available`` ones, or why there is none."""
    available = list(available)
    m = meta.get(benchmark) or meta.get(dataset)
    tried = []
    if m is not None:
        for cand in m.tier_metrics:
            hit = match_metric(available, cand.name)
            if hit is not None:
                return Representative(hit, f"tier_metric from {cand.source}", cand)
            tried.append(cand.name)
    hit = match_metric(available, "acc@1")
    if hit is not None:
        return Representative(hit, "default: acc@1")
    if len(available) == 1:
        return Representative(available[0], "default: the benchmark's only metric")
    return Representative(None, f"no tier metric for {benchmark!r}: tried {tried or 'none configured'} and acc@1 "
                                f"among {available}; set tier_metric in conf/dataset/{dataset}.yaml or "
                                f"tier_metrics.{dataset}=<metric>")


class OutsideRange(ValueError):
    """A value outside the range declared for its metric: a scale that cannot be right for this table."""

    def __init__(self, message: str, metric: str):
        super().__init__(message)
        self.metric = metric


@dataclasses.dataclass(frozen=True)
class TierScale:
    """How a representative metric's values are put on 0–1 (higher is better) for tier and group means."""

    range: tuple[float, float] | str | None  # (low, high), POOL, or None: undeclared
    declared_by: str                         # "dataset config acdc.yaml", "gate/metrics.py", ...
    higher_is_better: bool
    clip: bool = False

    def apply(self, values: pd.Series, where: str, metric: str = "") -> tuple[pd.Series, str]:
        """(values on the tier scale, how they entered, as written in ``tiers_benchmarks.csv``). A value outside a
        declared range that does not clip is :class:`OutsideRange`, naming ``where``, the encoder and the range."""
        values = values.astype(float)
        hib = self.higher_is_better
        if self.range is None:
            return (values if hib else -values), ("x" if hib else "-x") + " (range undeclared)"
        if self.range == POOL:
            finite = values.dropna()
            low, high = (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 1.0)
            if not high > low:
                return values * 0.0 + 0.5, f"0.5 (pool: every encoder {low:g})"
            how = f"pool: (x - {low:g}) / {high - low:g}" if hib else f"pool: ({high:g} - x) / {high - low:g}"
            return ((values - low) if hib else (high - values)) / (high - low), how
        low, high = self.range
        if self.clip:
            values = values.clip(low, high)
        else:
            outside = values[(values < low) | (values > high)]
            if len(outside):
                enc, v = next(iter(outside.items()))
                raise OutsideRange(f"{where}: {enc} has {v:g}, outside the metric's range [{low:g}, {high:g}] "
                                   f"({self.declared_by})", metric)
        span = high - low
        shift = f"x - {low:g}" if low else "x"
        if hib:
            how = shift if span == 1 else (f"({shift}) / {span:g}" if low else f"x / {span:g}")
            out = (values - low) / span
        else:
            how = f"{high:g} - x" if span == 1 else f"({high:g} - x) / {span:g}"
            out = (high - values) / span
        return out, f"clip(x, {low:g}, {high:g}) then {how}" if self.clip else how


def tier_scale(rep: Representative, higher_is_better: bool,
               ranges: Mapping[str, tuple[float, float] | str] | None = None) -> TierScale:
    """The scale of a chosen representative metric: the command line's range for it (``ranges``), else its
    candidate's declared range, else the registry's (where finite), else undeclared (see the module docstring)."""
    given = match_metric(list(ranges or {}), rep.metric or "") if ranges else None
    if given is not None:
        return TierScale(ranges[given], COMMAND_LINE_RANGE, higher_is_better)
    cand = rep.candidate
    if cand is not None and cand.range is not None:
        return TierScale(cand.range, cand.source, higher_is_better, clip=cand.clip)
    info = metric_registry.lookup(rep.metric or "")
    if info is not None and math.isfinite(info.low) and math.isfinite(info.high):
        return TierScale((info.low, info.high), "gate/metrics.py", higher_is_better)
    return TierScale(None, "undeclared", higher_is_better)


def metric_scale(benchmark: str, dataset: str, metric: str, higher_is_better: bool,
                 meta: Mapping[str, BenchmarkMeta],
                 ranges: Mapping[str, tuple[float, float] | str] | None = None) -> TierScale:
    """The declared scale of any recorded ``metric`` of a benchmark (not only its representative one): the
    command line's, else the benchmark's own candidate entry of that name, else the registry's range."""
    m = meta.get(benchmark) or meta.get(dataset)
    cand = next((c for c in (m.tier_metrics if m is not None else []) if match_metric([metric], c.name)), None)
    return tier_scale(Representative(metric, "", cand), higher_is_better, ranges)


#: The mark printed beside a benchmark whose numbers depart from the GATE paper's protocol (its ``notes_vs_gate``).
DEPARTS_MARK = "†"


#: The mark printed beside a benchmark whose numbers were measured on a capped evaluation split
#: (``data.max_val_samples`` / ``data.max_test_samples``), with how it was capped under the table.
CAPPED_MARK = "‡"


def capped_benchmarks(summary: pd.DataFrame) -> dict[str, str]:
    """Benchmark -> how its fine-tuning numbers' evaluation split was capped (``summarize``'s ``capped`` column),
    for the benchmarks that were; the first non-empty text of a benchmark (its encoders share its protocol)."""
    if "capped" not in summary.columns:
        return {}
    ft = summary[(summary["kind"] == "finetune") & summary["capped"].fillna("").astype(str).ne("")]
    return {str(b): str(rows["capped"].iloc[0]) for b, rows in ft.groupby("benchmark", sort=False)}


DEPARTS_FOOTNOTE = "Departs from the GATE paper's protocol (the dataset config's notes_vs_gate)"
CAPPED_FOOTNOTE = ("Measured on a capped subset of its evaluation split (data.max_val_samples / data.max_test_samples, "
                   "part of the experiment id), not on the whole split")


def marks(benchmark: str, notes: Mapping[str, str] | None, capped: Mapping[str, str] | None) -> str:
    """The marks of a benchmark label: † departs from GATE's protocol, ‡ measured on a capped split ("" if neither)."""
    out = DEPARTS_MARK if note_of(benchmark, notes) else ""
    return out + (CAPPED_MARK if (capped or {}).get(str(benchmark)) else "")


def note_of(benchmark: str, notes: Mapping[str, str] | None) -> str:
    """The ``notes_vs_gate`` of a benchmark label (a protocol variant ``acdc[...]`` shares its dataset's)."""
    if not notes:
        return ""
    return notes.get(benchmark) or notes.get(str(benchmark).split("[", 1)[0], "")
