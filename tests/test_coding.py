"""Hierarchical gradient coding: exact decoding under every allowed straggler pattern, the
load bound, the optimizer against exhaustive search, and bad parameters."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from edgesched.envs.coding import (
    UndecodableError,
    allowed_patterns,
    build_hgc,
    flat_gc_iteration_times,
    hgc_iteration_times,
    pai_stragglers,
    partition_sizes,
    shifted_exponential,
    uncoded_iteration_times,
)
from edgesched.envs.coding_opt import optimize_hgc

INSTANCES = [
    ((2, 3, 2), 1, 1),
    ((3, 3, 3), 1, 2),
    ((2, 2), 1, 1),
    ((4, 3, 2, 3), 2, 1),
    ((3,), 0, 2),
    ((2, 2, 2), 0, 0),
    ((1, 2, 3), 2, 0),
]


def _sub_gradients(code, g, rng):
    """Per edge, each partition's gradient cut into m_i random pieces that sum to it."""
    out = []
    for mi in code.m:
        x = rng.standard_normal((code.n, mi, g.shape[1]))
        x[:, -1] = g - x[:, :-1].sum(axis=1)
        out.append(x)
    return out


@pytest.mark.parametrize(("m", "s_e", "s_w"), INSTANCES)
def test_master_recovers_the_exact_sum_under_every_allowed_pattern(m, s_e, s_w):
    rng = np.random.default_rng(7)
    code = build_hgc(m, s_e, s_w, rng)
    g = rng.standard_normal((code.n, 6))
    messages = code.encode(_sub_gradients(code, g, rng))
    seen = []
    for edge_alive, worker_alive in allowed_patterns(code):
        out = code.decode(messages, edge_alive, worker_alive)
        np.testing.assert_allclose(out, g.sum(axis=0), rtol=1e-9, atol=1e-9)
        seen.append((tuple(edge_alive.tolist()), tuple(tuple(w.tolist()) for w in worker_alive)))
    # exactly every pattern within tolerance, each once (enumerated independently here)
    assert len(seen) == len(set(seen))
    assert set(seen) == _patterns_within(m, s_e, s_w)


def _patterns_within(m, s_e, s_w):
    """All (edge alive, workers alive per edge) with <= s_e dead edges, <= s_w dead workers
    in every edge (dead edges' workers included, as the decoder ignores them)."""
    edges = [e for e in itertools.product((True, False), repeat=len(m)) if e.count(False) <= s_e]
    workers = [
        [w for w in itertools.product((True, False), repeat=mi) if w.count(False) <= s_w]
        for mi in m
    ]
    return {(e, combo) for e in edges for combo in itertools.product(*workers)}


@pytest.mark.parametrize(("m", "s_e", "s_w"), [i for i in INSTANCES if i[1] + 1 < len(i[0])])
def test_too_many_straggling_edges_is_reported_not_decoded(m, s_e, s_w):
    rng = np.random.default_rng(3)
    code = build_hgc(m, s_e, s_w, rng)
    g = rng.standard_normal((code.n, 4))
    messages = code.encode(_sub_gradients(code, g, rng))
    alive = np.ones(code.n, bool)
    alive[: s_e + 1] = False
    with pytest.raises(UndecodableError, match="straggled"):
        code.decode(messages, alive, [np.ones(mi, bool) for mi in code.m])


def test_too_many_straggling_workers_is_reported():
    rng = np.random.default_rng(0)
    code = build_hgc((3, 3), 0, 1, rng)
    g = rng.standard_normal((2, 4))
    messages = code.encode(_sub_gradients(code, g, rng))
    workers = [np.array([True, False, False]), np.ones(3, bool)]
    with pytest.raises(UndecodableError, match="2 of 3 straggled"):
        code.decode(messages, np.ones(2, bool), workers)


# by hand: bound (s_e+1)(s_w+1)/M; worker load (s_w+1)/m_i x the data of its edge's s_e+1
# partitions (equal partitions here: each edge covers (s_e+1)/n of the data)
HAND_LOADS = [
    (((2, 2, 2), 0, 0), 1 / 6, [1 / 6, 1 / 6, 1 / 6], True),
    (((3, 3, 3), 1, 2), 2 / 3, [2 / 3, 2 / 3, 2 / 3], True),
    (((3,), 0, 2), 1.0, [1.0], True),
    # every edge covers all the data, so the 1-worker edge carries all of it
    (((1, 2, 3), 2, 0), 1 / 2, [1.0, 1 / 2, 1 / 3], False),
]


@pytest.mark.parametrize(("inst", "bound", "loads", "met"), HAND_LOADS)
def test_loads_and_bound_match_hand_computed_values(inst, bound, loads, met):
    code = build_hgc(*inst)
    assert code.bound == pytest.approx(bound)
    np.testing.assert_allclose(code.loads, loads)
    assert code.bound_met is met


