"""Shared input validation: bad input → ValueError naming the argument; degenerate-but-valid input → finite."""

import numpy as np
import pytest
import torch

from gate import transferability as T

FEATURE_METRICS = {k: m for k, m in T.SCORES.items() if m.needs == "features"}
PROB_METRICS = {k: m for k, m in T.SCORES.items() if m.needs == "source_probs"}
FAST_KW = {"nleep": dict(components_per_class=1), "n_nleep": dict(components_per_class=1)}


def data(n=24, d=6, c=3, seed=0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % c
    f = rng.normal(size=(n, d)) + np.eye(c)[y] @ rng.normal(size=(c, d))
    p = rng.dirichlet(np.ones(5), n)
    return f, y, p


def call(name, features=None, labels=None, source_probs=None):
    return T.SCORES[name](features=features, labels=labels, source_probs=source_probs, **FAST_KW.get(name, {}))


@pytest.mark.parametrize("name", sorted(FEATURE_METRICS))
def test_feature_metrics_reject_bad_features(name):
    f, y, _ = data()
    bad = f.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="features"):
        call(name, bad, y)
    bad[3, 2] = np.inf
    with pytest.raises(ValueError, match="features"):
        call(name, bad, y)
    with pytest.raises(ValueError, match="features"):
        call(name, np.ones((10, 4)), np.arange(10) % 2)  # constant
    with pytest.raises(ValueError, match="features"):
        call(name, f[:1], y[:1])  # n < 2
    with pytest.raises(ValueError, match="features"):
        call(name, f[:, 0], y)  # not 2-D


@pytest.mark.parametrize("name", sorted(k for k, m in T.SCORES.items() if m.uses_labels))
def test_label_errors_name_the_labels(name):
    f, y, p = data()
    kw = dict(features=f, source_probs=p)
    for bad in (y[:-1], np.zeros_like(y), y + 0.5, y - 1, np.full(len(y), np.nan)):
        with pytest.raises(ValueError, match="labels"):
            call(name, labels=bad, **kw)


@pytest.mark.parametrize("name", sorted(PROB_METRICS))
def test_probability_errors_name_the_source_probs(name):
    _, y, p = data()
    neg = p.copy()
    neg[0, 0] = -0.1
    neg[0, 1] += 0.1
    with pytest.raises(ValueError, match="source"):
        call(name, labels=y, source_probs=neg)
    if name.endswith("leep"):  # NCE takes hard labels or probabilities; LEEP needs rows summing to 1
        with pytest.raises(ValueError, match="source_probs"):
            call(name, labels=y, source_probs=p * 2)
        with pytest.raises(ValueError, match="source_probs"):
            call(name, labels=y, source_probs=np.log(p))
    nan = p.copy()
    nan[1, 1] = np.nan
    with pytest.raises(ValueError, match="source"):
        call(name, labels=y, source_probs=nan)


def test_hyperparameter_errors():
    f, y, p = data()
    with pytest.raises(ValueError, match="alpha"):
        T.shrinkage_h_score(f, y, alpha=1.5)
    with pytest.raises(ValueError, match="eps"):
        T.transrate(f, y, eps=0)
    with pytest.raises(ValueError, match="variance"):
        T.nleep(f, y, variance=0)
    with pytest.raises(ValueError, match="labels"):
        T.logme(f, np.ones((len(y), 2)).astype(float) * np.nan, regression=True)
    with pytest.raises(ValueError, match="source_labels"):
        T.nce(np.arange(len(y) - 1), y)


def degenerate_cases():
    rng = np.random.default_rng(1)
    f_wide = rng.normal(size=(8, 40))  # n < d
    y_wide = np.array([0, 0, 1, 1, 2, 2, 2, 0])
    f_single = rng.normal(size=(20, 5))  # one sample in class 2
    y_single = np.array([0] * 10 + [1] * 9 + [2])
    f_dup = np.repeat(rng.normal(size=(6, 4)), 3, axis=0)  # duplicated rows
    y_dup = np.repeat([0, 1, 0, 1, 1, 0], 3)
    f_dead = rng.normal(size=(30, 6))
    f_dead[:, 2] = 3.0  # one constant (dead) feature
    y_dead = np.arange(30) % 2
    return {"n<d": (f_wide, y_wide), "singleton class": (f_single, y_single), "duplicated rows": (f_dup, y_dup),
            "dead feature": (f_dead, y_dead)}


@pytest.mark.parametrize("case", sorted(degenerate_cases()))
@pytest.mark.parametrize("name", sorted(T.SCORES))
def test_degenerate_but_valid_input_gives_finite_scores(case, name):
    f, y = degenerate_cases()[case]
    p = np.random.default_rng(2).dirichlet(np.ones(4), len(y))
    value = call(name, features=f, labels=y, source_probs=p)
    assert np.isfinite(value), (name, case, value)


def test_logme_is_finite_when_targets_are_outside_the_feature_span():
    f = np.zeros((10, 3))
    f[:, 0] = np.arange(10) - 4.5  # features orthogonal to the class split below
    y = np.array([0, 1] * 5)
    y_shift = np.where(np.arange(10) % 2 == 0, 0, 1)
    assert np.isfinite(T.logme(f, y)) and np.isfinite(T.logme(f, y_shift))


@pytest.mark.parametrize("metric", ["coral", "mmd", "cmd", "ot", "kld", "wd"])
def test_discrepancies_validate(metric):
    fn = T.DISCREPANCIES[metric].fn
    g = np.random.default_rng(0).normal(size=(12, 3))
    with pytest.raises(ValueError, match="same number of features"):
        fn(g, g[:, :2])
    with pytest.raises(ValueError, match="target"):
        fn(g, np.full((5, 3), np.nan))
    with pytest.raises(ValueError, match="source"):
        fn(g[:1], g)
    with pytest.raises(ValueError, match="reduce"):
        fn(g, g, reduce="tsne", q=2)
    with pytest.raises(ValueError, match="q"):
        fn(g, g, reduce="pca")


def test_cuda_tensors_stay_on_their_device():
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    f, y, p = data(200, 30, 4)
    ft, yt, pt = (torch.tensor(a).cuda() for a in (f, y, p))
    for name in ("logme", "h_score", "shrinkage_h_score", "transrate", "lfc", "rankme", "leep", "nce"):
        assert call(name, ft, yt, pt) == pytest.approx(call(name, f, y, p), rel=1e-7), name


def test_inputs_are_never_modified():
    f, y, p = data(30, 40, 3)  # n < d exercises the n×n routes
    ft, yt, pt = torch.tensor(f), torch.tensor(y), torch.tensor(p)
    for name in sorted(T.SCORES):
        call(name, ft, yt, pt)
    for metric in T.DISCREPANCIES.values():
        metric.fn(ft, ft * 2)
    assert torch.equal(ft, torch.tensor(f)) and torch.equal(yt, torch.tensor(y)) and torch.equal(pt, torch.tensor(p))
