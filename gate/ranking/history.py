"""What gate-rank knows before it runs anything: encoders × benchmarks of full-run results, from the results store
and from the GATE paper's table, with each run's cost where it is known.

A :class:`History` holds, per (encoder, benchmark), the full run's value of the benchmark's representative metric
on the tier scale (0–1, higher is better: :mod:`gate.analysis.meta`, the scale tier means use), the values of each
seed where several are known, and a full run's wall seconds, parameter count and validation curve where the store
recorded them. Sources (``history: [store, paper]`` or the path of a long table):

* ``store``: the store's complete full runs of the tier's entries under the tier's protocol (the experiments
  gate-tier would run for those encoders: :func:`from_store` takes them from the plan's expansion);
* ``paper``: the GATE paper's Table 3 (shipped with gate), its encoders named as gate's encoder configs name them
  (``paper_name`` in ``conf/encoder/<name>.yaml``; an encoder without one is the paper's column name);
* a long CSV (``encoder, dataset, metric, value`` [, ``seed``, ``higher_is_better``]) or a wide table, read by
  gate-analysis' reader.

**The leakage rule**: a history never holds a row of an encoder in the pool being ranked (:meth:`History.without`):
what the selection and the completion learn comes from other encoders only, so planting results of the pool in the
store changes neither (tests/test_rank_v2.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gate.errors import ConfigError
from gate.ranking.curves import ranked_curve
from gate.results import stable_hash

#: The named sources of ``history``.
SOURCES = ("store", "paper")


@dataclasses.dataclass(frozen=True)
class History:
    """Full-run results of encoders on benchmarks (the tier scale: 0–1, higher is better)."""

    values: pd.DataFrame                                  # encoders × benchmarks, mean over seeds (NaN: unknown)
    seeds: Mapping[str, pd.DataFrame] = dataclasses.field(default_factory=dict)  # benchmark → encoders × seeds
    wall: pd.DataFrame | None = None                      # encoders × benchmarks: seconds of one full run
    groups: Mapping[str, str] = dataclasses.field(default_factory=dict)  # benchmark → paper group (family)
    sources: tuple[str, ...] = ()
    curves: Mapping[tuple[str, str], list[tuple[int, float]]] = dataclasses.field(default_factory=dict)

    @property
    def encoders(self) -> list[str]:
        return list(self.values.index)

    @property
    def benchmarks(self) -> list[str]:
        return list(self.values.columns)

    def fingerprint(self) -> str:
        """A hash of what the history holds (its values, seeds and sources): selection.csv records it."""
        values = self.values.sort_index().sort_index(axis=1).round(9)
        seeds = {b: f.sort_index().sort_index(axis=1).round(9).to_dict() for b, f in sorted(self.seeds.items())}
        return stable_hash({"values": values.to_dict(), "seeds": seeds, "sources": list(self.sources)})[:12]

    def without(self, encoders: Iterable[str]) -> History:
        """The history less every row of ``encoders`` (the pool being ranked: the leakage rule)."""
        drop = set(encoders)
        keep = [e for e in self.values.index if e not in drop]
        return dataclasses.replace(
            self, values=self.values.loc[keep],
            seeds={b: f.loc[[e for e in f.index if e not in drop]] for b, f in self.seeds.items()},
            wall=None if self.wall is None else self.wall.loc[[e for e in self.wall.index if e not in drop]],
            curves={k: v for k, v in self.curves.items() if k[0] not in drop})

    def restrict(self, benchmarks: Sequence[str]) -> History:
        """The columns of ``benchmarks`` (those it has), and the encoders with a value on every one of them."""
        cols = [b for b in benchmarks if b in self.values.columns]
        values = self.values[cols].dropna(how="any")
        return dataclasses.replace(self, values=values, seeds={b: f.loc[[e for e in f.index if e in values.index]]
                                                                for b, f in self.seeds.items() if b in cols})

    def usable(self, benchmarks: Sequence[str], min_encoders: int) -> bool:
        """Whether the history can inform a choice among ``benchmarks``: at least ``min_encoders`` encoders with a
        value on every one of them."""
        return (len(self.restrict(benchmarks).values) >= min_encoders and
            len(self.restrict(benchmarks).values.columns) == len([b for b in benchmarks]))


def merge(histories: Sequence[History]) -> History:
    """One history from several: a cell known to an earlier one keeps its value (the store's before the paper's)."""
    if not histories:
        return History(pd.DataFrame())
    values = histories[0].values
    seeds = dict(histories[0].seeds)
    walls = [h.wall for h in histories if h.wall is not None]
    groups: dict[str, str] = {}
    curves: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for h in histories:
        values = values.combine_first(h.values)
        for b, f in h.seeds.items():
            seeds[b] = seeds[b].combine_first(f) if b in seeds else f
        for b, g in h.groups.items():
            groups.setdefault(b, g)
        for k, c in h.curves.items():
            curves.setdefault(k, c)
    wall = None
    for w in walls:
        wall = w if wall is None else wall.combine_first(w)
    return History(values, seeds, wall, groups, tuple(s for h in histories for s in h.sources), curves)


# --------------------------------------------------------------------------------------------------- sources


def paper_names() -> dict[str, str]:
    """The GATE paper's column name → gate's encoder config name, from each ``conf/encoder/<name>.yaml``'s
    ``paper_name`` (the one place that says which column of the paper's table is which encoder)."""
    import yaml

    from gate.settings import conf_dir

    out: dict[str, str] = {}
    for path in sorted((conf_dir() / "encoder").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text()) or {}
        name = doc.get("paper_name")
        if name:
            out[str(name)] = str(doc.get("name") or path.stem)
    return out


def from_table(path: str | Path, rename: Mapping[str, str] | None = None, source: str | None = None) -> History:
    """A history from a results table gate-analysis reads (the paper's wide table, a long CSV, JSONL records):
    each benchmark's representative metric, on the tier scale, per encoder (and per seed where the table has
    several); ``rename``: the table's encoder names → gate's."""
    import warnings

    from gate.analysis.load import load_results, summarize
    from gate.analysis.meta import load_benchmark_meta
    from gate.analysis.tiers import representative_values

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"history={str(path)!r}: no such file (give store, paper, or the path of a results table)")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = load_results(path)
        summary = summarize(loaded.long)
        meta = load_benchmark_meta()
        values, info = representative_values(summary, meta)
    for w in caught:  # what the analysis only warns about, a history cannot learn from
        text = " ".join(str(w.message).split())
        if "have no value and are left out" in text or "direction guessed" in text:
            raise ConfigError(f"history={str(path)!r} is not a performance table gate-rank can learn from: "
                              f"{text.split(': ', 1)[-1] if text.startswith(str(path)) else text}")
    if values.empty:
        raise ConfigError(f"history={str(path)!r} holds no fine-tuning results a tier metric can be read from")
    bad = info.loc[info["entered_as"].astype(str).str.startswith("not entered"), "benchmark"].tolist()
    if bad:
        raise ConfigError(f"history={str(path)!r}: values outside their metric's range on {bad} (a table in percent "
                          f"needs its range declared: give it as a benchmarks file, or use history=paper)")
    values = values.loc[:, info.loc[info["in_means"].astype(bool), "benchmark"]]
    rename = dict(rename or {})
    values = values.rename(index=lambda e: rename.get(str(e), str(e)))
    if values.index.duplicated().any():
        raise ConfigError(f"history={str(path)!r}: encoder(s) {sorted(set(values.index[values.index.duplicated()]))} "
                          f"are listed twice")
    groups = {str(r.benchmark): str(r.paper_group) for r in info.itertuples() if r.paper_group}
    seeds = _seed_frames(summary, loaded.long, info, rename)
    return History(values.astype(float), seeds, None, groups, (source or str(path),))