@pytest.mark.parametrize(("m", "s_e", "s_w"), INSTANCES)
def test_loads_meet_the_tradeoff_bound_when_the_construction_allows(m, s_e, s_w):
    code = build_hgc(m, s_e, s_w)
    # the bound is a lower bound on the largest load for any scheme
    assert max(code.loads) >= code.bound * (1 - 1e-9)
    if code.bound_met:
        np.testing.assert_allclose(code.loads, code.bound)
    assert code.p.sum() == pytest.approx(1.0) and (code.p >= 0).all()
    # every data partition is covered by s_e + 1 edges, every sub-part of an edge's
    # partitions by s_w + 1 of its workers
    cover = np.bincount(np.concatenate([code.edge_partitions(i) for i in range(code.n)]))
    assert cover.tolist() == [s_e + 1] * code.n
    for i, mi in enumerate(m):
        sub = np.bincount(np.concatenate([code.worker_subparts(i, j) for j in range(mi)]))
        assert sub.tolist() == [s_w + 1] * mi


def test_equal_edges_always_meet_the_bound_and_some_uneven_ones_cannot():
    for n, mi, s_e in ((4, 3, 1), (6, 2, 2), (5, 4, 4)):
        assert build_hgc((mi,) * n, s_e, 1).bound_met
    # window sums over a 2-cycle cannot differ when both windows cover everything
    code = build_hgc((1, 5), 1, 0)
    assert not code.bound_met and max(code.loads) > code.bound
    p, exact = partition_sizes((1, 5), 1)
    assert not exact and p.sum() == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"m": (2, 2), "s_e": 2, "s_w": 0}, "s_e"),
        ({"m": (3, 1), "s_e": 0, "s_w": 1}, "s_w"),
        ({"m": (2, 0), "s_e": 0, "s_w": 0}, "empty edge"),
        ({"m": (), "s_e": 0, "s_w": 0}, "at least one edge"),
    ],
)
def test_bad_parameters_raise_clear_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        build_hgc(**kwargs)


def test_optimizer_never_worse_than_uncoded_and_greedy_matches_exhaustive():
    rng = np.random.default_rng(11)
    for trial in range(12):
        n = int(rng.integers(2, 5))
        m = tuple(int(x) for x in rng.integers(2, 5, size=n))
        total = sum(m)
        sev = float(rng.choice([0.3, 1.0, 3.0, 10.0]))
        draw = shifted_exponential(1.0, sev) if trial % 2 else pai_stragglers(sev)
        unit = draw(rng, (800, total))
        speed = rng.choice([0.5, 1.0, 2.0], size=total)
        greedy = optimize_hgc(m, unit, speed, method="greedy")
        exhaustive = optimize_hgc(m, unit, speed, method="exhaustive")
        uncoded = uncoded_iteration_times(m, unit, speed).mean()
        assert greedy.expected_time <= uncoded * (1 + 1e-12)
        assert exhaustive.expected_time <= greedy.expected_time * (1 + 1e-12)
        assert greedy.expected_time <= 1.05 * exhaustive.expected_time
        assert greedy.evaluations <= exhaustive.evaluations


def test_coding_pays_off_only_under_heavy_stragglers():
    rng = np.random.default_rng(5)
    m = (4, 4, 4, 4)
    light = shifted_exponential(1.0, 0.1)(rng, (4000, 16))
    heavy = shifted_exponential(1.0, 30.0)(rng, (4000, 16))
    assert optimize_hgc(m, light).s_w == 0  # no tail to cut: coding only adds load
    best = optimize_hgc(m, heavy)
    assert uncoded_iteration_times(m, heavy).mean() / best.expected_time > 2.0
    # the hierarchical code is at least as fast as flat coding with the same samples
    flat = min(flat_gc_iteration_times(m, s, heavy).mean() for s in range(16))
    assert best.expected_time <= flat * 1.02
    # iteration time of a fixed code is an order statistic of worker times
    t = hgc_iteration_times(m, 1, 1, heavy)
    assert t.shape == (4000,) and (t > 0).all()


def test_loads_below_the_bound_are_rejected():
    unit = np.ones((10, 6))
    with pytest.raises(ValueError, match="violate the bound"):
        hgc_iteration_times((3, 3), 1, 1, unit, loads=[0.3, 0.3])
    ok = hgc_iteration_times((3, 3), 1, 1, unit, loads=[4 / 6, 4 / 6])
    assert ok.shape == (10,)


