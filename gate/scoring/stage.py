"""The gate-score stage: transferability scores from one cached pass of features (``conf/score.yaml``).

For one encoder × dataset × split it extracts (or loads from the cache, see :mod:`gate.scoring.features`) the pooled
features, labels and — for encoders with a source classification head — source probabilities, computes every
applicable score of :data:`gate.transferability.SCORES` (or those listed in ``metrics``) and appends one
``Record(kind="score", split=<split>, metric=<score name>, higher_is_better=...)`` per score to the results
store (``paths.results``).

Records: ``adapter`` and ``recipe`` are empty (no fine-tuning is involved); ``config`` is the experiment's
identity (:func:`gate.results.identity`: encoder, dataset, split, seed, max_samples, image_size) and ``facts``
says how each score was computed: ``{"seconds": <time this score took>, "extract_seconds": <feature pass, 0 when
cached>, "features_from_cache": bool, "num_samples": n, "feature_dim": D, "num_classes": C}`` (the classes
present), ``"feature_rank"`` where a score computed fits on the rows it scores
(:func:`gate.transferability.feature_rank`), and ``"degenerate": <why>`` on a score that cannot discriminate
on these rows (:meth:`gate.transferability.Metric.degenerate`: SFDA or H-score where the features' rank
reaches the rows less the classes, or less one; the number is stored, as the authors' code computes it, with the
mark beside it, so the record set stays complete). Re-running is a no-op for the
scores already stored (``force=true`` recomputes them), and asking for more ``metrics`` later computes just
the missing ones. The scores of one call are one record set (see :meth:`gate.results.ResultsStore.append_set`),
stored only whole: when a score fails (a subsample with one class), nothing is stored and the error names each
failure and the ``metrics=[...]`` that stores the others. ``metrics=[]`` is refused (null: every applicable score).

The encoder is built seeded from the experiment's ``seed`` (:func:`gate.engine.build.build_encoder`), as fine-tuning
builds it: a randomly initialised encoder (``resnet18_scratch``) scores the same on every extraction, and is the
very encoder a fine-tuning run of that seed starts from.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from pathlib import Path

from .. import signals
from ..engine.validate import Checked
from ..families import families, family
from ..results import ExperimentLock, Record, ResultsStore, git_describe, identity


class NeedsSourceHead(ValueError):
    """Scores asked for need the source-class probabilities of a pretrained classification head the encoder lacks;
    ``metrics`` names them, so a caller that takes the names under another key (gate-rank's ``scores``) can say
    so in its own words."""

    def __init__(self, encoder: str, metrics: list[str], message: str) -> None:
        super().__init__(message)
        self.encoder, self.metrics = encoder, metrics


@dataclasses.dataclass
class ScoreResult:
    experiment: str
    skipped: bool
    values: dict[str, float]
    seconds: dict[str, float]
    results_path: Path
    features_path: Path | None = None
    features_from_cache: bool = False
    extract_seconds: float = 0.0
    degenerate: dict[str, str] = dataclasses.field(default_factory=dict)  # score → why it cannot discriminate
    label: str = ""              # encoder × dataset/split, as gate-score prints it

    def report(self) -> int:
        """gate-score's lines: each score, its seconds and why it is degenerate, and where they went."""
        if self.skipped:
            print(f"[gate] scores of experiment {self.experiment} ({self.label}) are already in {self.results_path}; "
                  f"skipping (force=true recomputes them)")
            return 0
        source = "cache" if self.features_from_cache else f"extracted in {self.extract_seconds:.1f}s"
        print(f"[gate] experiment {self.experiment}: {self.label} (features: {source})")
        width = max((len(k) for k in self.values), default=0)
        for key, value in self.values.items():
            why = f"  degenerate: {self.degenerate[key]}" if key in self.degenerate else ""
            print(f"  {key:<{width}}  {value:12.6g}   ({self.seconds[key]:.2f}s){why}")
        print(f"[gate] results store: {self.results_path}")
        if self.features_path is not None:
            print(f"[gate] features:      {self.features_path}")
        return 0


def _device(name: str) -> str:
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device={name!r} but no CUDA device is available; use device=cpu or device=auto")
    return name


def _wanted(names: list[str] | None, has_probs: bool | None) -> list[str]:
    from ..transferability import SCORES, applicable_scores

    if names is not None:
        return applicable_scores(True if has_probs is None else has_probs, list(names))
    if has_probs is None:
        return list(SCORES)
    return applicable_scores(has_probs)


def run_score(checked: Checked) -> ScoreResult:
    """Score the encoder on the split of the dataset of ``checked`` (a composed ``score.yaml`` parsed once, where it
    was composed: :func:`gate.engine.validate.parse_score`), appending records."""
    if not isinstance(checked, Checked):
        raise TypeError(f"run_score takes gate-score's parse, got a {type(checked).__name__}: "
                        f"run_score(gate.engine.validate.parse_score(cfg))")
    label = f"{checked.run.encoder['name']} × {checked.spec.name}/{checked.run.split}"
    return dataclasses.replace(_run(checked), label=label)


def _run(checked: Checked) -> ScoreResult:
    run, config = checked.run, checked.config  # checked and typed once (gate.settings.ScoreConfig)
    ident = identity(config, "score")
    exp = checked.experiment
    store = ResultsStore(run.paths.results)
    task = checked.spec.task
    if not family(task).transferability:
        scored = sorted(n for n, f in families().items() if f.transferability)
        raise ValueError(f"gate-score scores datasets of the task families {scored}; dataset "
                         f"{checked.spec.name!r} is a {task!r} task")
    names = run.metrics
    if names is not None:
        names = [names] if isinstance(names, str) else list(names)
        if not names:  # would be "done" at once: a set of no score is never what was meant
            raise ValueError("metrics=[] names no score: give metrics=null for every applicable score, or the "
                             "scores to compute, e.g. metrics=[logme,rankme]")
        _wanted(names, None)  # unknown names fail before any work
    force = run.force
    store.check_writable()  # a store that cannot take the scores: said now, not after the feature pass
    done = {r["metric"] for r in store.complete_records(exp, "score")}
    if not force and _all_done(names, done):
        return ScoreResult(exp, True, {}, {}, store.path)
    with ExperimentLock(checked.run_dir, exp):
        done = {r["metric"] for r in store.complete_records(exp, "score")}  # a twin may have finished meanwhile
        if not force and _all_done(names, done):
            return ScoreResult(exp, True, {}, {}, store.path)
        return _score(checked, ident, exp, store, names, done, force)


def _score(checked: Checked, ident, exp, store, names, done, force) -> ScoreResult:
    import torch

    from ..data.loading import resolve_num_workers, resolve_pin_memory
    from ..transferability import SCORES, feature_rank
    from .features import cached_features  # heavy (encoders, datasets): only when there is work to do

    run, config = checked.run, checked.config
    task, encoder, where = checked.spec.task, run.encoder["name"], f"{checked.spec.name}/{run.split}"

    # Every setting from the typed config (conf/score.yaml states the defaults, once; the parse checked them).
    device = _device(run.device)
    cuda = torch.device(device).type == "cuda"
    pin_memory, note = resolve_pin_memory(run.pin_memory, cuda=cuda)
    if note:
        print(f"[gate] {note}")
    feats = cached_features(config, run.split, run.max_samples, run.paths.cache if run.cache else None,
                            refresh=not run.cache, batch_size=run.batch_size,
                            num_workers=resolve_num_workers(run.num_workers, cuda=cuda), pin_memory=pin_memory,
                            device=device, progress=run.progress_bar)
    try:
        wanted = [m for m in _wanted(names, feats.source_probs is not None) if force or m not in done]
    except ValueError as err:
        if feats.source_probs is None and names and any(SCORES[m].needs == "source_probs" for m in names):
            raise NeedsSourceHead(encoder, [m for m in names if SCORES[m].needs == "source_probs"],
                                  str(err)) from None
        raise
    features = feats.features.to(device=device, dtype=torch.float64)
    labels = feats.labels.to(device)
    probs = feats.source_probs.to(device=device, dtype=torch.float64) if feats.source_probs is not None else None

    values, seconds, failed = {}, {}, {}
    for name in wanted:
        start = time.perf_counter()
        try:
            values[name] = SCORES[name](features=features, labels=labels, source_probs=probs)
        except (ValueError, RuntimeError) as err:  # e.g. a subsample with a single class
            failed[name] = " ".join(str(err).split())
            continue
        seconds[name] = time.perf_counter() - start
    if failed:
        # A set is stored only whole: the scores that did compute, stored alone, would read as a complete set (a
        # damaged input once stored rankme and etran_energy alone, and later calls never recomputed them).
        kept = [m for m in (names or _wanted(None, feats.source_probs is not None)) if m not in failed]
        raise ValueError(f"gate-score on {encoder} × {where}: {len(failed)} of {len(wanted)} score(s) failed: "
                         + "; ".join(f"{m} failed ({why})" for m, why in failed.items())
                         + "; nothing stored (a score set is stored only whole)"
                         + (f"; to store the others: metrics=[{','.join(kept)}]" if kept else ""))

    common = dict(experiment=exp, kind="score", encoder=encoder, dataset=checked.spec.name, task=task, adapter="",
                  recipe="", seed=run.seed, split=run.split, git=git_describe())
    run_info = dict(extract_seconds=round(feats.seconds, 4), features_from_cache=feats.from_cache,
                    num_samples=feats.num_samples, feature_dim=int(feats.features.shape[1]),
                    num_classes=int(torch.unique(labels).numel()))
    if any(SCORES[name].fits for name in values):  # an SVD of the features: only where a score's mark needs it
        run_info["feature_rank"] = feature_rank(features)
    degenerate = {name: why for name in values if (why := SCORES[name].degenerate(
        run_info["num_samples"], run_info["num_classes"], feature_rank=run_info.get("feature_rank")))}
    for name, why in degenerate.items():
        warnings.warn(f"gate-score: {name} is degenerate on {encoder} × {where} ({why}): its fit on these rows is "
                      "exact for any labels", stacklevel=2)
    with signals.critical():  # the score set goes out whole; a stop signal waits for it
        store.append_set((Record(metric=name, value=value, config=ident, **common,
                                 facts={"seconds": round(seconds[name], 6), **run_info,
                                        **({"degenerate": degenerate[name]} if name in degenerate else {})})
                          for name, value in values.items()), facts=None)
        signals.recorded(f"score experiment {exp}")
    return ScoreResult(exp, False, values, seconds, store.path, feats.path, feats.from_cache, feats.seconds,
                       degenerate)


def _all_done(names: list[str] | None, done: set[str]) -> bool:
    from ..transferability import SCORES

    if names is not None:
        return set(names) <= done
    needs_features = {k for k, m in SCORES.items() if m.needs == "features"}
    needs_probs = set(SCORES) - needs_features
    # An encoder without a source head never gets the probability scores: all-or-none of them counts as done.
    return needs_features <= done and (needs_probs <= done or not (needs_probs & done))
