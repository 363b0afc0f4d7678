"""SFDA, NCTI, ETran's energy score, k-NN and linear-probe accuracy against naive references.

Each reference below is written from the authors' public code's algorithm (numpy, loops, scipy, scikit-learn
estimators), independently of ``gate.transferability``:

- SFDA: TencentARC/SFDA ``metrics.py`` (``SFDA`` class, ``SFDA_Score``, ``_class_means``, ``_cov``) and
  ``utils.py`` (``iterative_A``) — including its generalised eigenproblem, which gate replaces by one solve;
- NCTI: BUserName/NCTI ``metrics.py`` (``NCTI_Score``) and ``evaluate_metric_group1_cpu.py`` (pool combination);
- ETran: mgholamikn/ETran ``metrics.py`` (``Energy_Score``) as ``evaluate_metric.py`` calls it;
- k-NN and linear probe: scikit-learn's ``cross_val_score`` on the same ``StratifiedKFold`` folds.
"""

import numpy as np
import pytest
import scipy.linalg
import torch
from sklearn.decomposition import PCA
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from gate import transferability as T


def make_data(n, d, c, seed=0, sep=1.0, scale=1.0):
    rng = np.random.default_rng(seed)
    y = np.concatenate([np.arange(c), rng.integers(0, c, n - c)])  # every class present
    rng.shuffle(y)
    f = rng.normal(size=(n, d)) + rng.normal(size=(c, d))[y] * sep
    return f * scale, y


def softmax(z):
    z = z - z.max(1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(1, keepdims=True)


# ----------------------------------------------------------------------------------------------------- SFDA
def naive_power_iteration(a, steps=3):
    """utils.iterative_A: three power steps from A·1, then xᵀ A y."""
    x = a.sum(axis=1)
    for _ in range(steps):
        t = a @ x
        y = t / np.linalg.norm(t)
        t = a @ y
        x = t / np.linalg.norm(t)
    return x @ a @ y


def naive_shrunk_cov(x, shrinkage):
    emp = np.cov(x.T, bias=1)
    d = emp.shape[0]
    return (1 - shrinkage) * emp + shrinkage * np.trace(emp) / d * np.eye(d)


def naive_fisher_fit_predict(x, y, shrinkage):
    """The SFDA class: class-weighted biased covariances, shrinkage, generalised eigenproblem, coef = M V Vᵀ."""
    classes = np.unique(y)
    n, d = x.shape
    priors = np.array([np.mean(y == c) for c in classes])
    means = np.array([x[y == c].mean(0) for c in classes])
    sw = np.zeros((d, d))
    for i, c in enumerate(classes):
        sw += priors[i] * np.atleast_2d(np.cov(x[y == c].T, bias=1))
    if shrinkage is None:
        shrinkage = max(np.exp(-5 * naive_power_iteration(sw)), 1e-10)
    st = naive_shrunk_cov(x, shrinkage)
    sw_shrunk = (1 - shrinkage) * sw + shrinkage * np.trace(sw) / d * np.eye(d)
    evals, evecs = scipy.linalg.eigh(st - sw_shrunk, sw_shrunk)
    evecs = evecs[:, np.argsort(evals)[::-1]]
    coef = means @ evecs @ evecs.T
    intercept = -0.5 * np.diag(means @ coef.T) + np.log(priors)
    return softmax(x @ coef.T + intercept), shrinkage


def naive_sfda(x, y, shrinkage=None):
    x = x.copy()  # the authors' ConfMix writes into its argument
    n, c = len(y), len(np.unique(y))
    prob, shrinkage = naive_fisher_fit_predict(x, y, shrinkage)
    prob = np.exp(prob) / np.exp(prob).sum(axis=1, keepdims=True)  # "soften"
    means = np.array([x[y == k].mean(0) for k in range(c)])
    outer = np.array([(means.sum(0) - means[k]) / (c - 1) for k in range(c)])
    for k in range(c):
        idx = np.where(y == k)[0]
        p = prob[idx, k][:, None]
        x[idx] = p * x[idx] + (1 - p) * outer[k]
    prob, _ = naive_fisher_fit_predict(x, y, shrinkage)
    return prob[np.arange(n), y].sum() / n


@pytest.mark.parametrize("n,d,c,scale", [(120, 20, 4, 1.0), (120, 20, 4, 3.0), (90, 12, 3, 0.2), (40, 60, 3, 0.3)],
                         ids=["adaptive", "floor-1e-10", "strong-shrinkage", "n<d"])
def test_sfda_equals_the_authors_algorithm(n, d, c, scale):
    f, y = make_data(n, d, c, seed=1, scale=scale)
    assert T.sfda(f, y) == pytest.approx(naive_sfda(f, y), rel=1e-9)
    assert T.sfda(f, y, shrinkage=0.3) == pytest.approx(naive_sfda(f, y, shrinkage=0.3), rel=1e-9)


def test_sfda_power_iteration_breakdown_uses_the_exact_eigenvalue():
    # Rows that sum to a constant (probabilities) give S_w·1 = 0: the authors' iteration starts from rounding
    # noise (0/0 = NaN when the noise is exactly zero); gate takes the largest eigenvalue instead.
    rng = np.random.default_rng(2)
    y = np.arange(90) % 3
    p = softmax(rng.normal(size=(90, 6)) + np.eye(6)[y * 2] * 2)
    x = p - np.array([p[y == k].mean(0) for k in range(3)])[y]
    sw = x.T @ x / len(y)
    assert np.linalg.norm(sw.sum(1)) < 1e-14 * np.linalg.norm(sw)
    expected = naive_sfda(p, y, shrinkage=max(np.exp(-5 * np.linalg.eigvalsh(sw)[-1]), 1e-10))
    assert T.sfda(p, y) == pytest.approx(expected, rel=1e-9)


def test_sfda_separation_invariances_and_errors():
    mixed, y = make_data(200, 16, 4, seed=3, sep=0.1)
    separable, _ = make_data(200, 16, 4, seed=3, sep=3.0)
    assert 0.0 <= T.sfda(mixed, y) < T.sfda(separable, y) <= 1.0
    base = T.sfda(separable, y)
    assert T.sfda(separable + 5.0, y) == pytest.approx(base, rel=1e-9)  # translation
    assert T.sfda(separable, np.array([2, 0, 3, 1])[y]) == pytest.approx(base, rel=1e-12)  # class ids
    for bad in (0, 1.5, "x"):
        with pytest.raises(ValueError, match="shrinkage") as err:
            T.sfda(separable, y, shrinkage=bad)
        assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="within-class"):
        T.sfda(np.repeat(np.eye(3), 4, axis=0), np.repeat([0, 1, 2], 4))  # every class a single point


