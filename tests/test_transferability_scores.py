"""Supervised transferability scores against naive implementations of their defining formulas.

Every reference here is written independently of ``gate.transferability``: explicit d×d / n×n matrices, Python
loops, scipy optimisers, scikit-learn estimators. Data include n < d.
"""

from collections import Counter

import numpy as np
import pytest
import scipy.optimize as so
import scipy.stats as ss
import torch
from sklearn.covariance import ledoit_wolf_shrinkage as sk_lw
from sklearn.decomposition import PCA
from sklearn.mixture import GaussianMixture
from threadpoolctl import threadpool_limits

from gate import transferability as T

SHAPES = [(120, 20, 4), (30, 80, 3)]  # (n, d, C): n > d and n < d


def make_data(n, d, c, seed=0, sep=1.0):
    rng = np.random.default_rng(seed)
    y = np.concatenate([np.arange(c), rng.integers(0, c, n - c)])  # every class present
    rng.shuffle(y)
    means = rng.normal(size=(c, d)) * sep
    f = rng.normal(size=(n, d)) + means[y]
    return f, y


def make_probs(n, z, seed=0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, z)) * 2
    p = np.exp(logits - logits.max(1, keepdims=True))
    return p / p.sum(1, keepdims=True)


# ----------------------------------------------------------------------------------------------------- LogME
def naive_evidence_eq2(f, y, log_alpha, log_beta):
    """You et al. 2021, Eq. 2, with explicit d×d matrices."""
    n, d = f.shape
    a, b = np.exp(log_alpha), np.exp(log_beta)
    A = a * np.eye(d) + b * f.T @ f
    m = b * np.linalg.solve(A, f.T @ y)
    return (n / 2 * np.log(b) + d / 2 * np.log(a) - n / 2 * np.log(2 * np.pi) - b / 2 * np.sum((f @ m - y) ** 2)
            - a / 2 * m @ m - 0.5 * np.linalg.slogdet(A)[1])


def naive_marginal_likelihood(f, y, log_a, sqrt_b):
    """log N(y; 0, b I + a F Fᵀ): the same evidence written as a Gaussian marginal likelihood (n×n)."""
    n = f.shape[0]
    cov = sqrt_b**2 * np.eye(n) + np.exp(log_a) * f @ f.T
    return ss.multivariate_normal(np.zeros(n), cov).logpdf(y)


def naive_logme(f, y_onehot):
    n, d = f.shape
    out = []
    for c in range(y_onehot.shape[1]):
        y = y_onehot[:, c]
        if n > d:
            res = so.minimize(lambda p, y=y: -naive_evidence_eq2(f, y, *p), x0=[0.0, 0.0], method="Nelder-Mead",
                              options=dict(xatol=1e-10, fatol=1e-13, maxiter=4000))
        else:  # the maximum may sit at β → ∞ (noise variance b → 0): optimise over b ≥ 0 directly
            res = so.minimize(lambda p, y=y: -naive_marginal_likelihood(f, y, *p), x0=[0.0, 0.5], method="Nelder-Mead",
                              options=dict(xatol=1e-12, fatol=1e-13, maxiter=4000))
        out.append(-res.fun / n)
    return float(np.mean(out))


@pytest.mark.parametrize("n,d,c", [(80, 12, 3), (25, 60, 3)])
def test_logme_equals_maximised_evidence(n, d, c):
    f, y = make_data(n, d, c, seed=1)
    expected = naive_logme(f, np.eye(c)[y])
    assert T.logme(f, y) == pytest.approx(expected, rel=1e-6)


def test_logme_n_less_than_d_keeps_the_log_alpha_term():
    # A thin-SVD implementation without the (d − k) log α term disagrees with the true evidence here.
    f, y = make_data(20, 200, 2, seed=3)
    expected = naive_logme(f, np.eye(2)[y])
    assert T.logme(f, y) == pytest.approx(expected, rel=1e-6)


