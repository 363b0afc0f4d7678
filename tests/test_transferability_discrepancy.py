"""Source–target discrepancies against naive implementations of their formulas."""

import numpy as np
import pytest
import scipy.linalg as sl
import scipy.stats as ss
from scipy.optimize import linear_sum_assignment
from sklearn.decomposition import PCA
from sklearn.random_projection import GaussianRandomProjection

from gate import transferability as T


def sets(m=40, n=30, d=5, shift=0.5, seed=0):
    rng = np.random.default_rng(seed)
    g = rng.normal(size=(m, d)) * rng.uniform(0.5, 2, d) + rng.normal(size=d)
    f = rng.normal(size=(n, d)) * 1.3 + shift
    return g, f


def standardised(g, f):
    mu, sd = g.mean(0), g.std(0)
    return (g - mu) / sd, (f - mu) / sd


def test_coral_equals_naive():
    g, f = sets()
    gs, fs = standardised(g, f)
    d = g.shape[1]
    expected = np.sum((np.cov(gs, rowvar=False) - np.cov(fs, rowvar=False)) ** 2) / (4 * d * d)
    assert T.coral(g, f) == pytest.approx(expected, rel=1e-10)


def test_mmd_equals_naive_unbiased_estimator():
    g, f = sets(m=25, n=20, d=3)
    gs, fs = standardised(g, f)

    def k(a, b):
        d2 = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
        return sum(np.exp(-d2 / (2 * r * r)) for r in (1.0, 5.0, 10.0))

    m, n = len(gs), len(fs)
    kgg, kff = k(gs, gs), k(fs, fs)
    expected = ((kgg.sum() - np.trace(kgg)) / (m * (m - 1)) + (kff.sum() - np.trace(kff)) / (n * (n - 1))
                - 2 * k(gs, fs).mean())
    assert T.mmd(g, f) == pytest.approx(expected, rel=1e-9)
    assert T.mmd(g, f, chunk_size=7) == pytest.approx(expected, rel=1e-9)


def test_cmd_equals_naive():
    g, f = sets()
    gs, fs = standardised(g, f)
    expected = np.linalg.norm(gs.mean(0) - fs.mean(0)) + sum(
        np.linalg.norm(ss.moment(gs, k, axis=0) - ss.moment(fs, k, axis=0)) for k in range(2, 6))
    assert T.cmd(g, f) == pytest.approx(expected, rel=1e-10)


def test_ot_equals_assignment_cost():
    g, f = sets(m=30, n=30)
    gs, fs = standardised(g, f)
    cost = ((gs[:, None, :] - fs[None, :, :]) ** 2).sum(-1)
    rows, cols = linear_sum_assignment(cost)  # uniform weights, equal sizes: EMD = optimal assignment
    assert T.ot(g, f) == pytest.approx(cost[rows, cols].mean(), rel=1e-9)


def test_kld_and_wd_equal_gaussian_closed_forms():
    g, f = sets(m=200, n=150, d=4)
    gs, fs = standardised(g, f)
    mg, mf = gs.mean(0), fs.mean(0)
    cg, cf = np.cov(gs, rowvar=False), np.cov(fs, rowvar=False)
    d = g.shape[1]
    ig = np.linalg.inv(cg)
    kl = 0.5 * (np.trace(ig @ cf) + (mg - mf) @ ig @ (mg - mf) - d + np.linalg.slogdet(cg)[1]
                - np.linalg.slogdet(cf)[1])
    assert T.kld(g, f, ridge=0.0) == pytest.approx(kl, rel=1e-9)
    root = sl.sqrtm(cg).real
    w2 = np.sum((mg - mf) ** 2) + np.trace(cg + cf - 2 * sl.sqrtm(root @ cf @ root).real)
    assert T.wd(g, f) == pytest.approx(w2, rel=1e-8)


def test_reduction_fits_on_the_source():
    g, f = sets(m=60, n=50, d=8)
    gs, fs = standardised(g, f)
    pca = PCA(n_components=3, random_state=0).fit(gs)
    gp, fp = pca.transform(gs), pca.transform(fs)
    expected = np.sum((np.cov(gp, rowvar=False) - np.cov(fp, rowvar=False)) ** 2) / (4 * 9)
    assert T.coral(g, f, reduce="pca", q=3) == pytest.approx(expected, rel=1e-8)
    rp = GaussianRandomProjection(n_components=3, random_state=4).fit(gs)
    gr, fr = rp.transform(gs), rp.transform(fs)
    a, b = T.standardise(g, f, reduce="rp", q=3, seed=4)
    np.testing.assert_allclose(a.numpy(), gr, rtol=1e-10)
    np.testing.assert_allclose(b.numpy(), fr, rtol=1e-10)


@pytest.mark.parametrize("name", ["coral", "mmd", "cmd", "ot", "kld", "wd"])
def test_identical_sets_are_closest(name):
    fn = T.DISCREPANCIES[name].fn
    g, f = sets(m=40, n=40, shift=1.5)
    same = fn(g, g.copy())
    if name == "mmd":  # the unbiased estimator is slightly negative for identical samples
        assert same <= 0.0
    else:
        assert same == pytest.approx(0.0, abs=1e-7)
    assert fn(g, f) > same + 1e-3
