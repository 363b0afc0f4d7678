"""After a tier's last job: its transferability scores (optional), cost, encoder-vs-encoder table and report.

Everything is computed from the results store, restricted to the tier's experiments: the tier's fine-tuning
records (complete sets only) and the score records of its datasets that take transferability scores, copied to
``<out>/records.jsonl`` so ``gate-analysis results=<out>/records.jsonl`` reproduces the report.

Cost comes from each experiment's run facts (``facts`` of its records): ``wall_seconds``, ``cpu_seconds``,
``gpu_hours``, ``energy_kwh``. A fact missing from a record (or null) is unmeasured: sums are over measured
experiments only and ``*_measured`` says how many that is; nothing is estimated.
"""

from __future__ import annotations

import dataclasses
import html
import json
import math
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from gate.files import atomic_write_text
from gate.paths import path_part

COST_FACTS = (("wall_seconds", "wall_hours", 1 / 3600), ("cpu_seconds", "cpu_hours", 1 / 3600),
              ("gpu_hours", "gpu_hours", 1.0), ("energy_kwh", "energy_kwh", 1.0))


@dataclasses.dataclass
class TierSummary:
    out: Path
    report: Path
    cost: pd.DataFrame
    comparison: pd.DataFrame
    score_failures: list[str]


# --------------------------------------------------------------------------------------------- scores


