"""Source–target discrepancies against naive implementations of the definitions of Ibrahim, Ponomareva & Mazumder,
"Newer is not always better", ECML-PKDD 2022, supplement S3.2 (Eq. S22–S26), on source-standardised features."""

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
    expected = np.sum((np.cov(fs, rowvar=False) - np.cov(gs, rowvar=False)) ** 2) / d**2  # S22: 1/d², not 1/(4d²)
    assert T.coral(g, f) == pytest.approx(expected, rel=1e-10)


def naive_mmd2_v_statistic(gs, fs, radii=(1.0, 5.0, 10.0)):
    """S23: means over all pairs (i = j included) of κ(a, b) = Σ_r exp(−‖a − b‖² / (2r))."""
    def kappa(a, b):
        return sum(np.exp(-np.sum((a - b) ** 2) / (2 * r)) for r in radii)

    def mean_kernel(xs, ys):
        return np.mean([[kappa(x, y) for y in ys] for x in xs])

    return mean_kernel(gs, gs) + mean_kernel(fs, fs) - 2 * mean_kernel(gs, fs)


def test_mmd_equals_naive_v_statistic():
    g, f = sets(m=25, n=20, d=3)
    gs, fs = standardised(g, f)
    expected = naive_mmd2_v_statistic(gs, fs)
    assert T.mmd(g, f) == pytest.approx(expected, rel=1e-9)
    assert T.mmd(g, f, chunk_size=7) == pytest.approx(expected, rel=1e-9)
    # a sum of kernels or a sum of single-kernel MMD²'s: the same number
    per_radius = sum(naive_mmd2_v_statistic(gs, fs, (r,)) for r in (1.0, 5.0, 10.0))
    assert T.mmd(g, f) == pytest.approx(per_radius, rel=1e-9)
    assert T.mmd(g, f, bandwidths=(5.0,)) == pytest.approx(naive_mmd2_v_statistic(gs, fs, (5.0,)), rel=1e-9)


def test_cmd_equals_naive():
    g, f = sets()
    gs, fs = standardised(g, f)
    both = np.concatenate([gs, fs])
    span = both.max() - both.min()  # |b − a|: the box [a, b]^d that holds both standardised sets
    expected = np.linalg.norm(gs.mean(0) - fs.mean(0)) / span + sum(
        np.linalg.norm(ss.moment(gs, k, axis=0) - ss.moment(fs, k, axis=0)) / span**k for k in range(2, 6))
    assert T.cmd(g, f) == pytest.approx(expected, rel=1e-10)


def test_ot_equals_assignment_cost():
    g, f = sets(m=30, n=30)
    gs, fs = standardised(g, f)
    cost = np.sqrt(((gs[:, None, :] - fs[None, :, :]) ** 2).sum(-1))  # S25: Euclidean, not squared
    rows, cols = linear_sum_assignment(cost)  # uniform weights, equal sizes: EMD = optimal assignment
    assert T.ot(g, f) == pytest.approx(cost[rows, cols].mean(), rel=1e-9)


def test_kld_and_wd_equal_gaussian_closed_forms():
    g, f = sets(m=200, n=150, d=4)
    gs, fs = standardised(g, f)
    mg, mf = gs.mean(0), fs.mean(0)
    cg, cf = np.cov(gs, rowvar=False), np.cov(fs, rowvar=False)
    d = g.shape[1]
    # KL(source ‖ target) = KL(N(mg, cg) ‖ N(mf, cf))
    inv_f = np.linalg.inv(cf)
    kl = 0.5 * (np.trace(inv_f @ cg) + (mf - mg) @ inv_f @ (mf - mg) - d + np.linalg.slogdet(cf)[1]
                - np.linalg.slogdet(cg)[1])
    assert T.kld(g, f, ridge=0.0) == pytest.approx(kl, rel=1e-9)
    # the direction matters: the reverse divergence is a different number here
    kl_reverse = 0.5 * (np.trace(np.linalg.inv(cg) @ cf) + (mg - mf) @ np.linalg.inv(cg) @ (mg - mf) - d
                        + np.linalg.slogdet(cg)[1] - np.linalg.slogdet(cf)[1])
    assert abs(kl - kl_reverse) > 1e-3 * kl
    # the 2-Wasserstein distance itself (not squared), with both matrix square roots
    root = sl.sqrtm(cg).real
    w2_squared = np.sum((mg - mf) ** 2) + np.trace(cg + cf - 2 * sl.sqrtm(root @ cf @ root).real)
    assert T.wd(g, f) == pytest.approx(np.sqrt(w2_squared), rel=1e-8)


def test_reduction_fits_on_the_source():
    g, f = sets(m=60, n=50, d=8)
    gs, fs = standardised(g, f)
    pca = PCA(n_components=3, random_state=0).fit(gs)
    gp, fp = pca.transform(gs), pca.transform(fs)
    expected = np.sum((np.cov(gp, rowvar=False) - np.cov(fp, rowvar=False)) ** 2) / 9
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
    assert same == pytest.approx(0.0, abs=1e-7)  # the V-statistic MMD² is exactly 0 for identical sets
    assert fn(g, f) > same + 1e-3


@pytest.mark.parametrize("name", ["coral", "mmd", "cmd", "ot", "kld", "wd"])
def test_discrepancies_are_non_negative_and_grow_with_the_shift(name):
    fn = T.DISCREPANCIES[name].fn
    values = [fn(*sets(m=40, n=40, shift=s, seed=1)) for s in (0.0, 1.0, 3.0)]
    assert all(v >= 0 for v in values)
    if name == "coral":  # covariances only: blind to a shift of the mean
        assert values[0] == pytest.approx(values[2], rel=1e-12)
    else:
        assert values[0] < values[1] < values[2]
