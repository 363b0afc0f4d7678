"""Task Priors: closed-form moments vs Monte Carlo, and the prefix sampler."""

import itertools

import numpy as np
import pytest
import torch

from gate import transferability as T


def features(n=30, d=6, seed=0):
    return np.random.default_rng(seed).normal(size=(n, d))


def naive_cosine_kernel(f):
    fn = f / np.linalg.norm(f, axis=1, keepdims=True)
    n = len(f)
    h = np.eye(n) - np.ones((n, n)) / n
    k = h @ fn @ fn.T @ h
    return k / np.linalg.norm(k)


def test_cosine_kernel_and_low_rank_factor():
    f = features()
    k = naive_cosine_kernel(f)
    np.testing.assert_allclose(T.cosine_kernel(f).numpy(), k, atol=1e-12)
    np.testing.assert_allclose(T.cosine_kernel(f, low_rank=True).dense().numpy(), k, atol=1e-12)


def test_moments_match_monte_carlo_within_4_standard_errors():
    n, temperature, draws = 25, 0.02, 20000
    k_eval = naive_cosine_kernel(features(n, seed=1))
    k_prior = naive_cosine_kernel(features(n, seed=2))
    moments = T.task_prior_moments(k_eval, k_prior, temperature)
    rng = np.random.default_rng(0)
    sigma = 1 / (1 + np.exp(-k_prior / temperature))
    values = np.empty(draws)
    for start in range(0, draws, 2000):  # G_ij ~ Bernoulli(σ_ij), all n² entries independent
        g = rng.random((2000, n, n)) < sigma
        values[start:start + 2000] = np.einsum("ij,bji->b", k_eval, g)  # tr(K_eval G)
    mc_mean, mc_var = values.mean(), values.var(ddof=1)
    assert abs(mc_mean - moments.mean) < 4 * np.sqrt(moments.var / draws)
    assert abs(mc_var - moments.var) < 4 * moments.var * np.sqrt(2 / (draws - 1))
    assert moments.std == pytest.approx(np.sqrt(moments.var))


def test_moments_formula_dense_lowrank_chunked_and_summed_priors():
    f1, f2, f3 = features(40, seed=3), features(40, 9, seed=4), features(40, 3, seed=5)
    k1, k2, k3 = (naive_cosine_kernel(f) for f in (f1, f2, f3))
    t = 0.1
    s = 1 / (1 + np.exp(-(k2 + k3) / t))
    expected = (np.sum(k1 * s), np.sum(k1**2 * s * (1 - s)))
    dense = T.task_prior_moments(k1, [k2, k3], temperature=t)
    low = T.task_prior_moments(T.cosine_kernel(f1, low_rank=True),
                               [T.cosine_kernel(f2, low_rank=True), T.cosine_kernel(f3, low_rank=True)],
                               temperature=t, chunk_size=7)
    for m in (dense, low):
        assert m.mean == pytest.approx(expected[0], rel=1e-10)
        assert m.var == pytest.approx(expected[1], rel=1e-10)
    kt = torch.tensor(k1)
    T.task_prior_moments(kt, temperature=t, chunk_size=5)
    assert torch.equal(kt, torch.tensor(k1))  # inputs are never modified
    own = T.task_prior_moments(k1, temperature=t)  # K_prior=None: the model's own kernel
    s1 = 1 / (1 + np.exp(-k1 / t))
    assert own.mean == pytest.approx(np.sum(k1 * s1), rel=1e-10)


def test_moment_validation():
    k = naive_cosine_kernel(features(10))
    with pytest.raises(ValueError, match="K_eval"):
        T.task_prior_moments(np.ones((3, 4)))
    with pytest.raises(ValueError, match="K_prior"):
        T.task_prior_moments(k, naive_cosine_kernel(features(11)))
    with pytest.raises(ValueError, match="temperature"):
        T.task_prior_moments(k, temperature=0)
    with pytest.raises(ValueError, match="symmetric"):
        T.task_prior_moments(np.triu(np.ones((5, 5))))


def clustered(n_per=25, q=4, d=8, seed=0):
    rng = np.random.default_rng(seed)
    centres = np.eye(q, d) * 5  # after centring, different clusters have negative cosine similarity
    y = np.repeat(np.arange(q), n_per)
    return centres[y] + rng.normal(size=(len(y), d)) * 0.3, y


def test_sampler_low_temperature_recovers_clusters_with_every_class_present():
    # Kernel entries are O(1/n) (Frobenius-normalised), so "low" temperature means T ≪ 1/n.
    f, y = clustered()
    labels = T.sample_tasks(f, num_classes=4, num_tasks=16, temperature=1e-4, seed=0)
    assert labels.shape == (16, len(y)) and labels.dtype == torch.int64
    assert int(labels.min()) >= 0 and int(labels.max()) <= 3
    for task in labels.numpy():
        assert len(np.unique(task)) == 4
        # same cluster ⇒ same label: the labeling is a relabelling of the clusters
        assert all(len(np.unique(task[y == c])) == 1 for c in range(4))


def test_sampler_is_reproducible_and_seed_dependent():
    f, _ = clustered(seed=1)
    a = T.sample_tasks(f, 3, num_tasks=5, temperature=0.5, seed=7)
    b = T.sample_tasks(f, 3, num_tasks=5, temperature=0.5, seed=7)
    c = T.sample_tasks(f, 3, num_tasks=5, temperature=0.5, seed=8)
    assert torch.equal(a, b) and not torch.equal(a, c)
    low = T.sample_tasks(T.cosine_kernel(f, low_rank=True), 3, num_tasks=2, temperature=0.5, seed=7, rank=2)
    assert low.shape == (2, len(f))


def test_sampler_follows_the_prefix_process_distribution():
    """n = 3, q = 2: exact labeling probabilities of the prefix process vs empirical frequencies."""
    f = np.array([[1.0, 0.2], [0.9, 0.1], [-0.3, 1.0]])
    kernel = T.cosine_kernel(f, low_rank=True)
    k = kernel.dense().numpy()
    beta, q, n = 1 / 0.05, 2, 3
    exact = {}
    for labels in itertools.product(range(q), repeat=n):
        total = 0.0
        for order in itertools.permutations(range(n)):
            p, done = 1.0, []
            for i in order:
                logits = np.array([beta * sum(k[i, j] for j in done if labels[j] == c) for c in range(q)])
                w = np.exp(logits - logits.max())
                p *= w[labels[i]] / w.sum()
                done.append(i)
            total += p / 6
        exact[labels] = total
    draws = 40000
    sampled = T.sample_tasks(kernel, q, num_tasks=draws, temperature=0.05, seed=3).numpy()
    counts = {lab: 0 for lab in exact}
    for row in map(tuple, sampled):
        counts[row] += 1
    for lab, p in exact.items():
        se = np.sqrt(p * (1 - p) / draws)
        assert abs(counts[lab] / draws - p) < 4 * se + 1e-4, (lab, counts[lab] / draws, p)


def test_sampler_validation():
    f, _ = clustered()
    with pytest.raises(ValueError, match="num_classes"):
        T.sample_tasks(f, 1)
    with pytest.raises(ValueError, match="num_tasks"):
        T.sample_tasks(f, 2, num_tasks=0)
    with pytest.raises(ValueError, match="temperature"):
        T.sample_tasks(f, 2, temperature=-1)