def _seed_frames(summary: pd.DataFrame, long: pd.DataFrame, info: pd.DataFrame,
                 rename: Mapping[str, str]) -> dict[str, pd.DataFrame]:
    """Per benchmark, encoders × seeds of its representative metric on the tier scale, where several seeds exist."""
    from gate.analysis.meta import TierScale

    out: dict[str, pd.DataFrame] = {}
    if "seed" not in long.columns:
        return out
    ft = long[(long["kind"] == "finetune")]
    if "split" in ft.columns:
        ft = ft[ft["split"].isin(["test", ""]) | ft["split"].isna()]
    for row in info.itertuples():
        rows = ft[(ft["dataset"] == row.dataset) & (ft["metric"] == row.metric)]
        if rows.empty or rows["seed"].nunique() < 2:
            continue
        frame = rows.pivot_table(index="encoder", columns="seed", values="value", aggfunc="mean")
        low_high = _parse_range(row.range)
        scale = TierScale(low_high if low_high else None, "", bool(row.higher_is_better))
        try:
            frame = pd.DataFrame({c: scale.apply(frame[c], "")[0] for c in frame.columns})
        except ValueError:
            continue
        out[str(row.benchmark)] = frame.rename(index=lambda e: rename.get(str(e), str(e)))
    return out


def _parse_range(text: Any) -> tuple[float, float] | None:
    text = str(text)
    if not text.startswith("["):
        return None
    low, high = (float(v) for v in text.strip("[]").split(","))
    return (low, high)