def test_logme_regression_matches_classification_columns():
    f, y = make_data(90, 15, 3, seed=2)
    onehot = np.eye(3)[y]
    assert T.logme(f, onehot, regression=True) == pytest.approx(T.logme(f, y), rel=1e-12)
    per_col = T.logme_per_target(f, onehot[:, 1], regression=True)
    assert float(per_col[0]) == pytest.approx(float(T.logme_per_target(f, y)[1]), rel=1e-12)


def test_logme_decreases_with_label_noise_in_features():
    """The LogME paper's toy: well-separated class features, Gaussian noise of growing variance."""
    rng = np.random.default_rng(0)
    n, d, c = 300, 32, 4
    y = rng.integers(0, c, n)
    clean = np.eye(c)[y] @ rng.normal(size=(c, d)) * 5
    scores = [T.logme(clean + rng.normal(size=(n, d)) * s, y) for s in (0.1, 0.5, 1.0, 2.0, 4.0, 8.0)]
    assert all(a > b for a, b in zip(scores, scores[1:])), scores


def algorithm1_fixed_point(f, y, tol=1e-13, max_iter=20_000):
    """You et al. 2021, Algorithm 1 as printed (d×d eigendecomposition of FᵀF, α and β updated in turn), then
    Eq. 2 with log|A| over all d eigenvalues. Returns (L/n, converged)."""
    n, d = f.shape
    sigma, v = np.linalg.eigh(f.T @ f)
    sigma[sigma < sigma.max() * d * np.finfo(float).eps] = 0  # n < d: the d − n zero eigenvalues are exactly 0
    proj = v.T @ (f.T @ y)
    alpha, beta, converged = 1.0, 1.0, False
    for _ in range(max_iter):
        gamma = np.sum(beta * sigma / (alpha + beta * sigma))
        m = beta * (v @ (proj / (alpha + beta * sigma)))
        new_alpha, new_beta = gamma / (m @ m), (n - gamma) / np.sum((f @ m - y) ** 2)
        done = abs(new_alpha / new_beta - alpha / beta) <= tol * abs(alpha / beta)
        alpha, beta = new_alpha, new_beta
        if done:
            converged = True
            break
    m = beta * (v @ (proj / (alpha + beta * sigma)))
    evidence = (n / 2 * np.log(beta) + d / 2 * np.log(alpha) - n / 2 * np.log(2 * np.pi)
                - beta / 2 * np.sum((f @ m - y) ** 2) - alpha / 2 * (m @ m)
                - 0.5 * np.sum(np.log(alpha + beta * sigma)))
    return evidence / n, converged


@pytest.mark.parametrize("n,d,c,seed", [(80, 12, 3, 20), (300, 40, 5, 21), (150, 150, 4, 22), (60, 90, 3, 23),
                                        (50, 80, 3, 26), (90, 100, 3, 28)])
def test_logme_equals_algorithm1_fixed_point(n, d, c, seed):
    """Where Algorithm 1 converges (these inputs: every column, n > d and n < d), its fixed point and gate's
    direct maximisation give the same evidence."""
    f, y = make_data(n, d, c, seed=seed)
    onehot = np.eye(c)[y]
    per_col = T.logme_per_target(f, y).numpy()
    for k in range(c):
        expected, converged = algorithm1_fixed_point(f, onehot[:, k], max_iter=20_000)
        assert converged, k
        assert per_col[k] == pytest.approx(expected, rel=1e-10), k


def test_logme_beats_algorithm1_where_it_does_not_converge():
    f, y = make_data(40, 120, 4, seed=24)  # n < d, full row rank: the evidence keeps rising towards β → ∞
    per_col = T.logme_per_target(f, y).numpy()
    for k in range(4):
        capped, converged = algorithm1_fixed_point(f, np.eye(4)[y][:, k], max_iter=3000)
        assert not converged
        assert per_col[k] >= capped - 1e-12 * abs(capped)
        assert per_col[k] == pytest.approx(profile_evidence_max(f, np.eye(4)[y][:, k]), rel=1e-10)


