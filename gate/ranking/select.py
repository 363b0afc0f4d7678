"""Which of a tier's benchmarks the proxy runs, chosen from data: the subset whose runs best predict the tier's
mean-rank ranking per unit of predicted cost.

:func:`choose` is a procedure run on the history it is given — never a list in the code. On the history's encoders
(never the pool's: the leakage rule) a subset is worth the correlation between its encoders' mean rank over it and
their mean rank over the whole tier (:func:`agreement`); where the history has several seeds, the subset's values
are single seeds (what one proxy run sees), averaged over draws, so a benchmark its own seeds disagree on is worth
less. Forward selection first covers each paper group the budget can cover (``min_per_family``, the groups cheapest
to cover first), each time with the benchmark of an uncovered group that agrees best, then adds, while the budget
affords it, the benchmark with the largest gain per unit of cost; a benchmark that adds nothing (a copy of one
already taken, pure noise) is not taken.

Whether the choice ranks encoders it has not seen is then measured as the retrospective does
(``measurements/rank_table_retro.py``): holding encoders out of the history, the held-out τ of the tier ranking with
the unrun benchmarks completed (:mod:`gate.ranking.complete`) and without; completion is used only where it is the
better. The choice's stability is the share of bootstrap resamples of the history's encoders that choose each
benchmark.

With no usable history (fewer than :data:`MIN_HISTORY` encoders with every candidate), a stated rule: one benchmark
per paper group, the cheapest first, while the budget affords it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np

from gate.ranking.complete import loo_taus, mean_rank
from gate.ranking.history import History

#: Fewer history encoders than this (with a value on every candidate) is no basis for a choice: the rule is used.
MIN_HISTORY = 6
#: A benchmark is added only when it raises the held-out τ by more than this (a copy or noise adds nothing).
MIN_GAIN = 1e-3
RULE = "one benchmark per paper group, the cheapest first, while the budget affords it (no usable history)"


@dataclasses.dataclass(frozen=True)
class Selection:
    chosen: tuple[str, ...]
    method: str                          # history | rule
    why: dict[str, str]                  # benchmark → why it was taken
    tau: float                           # held-out τ of the chosen subset (the better of with / without completion)
    tau_completed: float
    tau_plain: float
    stability: dict[str, float]          # benchmark → share of bootstrap resamples choosing it
    fingerprint: str                     # the history's
    history_encoders: int

    @property
    def use_completion(self) -> bool:
        return self.method == "history" and self.tau_completed > self.tau_plain


def splits(n: int, count: int, seed: int, held_fraction: float = 0.4) -> list[np.ndarray]:
    """``count`` boolean masks over ``n`` encoders, each holding out ``held_fraction`` of them (at least 3)."""
    rng = np.random.default_rng(seed)
    held = max(3, int(round(n * held_fraction)))
    out = []
    for _ in range(count):
        mask = np.zeros(n, bool)
        mask[rng.choice(n, size=min(held, n - 3), replace=False)] = True
        out.append(mask)
    return out


def agreement(values: np.ndarray, subset: Sequence[int], truth: np.ndarray,
              draws: Sequence[tuple[np.ndarray, np.ndarray]] = ()) -> float:
    """How well the mean rank over ``subset`` (column indices of ``values``: encoders × benchmarks, higher is
    better) agrees with ``truth`` (the tier's mean rank): their Pearson correlation. With ``draws`` (pairs of one
    seed's values and the mean of the other seeds'), the subset is read from the one seed and the truth from the
    others, averaged over the draws: what a proxy run (a seed of its own) tells about the truth. -1 for a subset
    that cannot order the encoders."""
    pairs = draws or ((values, truth),)
    out = []
    for seen, target in pairs:
        target = target if target.ndim == 1 else mean_rank(target)
        ranks = mean_rank(seen[:, list(subset)])
        out.append(float(np.corrcoef(ranks, target)[0, 1]) if np.ptp(ranks) > 0 and np.ptp(target) > 0 else -1.0)
    return float(np.mean(out))


def _seed_draws(history: History, candidates: Sequence[str], count: int, seed: int
                ) -> list[tuple[np.ndarray, np.ndarray]]:
    """``count`` (one seed's values, the mean of the other seeds' values) pairs over ``candidates``: each encoder and
    benchmark with several seeds shows one of them, and the truth beside it is what the remaining seeds say (a
    benchmark without seeds shows its mean on both sides)."""
    if not history.seeds:
        return []
    rng = np.random.default_rng(seed)
    base = history.values[list(candidates)].to_numpy(float)
    index = list(history.values.index)
    seeds = {j: history.seeds[b].reindex(index).to_numpy(float) for j, b in enumerate(candidates)
             if b in history.seeds and history.seeds[b].shape[1] >= 2}
    out = []
    for _ in range(count):
        seen, rest = base.copy(), base.copy()
        for j, f in seeds.items():
            have = np.isfinite(f)
            for i in np.flatnonzero(have.sum(axis=1) >= 2):
                cols = np.flatnonzero(have[i])
                pick = cols[rng.integers(len(cols))]
                seen[i, j] = f[i, pick]
                rest[i, j] = f[i, cols[cols != pick]].mean()
        out.append((seen, rest))
    return out


def _copy_of_chosen(values: np.ndarray, j: int, chosen: Sequence[int]) -> bool:
    """Whether column ``j`` holds the very values of a chosen column (a copy: running it tells nothing new)."""
    return any(np.allclose(values[:, j], values[:, c], rtol=0.0, atol=1e-9) for c in chosen)


class _Agreement:
    """The agreement of subsets of one history's candidates, computed once per subset (a plan asks the same subsets
    at many budgets)."""

    def __init__(self, history: History, candidates: Sequence[str], seed: int) -> None:
        self.values = history.values[list(candidates)].to_numpy(float)
        self.truth = mean_rank(self.values)
        self.draws = _seed_draws(history, candidates, 8, seed)
        self.cache: dict[tuple[int, ...], float] = {}

    def __call__(self, subset: Sequence[int]) -> float:
        key = tuple(sorted(subset))
        if key not in self.cache:
            self.cache[key] = agreement(self.values, key, self.truth, self.draws)
        return self.cache[key]


def _greedy(history: History, candidates: Sequence[str], cost: Mapping[str, float], affordable: float,
            groups: Mapping[str, str], min_per_family: int, max_k: int | None, seed: int,
            scorer: _Agreement | None = None) -> tuple[list[str], dict[str, str], float]:
    scorer = scorer or _Agreement(history, candidates, seed)
    values = scorer.values
    chosen: list[int] = []
    why: dict[str, str] = {}
    spent, best = 0.0, -1.0
    covered: dict[str, int] = {}
    coverable = _coverable(candidates, cost, affordable, groups, min_per_family)
    while max_k is None or len(chosen) < max_k:
        open_ = [j for j, b in enumerate(candidates) if j not in chosen and spent + cost[b] <= affordable + 1e-9
                 and not _copy_of_chosen(values, j, chosen)]
        need = [j for j in open_ if groups.get(candidates[j]) in coverable
                and covered.get(groups.get(candidates[j], ""), 0) < min_per_family]
        pool = need or open_
        if not pool:
            break
        score = {j: scorer([*chosen, j]) for j in pool}
        gain = {j: (score[j] - (best if chosen else 0.0)) / max(cost[candidates[j]], 1e-12) for j in pool}
        pick = max(pool, key=lambda j: (gain[j], -cost[candidates[j]], -j))
        if not need and chosen and score[pick] - best <= MIN_GAIN:
            break
        chosen.append(pick)
        spent += cost[candidates[pick]]
        best = score[pick]
        group = groups.get(candidates[pick], "")
        covered[group] = covered.get(group, 0) + 1
        why[candidates[pick]] = ((f"covers {group or 'its group'}" if need else "the largest gain per unit of cost") +
            f" (agreement with the tier's mean rank {best:+.3f})")
    return [candidates[j] for j in chosen], why, best


def _coverable(candidates: Sequence[str], cost: Mapping[str, float], affordable: float, groups: Mapping[str, str],
               min_per_family: int) -> set[str]:
    """The paper groups the budget can cover ``min_per_family`` times with their cheapest benchmarks (the
    cheapest groups first)."""
    if min_per_family <= 0:
        return set()
    by_group: dict[str, list[float]] = {}
    for b in candidates:
        by_group.setdefault(groups.get(b, ""), []).append(cost[b])
    need = sorted((sum(sorted(c)[:min_per_family]), g) for g, c in by_group.items() if g and len(c) >= 1)
    out, spent = set(), 0.0
    for c, g in need:
        if spent + c <= affordable + 1e-9:
            out.add(g)
            spent += c
    return out


def rule(candidates: Sequence[str], cost: Mapping[str, float], affordable: float,
         groups: Mapping[str, str]) -> list[str]:
    """:data:`RULE`: per paper group its cheapest benchmark, groups in order of that cost, while affordable (at
    least one benchmark)."""
    cheapest: dict[str, str] = {}
    for b in candidates:
        g = groups.get(b, b)
        if g not in cheapest or cost[b] < cost[cheapest[g]]:
            cheapest[g] = b
    out, spent = [], 0.0
    for b in sorted(cheapest.values(), key=lambda b: (cost[b], candidates.index(b))):
        if out and spent + cost[b] > affordable + 1e-9:
            continue
        out.append(b)
        spent += cost[b]
    return [b for b in candidates if b in out]


class Chooser:
    """:func:`choose` on one history and one set of candidates, for many costs and budgets (a plan's levels): the
    history's subsets are scored once."""

    def __init__(self, history: History, candidates: Sequence[str], *, groups: Mapping[str, str] | None = None,
                 min_per_family: int = 1, max_k: int | None = None, seed: int = 0) -> None:
        self.history, self.candidates = history, list(candidates)
        self.groups = dict(groups if groups is not None else history.groups)
        self.min_per_family, self.max_k, self.seed = min_per_family, max_k, seed
        self.fingerprint = history.fingerprint()
        self.usable = history.restrict(self.candidates)
        self.has_history = (len(self.usable.values) >= MIN_HISTORY and
            len(self.usable.values.columns) == len(self.candidates))
        self.scorer = _Agreement(self.usable, self.candidates, seed) if self.has_history else None

    def __call__(self, cost: Mapping[str, float], affordable: float, *, n_splits: int = 0, n_boot: int = 0) -> Selection:
        candidates, groups = self.candidates, self.groups
        if not self.has_history:
            chosen = rule(candidates, cost, affordable, groups)
            return Selection(tuple(chosen), "rule", {b: RULE for b in chosen}, math.nan, math.nan, math.nan,
                             {}, self.fingerprint, len(self.usable.values))
        usable = self.usable
        chosen, why, _ = _greedy(usable, candidates, cost, affordable, groups, self.min_per_family, self.max_k,
                                 self.seed, self.scorer)
        if not chosen:  # nothing is affordable: the cheapest, so that something runs
            chosen = rule(candidates, cost, affordable, groups)[:1]
            why = {chosen[0]: "the cheapest: nothing fits the budget"}
        t_c, t_p = math.nan, math.nan
        if n_splits:
            masks = splits(len(usable.values), n_splits, self.seed)
            noise = np.random.default_rng(self.seed) if usable.seeds else None
            t_c, t_p = loo_taus(usable, chosen, candidates, masks, noise)
        stability: dict[str, float] = {}
        if n_boot:
            rng = np.random.default_rng(self.seed + 1)
            counts = dict.fromkeys(candidates, 0)
            n = len(usable.values)
            for _ in range(n_boot):
                rows = usable.values.index[rng.integers(0, n, n)]
                if len(set(rows)) < 3:
                    continue
                boot = dataclasses.replace(usable, values=usable.values.loc[rows].set_axis(
                    [f"{e}#{j}" for j, e in enumerate(rows)]), seeds={})
                for b in _greedy(boot, candidates, cost, affordable, groups, self.min_per_family, self.max_k,
                                 self.seed)[0]:
                    counts[b] += 1
            stability = {b: counts[b] / n_boot for b in candidates}
        finite = [t for t in (t_c, t_p) if math.isfinite(t)]
        return Selection(tuple(b for b in candidates if b in chosen), "history", why,
                         max(finite) if finite else math.nan, t_c, t_p, stability, self.fingerprint,
                         len(usable.values))


def choose(history: History, candidates: Sequence[str], *, cost: Mapping[str, float], affordable: float,
           groups: Mapping[str, str] | None = None, min_per_family: int = 1, max_k: int | None = None,
           n_splits: int = 30, n_boot: int = 0, seed: int = 0) -> Selection:
    """The benchmarks of ``candidates`` the proxy runs, within ``affordable`` (in the units of ``cost``: what a
    benchmark's proxy runs cost), chosen on ``history`` (other encoders than the pool's). ``groups``: benchmark →
    paper group (default: the history's). ``n_splits`` hold-outs of the history's encoders estimate the held-out
    τ with and without completion; ``n_boot`` bootstrap resamples give each benchmark's stability."""
    return Chooser(history, candidates, groups=groups, min_per_family=min_per_family, max_k=max_k, seed=seed)(
        cost, affordable, n_splits=n_splits, n_boot=n_boot)