def paper_history() -> History:
    """The GATE paper's Table 3 as a history, its encoders under gate's names (``paper_name``)."""
    from gate.analysis.meta import default_paper_table

    names = paper_names()
    columns = set(pd.read_csv(default_paper_table(), nrows=0).columns)
    unknown = sorted((enc, col) for col, enc in names.items() if col not in columns)
    if unknown:
        enc, col = unknown[0]
        raise ConfigError(f"conf/encoder/{enc}.yaml: paper_name={col!r} is not a column of the GATE paper's table "
                          f"({default_paper_table().name})")
    return from_table(default_paper_table(), rename=names, source="paper")


def from_store(plan: Any, records: Sequence[Mapping[str, Any]], benchmarks: Sequence[str],
               seeds: Sequence[int] | None = None) -> History:
    """The store's complete full runs of ``benchmarks`` under the tier's protocol: the experiments of the plan's
    expansion (every encoder × seed it expanded; ``seeds``: only those), read back by their ids, on the tier
    scale."""
    from gate.analysis.meta import choose_tier_metric, load_benchmark_meta, tier_scale
    from gate.data.spec import spec_from_config
    from gate.metrics import lookup

    by_exp: dict[str, list[Mapping[str, Any]]] = {}
    for r in records:
        if r.get("kind") == "finetune":
            by_exp.setdefault(str(r["experiment"]), []).append(r)
    meta = load_benchmark_meta()
    cells: dict[str, dict[str, dict[int, float]]] = {}
    wall: dict[str, dict[str, list[float]]] = {}
    curves: dict[tuple[str, str], list[tuple[int, float]]] = {}
    groups: dict[str, str] = {}
    for exp in plan.experiments:
        if exp.dataset not in benchmarks or exp.id not in by_exp or (seeds is not None and exp.seed not in seeds):
            continue
        spec = spec_from_config(exp.config["dataset"])
        metric = spec.tier_metric
        rows = [r for r in by_exp[exp.id] if r.get("split") == "test" and r.get("metric") == metric]
        if not rows:
            continue
        known = lookup(metric)
        rep = choose_tier_metric(exp.dataset, exp.dataset, [metric], meta)
        scale = tier_scale(rep, known.higher_is_better if known is not None else True)
        try:
            value = float(scale.apply(pd.Series({"v": float(rows[-1]["value"])}), exp.dataset)[0]["v"])
        except ValueError:
            continue
        cells.setdefault(exp.dataset, {}).setdefault(exp.encoder, {})[int(exp.seed)] = value
        facts = rows[-1].get("facts") or {}
        if isinstance(facts.get("wall_seconds"), (int, float)):
            wall.setdefault(exp.dataset, {}).setdefault(exp.encoder, []).append(float(facts["wall_seconds"]))
        _, points = ranked_curve(facts, "")
        if points:
            curves[(exp.encoder, exp.dataset)] = [(int(s), float(v)) for s, v in points]
        if spec.paper_group:
            groups[exp.dataset] = spec.paper_group
    values = pd.DataFrame({b: {e: float(np.mean(list(s.values()))) for e, s in encs.items()}
                           for b, encs in cells.items()})
    seeds = {b: pd.DataFrame({e: pd.Series(s) for e, s in encs.items()}).T for b, encs in cells.items()
             if max(len(s) for s in encs.values()) >= 2}
    walls = pd.DataFrame({b: {e: float(np.mean(v)) for e, v in encs.items()} for b, encs in wall.items()})
    return History(values, seeds, walls if not walls.empty else None, groups, ("store",), curves)


def load(spec: Any, *, plan: Any = None, records: Sequence[Mapping[str, Any]] = (),
         benchmarks: Sequence[str] = (), others: Any = None) -> History:
    """The history a request names: ``store``, ``paper``, a list of them, or the path of a table. ``store`` reads the
    full runs of ``plan``'s experiments and of ``others``' (the tier expanded for encoders outside the pool)."""
    items = [spec] if isinstance(spec, str) else list(spec or [])
    parts = []
    for item in items:
        if item == "store":
            found = [from_store(p, records, benchmarks) for p in (plan, others) if p is not None]
            parts.append(History(pd.DataFrame()) if not found else found[0] if len(found) == 1
                         else dataclasses.replace(merge(found), sources=("store",)))
        elif item == "paper":
            parts.append(paper_history())
        else:
            parts.append(from_table(item))
    return merge(parts)


def problems(spec: Any) -> list[str]:
    """What is wrong with a ``history`` setting, before any work: an unknown name, a path that is not a readable
    results table."""
    items = [spec] if isinstance(spec, str) else list(spec or [])
    found = []
    for item in items:
        if not isinstance(item, str) or not item.strip():
            found.append(f"history: {item!r} is invalid: expected store, paper or the path of a results table")
        elif item not in SOURCES:
            try:
                from_table(item)
            except ConfigError as err:
                found.append(' '.join(str(err).split()))
            except (ValueError, OSError) as err:
                found.append(f"history={item!r}: {' '.join(str(err).split())}")
    return found