# ------------------------------------------------------------------ per-edge tolerances
@pytest.mark.parametrize(("m", "s_e", "s_w"), [((2, 3), 1, (1, 2)), ((3, 1, 2), 1, (2, 0, 1))])
def test_per_edge_tolerances_decode_every_allowed_pattern(m, s_e, s_w):
    rng = np.random.default_rng(3)
    code = build_hgc(m, s_e, s_w, rng)
    assert code.s_w_edges == s_w and np.isnan(code.bound) and not code.bound_met
    # worker (i, j) computes s_w[i] + 1 of its edge's m_i sub-parts
    for i, mi in enumerate(m):
        assert code.loads[i] == pytest.approx(
            (s_w[i] + 1) / mi * code.p[code.edge_partitions(i)].sum()
        )
        assert len(code.worker_subparts(i, 0)) == s_w[i] + 1
    g = rng.standard_normal((code.n, 4))
    messages = code.encode(_sub_gradients(code, g, rng))
    seen = set()
    for edge_alive, worker_alive in allowed_patterns(code):
        out = code.decode(messages, edge_alive, worker_alive)
        np.testing.assert_allclose(out, g.sum(axis=0), rtol=1e-9, atol=1e-9)
        for i, w in enumerate(worker_alive):
            assert (~w).sum() <= s_w[i]
        seen.add((tuple(edge_alive.tolist()), tuple(tuple(w.tolist()) for w in worker_alive)))
    # one more straggler than an edge tolerates is reported, not decoded wrongly
    alive = [np.ones(mi, bool) for mi in m]
    i = int(np.argmax(np.array(s_w) < np.array(m) - 0))
    alive[i][: s_w[i] + 1] = False
    with pytest.raises(UndecodableError):
        code.decode(messages, np.ones(len(m), bool), alive)


def test_per_edge_tolerances_are_checked():
    with pytest.raises(ValueError, match=r"one tolerance per edge \(2 edges\)"):
        build_hgc((2, 3), 0, (1, 1, 1))
    with pytest.raises(ValueError, match=r"edge 0 has 2 workers; need 0 <= s_w\[i\] < m\[i\]"):
        build_hgc((2, 3), 0, (2, 1))


def test_jncss_on_the_uneven_cluster_matches_or_beats_flat_coding():
    """Uneven edges (2, 3, 5, 6): one tolerance for all stops at uncoded under heavy
    stragglers while flat coding gains; per-edge tolerances get at least flat's gain."""
    m = (2, 3, 5, 6)
    total = sum(m)
    for sev in (10.0, 30.0):
        rng = np.random.default_rng(0)
        draw = shifted_exponential(1.0, sev)
        unit = draw(rng, (1500, total))
        edge = 0.2 * draw(rng, (1500, len(m))) / total
        uncoded = uncoded_iteration_times(m, unit, edge_comm=edge).mean()
        flat = min(flat_gc_iteration_times(m, s, unit, edge_comm=edge).mean() for s in range(total))
        uniform = optimize_hgc(m, unit, edge_comm=edge)
        jn = optimize_hgc(m, unit, edge_comm=edge, method="jncss")
        assert jn.expected_time <= min(uncoded, uniform.expected_time) * (1 + 1e-12)
        assert jn.expected_time <= flat * (1 + 1e-9)
        assert isinstance(jn.s_w, tuple) and len(jn.s_w) == len(m)
        # the answer's time is that of the code it names
        # (without worker speeds both weightings give the construction's own loads)
        again = hgc_iteration_times(m, jn.s_e, jn.s_w, unit, edge_comm=edge).mean()
        assert again == pytest.approx(jn.expected_time)
    # full replication is flat coding with s = M - 1 exactly
    rep = hgc_iteration_times(m, len(m) - 1, tuple(x - 1 for x in m), unit, edge_comm=edge)
    np.testing.assert_allclose(rep, flat_gc_iteration_times(m, total - 1, unit, edge_comm=edge))


def test_jncss_scores_every_choice_where_they_are_few(monkeypatch):
    """Coordinate descent can stop short of the optimum on the uneven cluster under heavy
    (PAI-fitted) stragglers; ``jncss`` scores every per-edge choice there instead."""
    from edgesched.envs import coding_opt

    m = (2, 3, 5, 6)
    rng = np.random.default_rng(0)
    draw = pai_stragglers(10.0)
    unit = draw(rng, (2000, sum(m)))
    edge = 0.2 * draw(rng, (2000, len(m))) / sum(m)
    full = optimize_hgc(m, unit, edge_comm=edge, method="jncss")
    assert full.evaluations >= len(m) * int(np.prod(m))  # every per-edge choice scored
    monkeypatch.setattr(coding_opt, "JNCSS_EXHAUSTIVE_MAX", 0)
    descent = optimize_hgc(m, unit, edge_comm=edge, method="jncss")
    assert descent.evaluations < full.evaluations
    # the descent's answer is one of the choices the full search scored, and worse here
    assert descent.expected_time > full.expected_time