def score_tier(plan, *, overrides: Sequence[str] = (), searchpath: Sequence[str] = (),
               echo: Callable[..., None] = print) -> tuple[set[str], list[str]]:
    """gate-score (the library stage) for every encoder × dataset the tier ran whose task family takes
    transferability scores (:attr:`gate.families.TaskFamily.transferability`); returns the score experiment ids
    and the failures (one line each). Already stored scores are not recomputed."""
    from gate.engine.compose import hydra_compose_context
    from gate.engine.validate import parse_score
    from gate.families import family
    from gate.scoring.stage import run_score
    from gate.tiers.expand import searchpath_override

    pairs = {}
    for exp in plan.experiments:
        if family(exp.config["dataset"]["task"]).transferability and exp.seed == plan.experiments[0].seed:
            pairs.setdefault((exp.encoder, exp.dataset), exp)
    ids, failures = set(), []
    with hydra_compose_context(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from hydra import compose

        for (enc, ds), exp in pairs.items():
            ovs = [f"paths.root={plan.root}", *searchpath_override(searchpath), f"dataset={ds}", f"encoder={enc}",
                   f"image_size={exp.config['image_size']}", "progress_bar=false", *plan.tier.score_overrides,
                   *overrides]
            started = time.monotonic()
            try:
                checked = parse_score(compose("score", overrides=ovs))
                ids.add(checked.experiment)
                result = run_score(checked)
            except Exception as err:  # noqa: BLE001 - one failed score does not lose the tier's report
                failures.append(f"gate-score {enc} × {ds}: {' '.join(str(err).split())[:300]}")
                echo(f"[gate] score  FAILED {enc} × {ds}: {failures[-1]}", flush=True)
                continue
            what = "already stored" if result.skipped else f"{len(result.values)} score(s)"
            echo(f"[gate] score  {enc} × {ds}: {what} ({time.monotonic() - started:.0f}s)", flush=True)
    return ids, failures


# ----------------------------------------------------------------------------------------------- cost


def experiment_facts(records: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per fine-tuning experiment: encoder, dataset, seed and its cost facts (NaN = unmeasured)."""
    rows = {}
    for r in records:
        if r.get("kind") != "finetune" or r["experiment"] in rows:
            continue
        facts = r.get("facts") or {}
        row = {"experiment": r["experiment"], "encoder": r["encoder"], "dataset": r["dataset"], "seed": r["seed"],
               "device": facts.get("device", "")}
        for key, _, _ in COST_FACTS:
            value = facts.get(key)
            row[key] = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
        rows[r["experiment"]] = row
    return pd.DataFrame(list(rows.values()), columns=["experiment", "encoder", "dataset", "seed", "device",
                                                      *[k for k, _, _ in COST_FACTS]])


def cost_table(facts: pd.DataFrame) -> pd.DataFrame:
    """Cost per benchmark, per encoder and in total: experiments, and per fact its sum (in hours / kWh) and how
    many experiments measured it. A sum over no measured experiment is NaN (unmeasured), never 0."""
    out = []
    for scope, column in (("benchmark", "dataset"), ("encoder", "encoder"), ("total", None)):
        groups = facts.groupby(column, sort=False) if column else [("all", facts)]
        for key, rows in groups:
            row = {"scope": scope, "key": key, "experiments": len(rows)}
            for fact, name, factor in COST_FACTS:
                measured = rows[fact].notna()
                row[name] = float(rows.loc[measured, fact].sum() * factor) if measured.any() else math.nan
                row[f"{name}_measured"] = int(measured.sum())
            out.append(row)
    return pd.DataFrame(out)


def format_cost(cost: pd.DataFrame) -> list[str]:
    """The cost table as aligned text lines (unmeasured → "—")."""
    cols = ["wall_hours", "cpu_hours", "gpu_hours", "energy_kwh"]
    head = f"  {'':<9} {'':<22} {'runs':>4}  " + "  ".join(f"{c:>12}" for c in cols)
    lines = [head]
    for row in cost.itertuples(index=False):
        cells = []
        for c in cols:
            v, n = getattr(row, c), getattr(row, f"{c}_measured")
            cells.append(f"{'—':>12}" if n == 0 else f"{v:12.4f}" + ("" if n == row.experiments else "*"))
        lines.append(f"  {row.scope:<9} {str(row.key):<22} {row.experiments:>4}  " + "  ".join(cells))
    lines.append("  (— = not measured by these runs; * = measured for some of the runs only)")
    return lines


# ------------------------------------------------------------------------------------------ comparison


def compare_encoders(tiers_table: pd.DataFrame, encoders: Sequence[str], tier: str,
                     bench_info: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per GATE paper group and for the tier mean: each encoder's mean, and the first encoder minus each other one
    (pretrained vs scratch in the demo). Rows: ``group`` = paper group or ``<tier> (tier mean)``; ``departs`` =
    the benchmarks averaged in the row whose numbers depart from GATE's protocol (``vs_gate`` of ``bench_info``,
    the analysis' ``tiers_benchmarks.csv``), so a reader of the row knows it is not the paper's number; ``capped`` =
    those measured on a capped evaluation split (its ``capped``)."""
    if tiers_table.empty:
        return pd.DataFrame(columns=["group", *encoders, "departs", "capped"])
    t = tiers_table.set_index("encoder")
    present = [e for e in encoders if e in t.index]
    cols = [c for c in t.columns if c.startswith("group:") and not c.endswith((":rank", ":n"))]
    info = bench_info if bench_info is not None and "vs_gate" in bench_info.columns else None
    departing = [] if info is None else info.loc[info["vs_gate"].fillna("").astype(bool), ["benchmark", "paper_group"]]
    capped = ([] if info is None or "capped" not in info.columns
              else info.loc[info["capped"].fillna("").astype(bool), ["benchmark", "paper_group"]])
    rows = []
    for col, label in [(f"tier:{tier}", f"{tier} (tier mean)")] + [(c, c.split(":", 1)[1]) for c in cols]:
        if col not in t.columns:
            continue
        row = {"group": label, **{e: float(t.loc[e, col]) for e in present}}
        for other in present[1:]:
            row[f"{present[0]} − {other}"] = row[present[0]] - row[other]
        if info is not None:
            for key, marked in (("departs", departing), ("capped", capped)):
                if len(marked) or key == "departs":
                    mine = marked if col.startswith("tier:") else marked[marked["paper_group"] == label]
                    row[key] = ",".join(map(str, mine["benchmark"]))
        rows.append(row)
    return pd.DataFrame(rows)


def format_comparison(comp: pd.DataFrame) -> list[str]:
    """The comparison as printed lines; a row averaging a benchmark that departs from GATE's protocol is marked †
    and the benchmarks are named under the table."""
    from gate.analysis.meta import CAPPED_MARK, DEPARTS_MARK

    if comp.empty:
        return ["  (no tier or group means: see the report's warnings)"]
    departs = comp["departs"].fillna("") if "departs" in comp.columns else pd.Series("", index=comp.index)
    capped = comp["capped"].fillna("") if "capped" in comp.columns else pd.Series("", index=comp.index)
    labels = [f"{f} {(DEPARTS_MARK if d else '') + (CAPPED_MARK if c else '')}".rstrip()
              for f, d, c in zip(comp["group"], departs, capped)]
    cols = [c for c in comp.columns if c not in ("group", "departs", "capped")]
    width = max(len(label) for label in labels)
    lines = [f"  {'group':<{width}}  " + "  ".join(f"{c:>{max(12, len(c))}}" for c in cols)]
    for label, (_, row) in zip(labels, comp.iterrows()):
        cells = []
        for c in cols:
            v = row[c]
            text = "" if pd.isna(v) else (f"{v:+.4f}" if "−" in c else f"{v:.4f}")
            cells.append(f"{text:>{max(12, len(c))}}")
        lines.append(f"  {label:<{width}}  " + "  ".join(cells))
    named = sorted({b for d in departs for b in d.split(",") if b})
    if named:
        lines.append(f"  {DEPARTS_MARK} averages benchmarks whose numbers depart from the GATE paper's protocol "
                     f"(not comparable with its table): {', '.join(named)}; see tiers_benchmarks.csv (vs_gate)")
    named = sorted({b for c in capped for b in c.split(",") if b})
    if named:
        lines.append(f"  {CAPPED_MARK} averages benchmarks measured on a capped subset of their evaluation split "
                     f"(data.max_val_samples / data.max_test_samples), not the whole split: {', '.join(named)}; see "
                     f"tiers_benchmarks.csv (capped)")
    return lines


# --------------------------------------------------------------------------------------------- report


def summarise_tier(plan, reports_dir: str | Path, *, score_ids: set[str] = frozenset(),
                   score_failures: Sequence[str] = (), failed: Sequence[Any] = (),
                   echo: Callable[..., None] = print) -> TierSummary:
    """Write ``<reports_dir>/tier-<tier>/``: records.jsonl, cost.csv, comparison.csv and the analysis report with
    the comparison and cost tables; print both tables."""
    from gate.analysis.pipeline import run_analysis
    from gate.analysis.report import frame_html

    store = plan.store()
    ids = {e.id for e in plan.experiments}
    records = [r for r in store.complete_records() if (r.get("kind") == "finetune" and r["experiment"] in ids)
               or (r.get("kind") == "score" and r["experiment"] in score_ids)]
    out = Path(reports_dir) / f"tier-{path_part(plan.tier.name, 'tier name')}"
    out.mkdir(parents=True, exist_ok=True)
    subset = out / "records.jsonl"
    atomic_write_text(subset, "".join(json.dumps(r, default=str, allow_nan=False) + "\n" for r in records))

    cost = cost_table(experiment_facts(records))
    cost.to_csv(out / "cost.csv", index=False)
    ran = list(dict.fromkeys(e.dataset for e in plan.experiments))
    sections = []
    note = (f"{len({r['experiment'] for r in records if r['kind'] == 'finetune'})} of {len(plan.experiments)} "
            f"experiment(s) of tier {html.escape(plan.tier.name)} have results")
    if failed:
        note += "; failed: " + ", ".join(html.escape(getattr(e, "label", str(e))) for e, _ in failed)
    skipped = "".join(f"<li>{html.escape(s)}</li>" for s in plan.skipped)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = run_analysis(subset, out, tiers={plan.tier.name: {"benchmarks": ran}}, figures=False)
    bench_info = pd.read_csv(first.files["tiers_benchmarks.csv"], keep_default_na=False)
    comparison = compare_encoders(first.tiers, plan.encoders, plan.tier.name, bench_info)
    comparison.to_csv(out / "comparison.csv", index=False)
    if len(plan.encoders) > 1:
        sections.append((f"{plan.encoders[0]} vs the other encoders, per GATE paper group",
                         f"<p class='meta'>{note}. Mean of each group's representative metrics on one 0–1 scale, "
                         f"higher is better (tiers_benchmarks.csv: entered_as); the last columns are "
                         f"{html.escape(plan.encoders[0])} minus each other encoder "
                         f"(positive: {html.escape(plan.encoders[0])} is better).</p>"
                         + frame_html(comparison.drop(columns=[c for c in ("departs", "capped") if not
                                                               comparison.get(c, pd.Series(dtype=str)).astype(bool).any()]),
                                      left=("group",))
                         + (f"<p class='meta'>Skipped entries:</p><ul>{skipped}</ul>" if skipped else "")))
    sections.append(("Cost of the tier", "<p class='meta'>Sums of the runs' measured facts (wall-clock, CPU and GPU "
                                         "hours, energy); empty = not measured by these runs, never estimated.</p>"
                     + frame_html(cost, left=("scope", "key"))))
    if failed:  # whatever the number of encoders: a job that failed or was stopped by a signal is not done
        sections.append(("Experiments that failed or were stopped",
                         "<p class='meta'>Not done: no results of theirs are in this report. Rerun the same gate-tier "
                         "command: it skips what is done, and a stopped run resumes from its last checkpoint.</p><ul>"
                         + "".join(f"<li>failed: {html.escape(getattr(e, 'label', str(e)))} (log: "
                                   f"{html.escape(str(log))})</li>" for e, log in failed) + "</ul>"))
    if score_failures:
        sections.append(("Scores that failed", "<ul>" + "".join(f"<li>{html.escape(f)}</li>" for f in score_failures)
                         + "</ul>"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the report lists them
        result = run_analysis(subset, out, tiers={plan.tier.name: {"benchmarks": ran}}, extra_sections=sections)
    if len(plan.encoders) > 1:
        echo(f"[gate] tier {plan.tier.name}: {plan.encoders[0]} vs the others, per paper group (means of the "
             f"representative metrics; last columns: difference)")
        for line in format_comparison(comparison):
            echo(line)
    echo(f"[gate] cost of tier {plan.tier.name} (from the records' facts):")
    for line in format_cost(cost):
        echo(line)
    if not result.correlations.empty:
        echo(f"[gate] score-vs-accuracy correlations: {len(result.correlations)} row(s) in {out / 'correlations.csv'}")
    elif score_ids:
        echo("[gate] score-vs-accuracy correlations need >= 3 encoders per dataset; none with these encoders")
    return TierSummary(out, result.files["report.html"], cost, comparison, list(score_failures))