# ----------------------------------------------------------------------------------------------------- NCTI
def naive_ncti_terms(x, y):
    """NCTI_Score, with PCA's exact solver (the code's default picks a randomised one on large inputs)."""
    c = len(np.unique(y))
    pca = PCA(n_components=64, svd_solver="full")
    x = pca.fit_transform(x, y)
    temp = max(np.exp(-pca.explained_variance_[:32].sum()), 1e-10)
    if temp == 1e-10:
        clf = LinearDiscriminantAnalysis(solver="svd")
    else:
        clf = LinearDiscriminantAnalysis(solver="eigen", shrinkage=float(temp))
    low = clf.fit_transform(x, y)
    low = low - low.mean(0, keepdims=True)
    seli = np.linalg.norm(low, ord="nuc")
    pred = clf.predict_proba(x)
    ncc = pred[np.arange(len(y)), y].sum() / len(y)
    vc = np.log(sum(np.linalg.norm(pred[y == k], ord="nuc") for k in range(c)))
    return seli, ncc, vc, temp


@pytest.mark.parametrize("scale,branch", [(1.0, "svd"), (0.35, "eigen"), (0.05, "eigen")])
def test_ncti_terms_equal_the_authors_algorithm(scale, branch):
    f, y = make_data(160, 80, 5, seed=4, scale=scale)
    seli, ncc, vc, temp = naive_ncti_terms(f, y)
    assert (temp == 1e-10) == (branch == "svd")
    terms = T.ncti_terms(f, y)
    assert terms.seli == pytest.approx(seli, rel=1e-8)
    assert terms.ncc == pytest.approx(ncc, rel=1e-8)
    assert terms.vc == pytest.approx(vc, rel=1e-8)
    assert (T.ncti_seli(f, y), T.ncti_ncc(f, y), T.ncti_collapse(f, y)) == (terms.seli, terms.ncc, -terms.vc)