def profile_evidence_max(f, y):
    """max over t = α/β of the evidence of one column, by dense grid + scipy's bounded Brent search, written from
    the marginal likelihood max_β log N(y; 0, β⁻¹(I + F Fᵀ / t)) with F Fᵀ = U diag(s) Uᵀ (n×n)."""
    n = f.shape[0]
    s, u = np.linalg.eigh(f @ f.T)
    s = np.clip(s, 0, None)
    z2 = (u.T @ y) ** 2

    def neg(log_t):
        w = 1.0 + s / np.exp(log_t)
        q = np.sum(z2 / w)
        return -(-n / 2 * np.log(2 * np.pi * q / n) - 0.5 * np.sum(np.log(w)) - n / 2) / n

    lo, hi = np.log(s.max() * 1e-15), np.log(s.max() * 1e15)
    grid = np.linspace(lo, hi, 2001)
    i = int(np.argmin([neg(g) for g in grid]))
    a, b = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    res = so.minimize_scalar(neg, bounds=(a, b), method="bounded", options=dict(xatol=1e-9))
    return -min(res.fun, neg(grid[i]))


def test_logme_n_less_than_d_converges_without_warning():
    """200 samples, 1024 features, 100 classes: Algorithm 1 spins to its iteration cap here (the maximum is at or
    near β → ∞); gate's maximisation converges, silently, to the maximum of the evidence."""
    import warnings

    f, y = make_data(200, 1024, 100, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        per_col = T.logme_per_target(f, y).numpy()
    onehot = np.eye(100)[y]
    for k in (0, 17, 42, 99):
        assert per_col[k] == pytest.approx(profile_evidence_max(f, onehot[:, k]), rel=1e-10, abs=1e-12), k


def test_logme_tol_and_max_iter_are_honoured():
    import warnings

    f, y = make_data(80, 12, 3, seed=1)
    with pytest.raises(ValueError, match="tol"):
        T.logme(f, y, tol=0)
    with pytest.raises(ValueError, match="max_iter"):
        T.logme(f, y, max_iter=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rough = T.logme(f, y, max_iter=1)  # one refinement step cannot reach tol=1e-10
    assert any(issubclass(w.category, RuntimeWarning) for w in caught)
    assert rough == pytest.approx(T.logme(f, y), rel=1e-3)  # grid + one Newton step: already close
    assert T.logme(f, y, tol=1e-4) == pytest.approx(T.logme(f, y), rel=1e-8)


# ----------------------------------------------------------------------------------------------------- LEEP / NCE
def naive_leep(probs, y):
    n, z = probs.shape
    classes = sorted(set(y.tolist()))
    joint = np.zeros((len(classes), z))
    for i in range(n):
        for zz in range(z):
            joint[classes.index(y[i]), zz] += probs[i, zz] / n
    cond = joint / joint.sum(0, keepdims=True)
    total = 0.0
    for i in range(n):
        total += np.log(sum(cond[classes.index(y[i]), zz] * probs[i, zz] for zz in range(z)))
    return total / n


def naive_nce(z, y):
    n = len(y)
    pair = Counter(zip(z.tolist(), y.tolist()))
    pz = Counter(z.tolist())
    return sum(cnt / n * np.log(cnt / pz[zz]) for (zz, _), cnt in pair.items())


def label_entropy(y):
    p = np.bincount(y) / len(y)
    p = p[p > 0]
    return -np.sum(p * np.log(p))


def test_leep_and_n_leep_equal_naive():
    probs = make_probs(60, 7, seed=4)
    _, y = make_data(60, 3, 4, seed=4)
    expected = naive_leep(probs, y)
    assert T.leep(probs, y) == pytest.approx(expected, rel=1e-12)
    assert T.n_leep(probs, y) == pytest.approx(1 + expected / label_entropy(y), rel=1e-12)


def test_leep_guards_zero_mass_source_classes():
    probs = np.zeros((40, 6))
    probs[:, :4] = make_probs(40, 4, seed=5)  # source classes 4 and 5 never predicted
    _, y = make_data(40, 3, 3, seed=5)
    value = T.leep(probs, y)
    assert np.isfinite(value)
    assert value == pytest.approx(naive_leep(probs[:, :4], y), rel=1e-12)


def test_nce_and_n_nce_equal_naive():
    rng = np.random.default_rng(6)
    y = rng.integers(0, 4, 200)
    z = (y + rng.integers(0, 3, 200)) % 6
    assert T.nce(z, y) == pytest.approx(naive_nce(z, y), rel=1e-12)
    assert T.n_nce(z, y) == pytest.approx(1 + naive_nce(z, y) / label_entropy(y), rel=1e-12)
    probs = np.eye(6)[z] * 0.7 + 0.3 / 6  # argmax is z
    assert T.nce(probs, y) == pytest.approx(naive_nce(z, y), rel=1e-12)


def test_leep_nonpositive_and_n_nce_in_unit_interval():
    rng = np.random.default_rng(7)
    for seed in range(20):
        n = int(rng.integers(5, 80))
        probs = make_probs(n, int(rng.integers(1, 9)), seed=seed)
        y = rng.integers(0, int(rng.integers(2, 6)), n)
        y[:2] = [0, 1]
        assert T.leep(probs, y) <= 1e-12
        z = rng.integers(0, int(rng.integers(1, 8)), n)
        assert 0.0 <= T.n_nce(z, y) <= 1.0
    y = np.repeat([0, 1, 2], 10)
    assert T.n_nce(y * 2, y) == pytest.approx(1.0)  # perfectly informative source labels
    assert T.nce(y * 2, y) == pytest.approx(0.0, abs=1e-12)


# ----------------------------------------------------------------------------------------------------- H-scores
def class_means(f, y):
    g = np.zeros_like(f)
    for c in np.unique(y):
        g[y == c] = f[y == c].mean(0)
    return g


def naive_h_score(f, y, rcond):
    cov_f = np.cov(f, rowvar=False)
    cov_g = np.cov(class_means(f, y), rowvar=False)
    return np.trace(np.linalg.pinv(cov_f, rcond=rcond) @ cov_g)


def naive_shrinkage_h_score(f, y, alpha=None):
    n, d = f.shape
    cov = np.cov(f, rowvar=False, bias=True)
    if alpha is None:
        alpha = sk_lw(f)
    sigma = np.trace(cov) / d
    cov_a = (1 - alpha) * cov + alpha * sigma * np.eye(d)
    cov_z = np.cov(class_means(f, y), rowvar=False, bias=True)
    return np.trace(np.linalg.inv(cov_a) @ ((1 - alpha) * cov_z))


@pytest.mark.parametrize("n,d,c", SHAPES)
def test_h_score_equals_naive(n, d, c):
    f, y = make_data(n, d, c, seed=8)
    assert T.h_score(f, y, rcond=1e-10) == pytest.approx(naive_h_score(f, y, 1e-10), rel=1e-8)
    if n <= d:  # the centred features span everything: the score degenerates to C − 1
        assert T.h_score(f, y) == pytest.approx(c - 1, rel=1e-8)


@pytest.mark.parametrize("n,d", [(21, 20), (20, 20), (22, 20)])
def test_h_score_degenerates_up_to_n_equal_d_plus_one(n, d):
    f, y = make_data(n, d, 3, seed=19)
    value = T.h_score(f, y)
    if n <= d + 1:  # the n − 1 centred rows span all of 1^⊥ (dimension n − 1 ≤ d)
        assert value == pytest.approx(2.0, rel=1e-8)
    else:
        assert value < 2.0 - 1e-6


@pytest.mark.parametrize("n,d,c", SHAPES + [(50, 1100, 3)])
def test_ledoit_wolf_equals_sklearn(n, d, c):
    f, _ = make_data(n, d, c, seed=9)
    assert T.ledoit_wolf_shrinkage(f) == pytest.approx(sk_lw(f), rel=1e-10)


@pytest.mark.parametrize("n,d,c", SHAPES)
@pytest.mark.parametrize("fast", [True, False, None])
def test_shrinkage_h_score_equals_naive(n, d, c, fast):
    f, y = make_data(n, d, c, seed=10)
    expected = naive_shrinkage_h_score(f, y)
    assert T.shrinkage_h_score(f, y, fast=fast) == pytest.approx(expected, rel=1e-8)
    assert T.shrinkage_h_score(f, y, alpha=0.3, fast=fast) == pytest.approx(naive_shrinkage_h_score(f, y, 0.3),
                                                                            rel=1e-8)


def test_shrinkage_alpha_zero_equals_h_score_for_large_n():
    f, y = make_data(2000, 10, 4, seed=11)
    assert T.shrinkage_h_score(f, y, alpha=0.0) == pytest.approx(T.h_score(f, y), rel=1e-10)
    assert T.shrinkage_h_score(f, y, alpha=1e-12) == pytest.approx(T.h_score(f, y), rel=1e-6)
    assert T.shrinkage_h_score(f, y, alpha=1.0) == 0.0


def test_fast_path_equals_naive_path_at_tiny_alpha():
    f, y = make_data(20, 300, 3, seed=12)
    a = T.shrinkage_h_score(f, y, alpha=1e-9, fast=True)
    b = T.shrinkage_h_score(f, y, alpha=1e-9, fast=False)
    assert a == pytest.approx(b, rel=1e-6) and np.isfinite(a)


# ----------------------------------------------------------------------------------------------------- N-LEEP
def test_nleep_equals_pca_gmm_leep():
    f, y = make_data(150, 20, 3, seed=13, sep=3.0)
    x = PCA(n_components=0.8, svd_solver="full").fit_transform(f)
    x = x / np.sqrt(np.mean(np.var(x, axis=0, ddof=1)))  # unit average variance (one common scale)
    with threadpool_limits(limits=1, user_api="blas"):  # tiny BLAS calls: threads only add overhead
        post = GaussianMixture(n_components=15, random_state=0).fit(x).predict_proba(x)
    expected = naive_leep(post / post.sum(1, keepdims=True), y)
    assert T.nleep(f, y) == pytest.approx(expected, rel=1e-6, abs=1e-9)
    assert T.n_nleep(f, y) == pytest.approx(1 + expected / label_entropy(y), rel=1e-6, abs=1e-9)
    assert T.nleep(f, y) <= 0.0


def test_nleep_does_not_depend_on_the_feature_scale():
    f, y = make_data(150, 20, 3, seed=13, sep=0.4)
    values = [T.nleep(f * s, y) for s in (1e-5, 1.0, 1e6)]  # before standardisation: −H(Y), −0.44, ValueError
    assert values[0] == pytest.approx(values[1], abs=1e-9) and values[2] == pytest.approx(values[1], abs=1e-9)
    assert -0.9 * label_entropy(y) < values[1] < -0.1  # non-trivial: neither the collapsed −H(Y) nor 0
    assert T.n_nleep(f * 1e-5, y) == pytest.approx(T.n_nleep(f, y), abs=1e-6)


# ----------------------------------------------------------------------------------------------------- TransRate / LFC / RankMe
def naive_coding_rate(z, eps):
    n, d = z.shape
    return 0.5 * np.linalg.slogdet(np.eye(d) + z.T @ z / (n * eps))[1]


def naive_transrate(f, y, eps=1e-4):
    z = f - f.mean(0)
    classes = np.unique(y)
    return naive_coding_rate(z, eps) - sum(naive_coding_rate(z[y == c], eps) for c in classes) / len(classes)


@pytest.mark.parametrize("n,d,c", SHAPES)
def test_transrate_equals_naive(n, d, c):
    f, y = make_data(n, d, c, seed=14)
    assert T.transrate(f, y) == pytest.approx(naive_transrate(f, y), rel=1e-9)
    assert T.transrate(f, y, eps=0.1) == pytest.approx(naive_transrate(f, y, 0.1), rel=1e-9)


@pytest.mark.parametrize("n,d,c", SHAPES)
def test_lfc_equals_naive(n, d, c):
    f, y = make_data(n, d, c, seed=15)
    theta = f @ f.T
    ymat = np.where(y[:, None] == y[None, :], 1.0, -1.0)
    h = np.eye(n) - np.ones((n, n)) / n
    a, b = h @ theta @ h, h @ ymat @ h
    expected = np.sum(a * b) / (np.linalg.norm(a) * np.linalg.norm(b))
    assert T.lfc(f, y) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("n,d,c", SHAPES)
def test_rankme_equals_naive(n, d, c):
    f, _ = make_data(n, d, c, seed=16)
    s = np.linalg.svd(f, compute_uv=False)
    p = s / s.sum() + 1e-7
    assert T.rankme(f) == pytest.approx(np.exp(-np.sum(p * np.log(p))), rel=1e-9)
    low_rank = f[:, :3] @ np.random.default_rng(0).normal(size=(3, d))
    assert T.rankme(low_rank) == pytest.approx(3.0, abs=0.5)


# ----------------------------------------------------------------------------------------------------- invariances
def test_logme_hscore_nce_invariant_to_class_permutation():
    f, y = make_data(100, 12, 4, seed=17)
    perm = np.array([2, 0, 3, 1])
    y2 = perm[y]
    assert T.logme(f, y2) == pytest.approx(T.logme(f, y), rel=1e-10)
    assert T.h_score(f, y2) == pytest.approx(T.h_score(f, y), rel=1e-10)
    assert T.shrinkage_h_score(f, y2) == pytest.approx(T.shrinkage_h_score(f, y), rel=1e-10)
    z = np.random.default_rng(0).integers(0, 5, 100)
    assert T.nce(z, y2) == pytest.approx(T.nce(z, y), rel=1e-12)
    assert T.nce(np.array([4, 1, 0, 3, 2])[z], y2) == pytest.approx(T.nce(z, y), rel=1e-12)
    # unused class ids do not matter either
    assert T.logme(f, y * 3) == pytest.approx(T.logme(f, y), rel=1e-12)


def test_torch_inputs_give_the_same_numbers():
    f, y = make_data(60, 10, 3, seed=18)
    probs = make_probs(60, 5, seed=18)
    ft, yt, pt = torch.tensor(f, dtype=torch.float32), torch.tensor(y), torch.tensor(probs, dtype=torch.float32)
    f32 = ft.double().numpy()
    for name, metric in T.SCORES.items():
        kw = dict(features=ft, labels=yt, source_probs=pt)
        kn = dict(features=f32, labels=y, source_probs=pt.double().numpy())
        assert metric(**kw) == pytest.approx(metric(**kn), rel=1e-9, abs=1e-12), name


def test_registry_reads_directions_and_citations_from_gate_metrics():
    import dataclasses

    import gate.metrics

    assert "higher_is_better" not in {f.name for f in dataclasses.fields(T.Metric)}
    for name, m in {**T.SCORES, **T.DISCREPANCIES}.items():
        assert m.higher_is_better is gate.metrics.higher_is_better(name)
        assert m.citation == gate.metrics.METRICS[name].citation
    with pytest.raises(KeyError, match="not in the registry"):
        _ = T.Metric("no_such_metric", T.logme).higher_is_better


def test_registry_directions():
    assert all(m.higher_is_better for m in T.SCORES.values())
    assert not any(m.higher_is_better for m in T.DISCREPANCIES.values())
    assert {"leep", "n_leep", "nce", "n_nce"} == {k for k, m in T.SCORES.items() if m.needs == "source_probs"}
    assert "leep" not in T.applicable_scores(has_source_probs=False)
    with pytest.raises(ValueError, match="unknown metric"):
        T.applicable_scores(True, ["logme", "nope"])
    with pytest.raises(ValueError, match="source"):
        T.applicable_scores(False, ["leep"])