def naive_ncti_pool(terms):
    """evaluate_metric_group1_cpu.py: min-max each term over the models, then mcscore + mascore - cpscore."""
    names = list(terms)
    alls, cls, comp = (np.array([terms[m][i] for m in names]) for i in range(3))
    return {m: (terms[m][1] - cls.min()) / (cls.max() - cls.min()) + (terms[m][0] - alls.min()) / (alls.max() - alls.min())
            - (terms[m][2] - comp.min()) / (comp.max() - comp.min()) for m in names}


def test_ncti_of_a_pool_equals_the_authors_combination_and_ranks_separation():
    _, y = make_data(150, 70, 4, seed=5)
    pool = {f"sep{s}": make_data(150, 70, 4, seed=5, sep=s)[0] for s in (0.05, 0.3, 1.0)}
    terms = {m: T.ncti_terms(f, y) for m, f in pool.items()}
    expected = naive_ncti_pool({m: (t.seli, t.ncc, t.vc) for m, t in terms.items()})
    got = T.ncti(terms)
    for m in pool:
        assert got[m] == pytest.approx(expected[m], rel=1e-12, abs=1e-12)
    recorded = {m: {"ncti_seli": t.seli, "ncti_ncc": t.ncc, "ncti_collapse": -t.vc} for m, t in terms.items()}
    assert T.ncti(recorded) == pytest.approx(got, abs=1e-12)  # from gate-score's records, same values
    assert got["sep0.05"] < got["sep0.3"] < got["sep1.0"]
    assert terms["sep0.05"].ncc < terms["sep1.0"].ncc and terms["sep0.05"].vc > terms["sep1.0"].vc
    assert T.ncti({"only": terms["sep1.0"]}) == {"only": 0.0}  # no spread: 0, not the code's NaN
    for bad in ({}, {"m": {"ncti_seli": 1.0}}):
        with pytest.raises(ValueError, match="pool") as err:
            T.ncti(bad)
        assert "\n" not in str(err.value)


def test_ncti_terms_invariant_to_rotation_translation_and_class_ids():
    f, y = make_data(120, 30, 4, seed=6, scale=0.4)
    q, _ = np.linalg.qr(np.random.default_rng(6).normal(size=(30, 30)))
    base = T.ncti_terms(f, y)
    for other in (T.ncti_terms(f @ q + 2.0, y), T.ncti_terms(f, np.array([3, 1, 0, 2])[y])):
        assert (other.seli, other.ncc, other.vc) == pytest.approx((base.seli, base.ncc, base.vc), rel=1e-8)


# ----------------------------------------------------------------------------------------------------- ETran
def naive_energy_score(logits, percent=0.5):
    """Energy_Score(logits, percent, tail='bot')."""
    energy = torch.logsumexp(torch.from_numpy(logits), dim=-1).numpy()
    chosen = list(np.argsort(energy)[0:int(percent * 10) * len(energy) // 1000])
    return energy[chosen].mean()


@pytest.mark.parametrize("n", [1000, 5000, 1999])
def test_etran_energy_equals_the_authors_code(n):
    f, _ = make_data(n, 32, 4, seed=7)
    assert T.etran_energy(f) == pytest.approx(naive_energy_score(f), rel=1e-12)
    assert T.etran_energy(f, fraction=1.0) == pytest.approx(np.mean(scipy.special.logsumexp(f, axis=1)), rel=1e-12)


def test_etran_energy_properties_and_errors():
    f, _ = make_data(300, 16, 3, seed=8)
    base = T.etran_energy(f)
    assert T.etran_energy(f + 1.5) == pytest.approx(base + 1.5, rel=1e-12)  # logsumexp(f + c) = logsumexp(f) + c
    rng = np.random.default_rng(8)
    assert T.etran_energy(f[rng.permutation(300)][:, rng.permutation(16)]) == pytest.approx(base, rel=1e-12)
    small = f[:50]  # the code's k = 5·50 // 1000 = 0 averages nothing (NaN); here the lowest sample
    assert T.etran_energy(small) == pytest.approx(scipy.special.logsumexp(small, axis=1).min(), rel=1e-12)
    for bad in (0, 1.5, "x"):
        with pytest.raises(ValueError, match="fraction") as err:
            T.etran_energy(f, fraction=bad)
        assert "\n" not in str(err.value)


# ----------------------------------------------------------------------------------------------------- probes
@pytest.mark.parametrize("metric", ["cosine", "euclidean"])
@pytest.mark.parametrize("k", [1, 20])
def test_knn_acc_equals_sklearn_cross_val_score(metric, k):
    f, y = make_data(200, 16, 4, seed=9, sep=0.5)
    cv = StratifiedKFold(n_splits=5, shuffle=True, random_state=3)
    with threadpool_limits(limits=1):  # tiny problems: threads only slow a busy machine down
        expected = cross_val_score(KNeighborsClassifier(n_neighbors=k, metric=metric), f, y, cv=cv).mean()
    assert T.knn_acc(f, y, k=k, metric=metric, random_state=3) == pytest.approx(expected, abs=1e-12)


def test_linear_probe_acc_equals_sklearn_cross_val_score():
    f, y = make_data(200, 24, 4, seed=10, sep=0.3)
    for c in (1.0, 0.01):
        cv = StratifiedKFold(n_splits=5, shuffle=True, random_state=4)
        probe = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=1000))
        with threadpool_limits(limits=1):
            expected = cross_val_score(probe, f, y, cv=cv).mean()
        assert T.linear_probe_acc(f, y, C=c, random_state=4) == pytest.approx(expected, abs=1e-12)


def test_probes_separation_invariances_determinism_and_errors():
    mixed, y = make_data(200, 12, 4, seed=11, sep=0.05)
    separable, _ = make_data(200, 12, 4, seed=11, sep=2.0)
    for probe in (T.knn_acc, T.linear_probe_acc):
        assert probe(mixed, y) < 0.5 < 0.95 < probe(separable, y)
        assert probe(mixed, y, random_state=7) == probe(mixed, y, random_state=7)  # seeded folds
    scales = np.random.default_rng(11).uniform(0.1, 10, size=(200, 1))
    assert T.knn_acc(mixed * scales, y) == pytest.approx(T.knn_acc(mixed, y), abs=1e-12)  # cosine: per-row scale
    affine = mixed * np.linspace(0.01, 100, 12) + 3.0
    assert T.linear_probe_acc(affine, y) == pytest.approx(T.linear_probe_acc(mixed, y), abs=1e-12)  # standardised
    # Tiny classes: folds lowered to the largest class (3 here) rather than refused.
    f, yy = mixed[:8], np.array([0, 0, 1, 1, 2, 2, 2, 0])
    assert 0.0 <= T.knn_acc(f, yy, k=3) <= 1.0
    # A fold whose training part holds one class predicts that class (scikit-learn's solver would refuse): the
    # folds here test {2, 3} (trained on class 0 alone: 1 of 2 right), {1} and {0} (separable: right).
    four = np.array([[5.0], [5.1], [4.9], [-5.0]])
    assert T.linear_probe_acc(four, np.array([0, 0, 0, 1])) == pytest.approx((0.5 + 1 + 1) / 3)
    cases = [(T.knn_acc, dict(k=0), "k"), (T.knn_acc, dict(metric="manhattan"), "metric"),
             (T.knn_acc, dict(n_splits=1), "n_splits"), (T.linear_probe_acc, dict(C=0), "C"),
             (T.linear_probe_acc, dict(max_iter=0), "max_iter"), (T.linear_probe_acc, dict(n_splits=2.5), "n_splits")]
    for fn, kw, name in cases:
        with pytest.raises(ValueError, match=name) as err:
            fn(mixed, y, **kw)
        assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="labels"):
        T.knn_acc(mixed[:3], np.array([0, 1, 2]))  # nothing to cross-validate


# ----------------------------------------------------------------------------------------------------- registry
def test_new_scores_are_registered_with_directions_and_citations():
    import gate.metrics

    new = {"sfda", "ncti_seli", "ncti_ncc", "ncti_collapse", "etran_energy", "knn_acc", "linear_probe_acc"}
    assert new <= set(T.SCORES)
    for name in new:
        m = T.SCORES[name]
        assert m.needs == "features" and m.higher_is_better and m.citation
        assert m.uses_labels is (name != "etran_energy")
    assert gate.metrics.higher_is_better("ncti") and gate.metrics.lookup("ncti").high == 2.0
    f, y = make_data(60, 8, 3, seed=12)
    assert T.SCORES["etran_energy"](features=f, labels=y) == T.etran_energy(f)
    assert T.SCORES["sfda"](features=torch.tensor(f), labels=torch.tensor(y)) == pytest.approx(T.sfda(f, y), rel=1e-12)
