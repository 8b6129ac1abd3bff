"""The compiled node rule (``envs/node_kernel.py``) against its plain-Python reference.

``sharing.node_outcome`` is the readable form of what an overloaded node does under
``collision_mode='measured'``; the simulator runs ``node_kernel``'s compiled form. These
tests hold the two equal bit for bit (so the committed records and trajectory hashes do
not depend on which form ran), check numpy's summation and interpolation orders are
reproduced, that a slot's first pass writes nothing when a job must crash, that an old
pickle resumes, and that the on-disk compile cache reloads in a fresh process.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import edgesched
from edgesched.envs.colocation import colocation_table, kernel_tables, load_colocation
from edgesched.envs.kernel_math import interp1, np_sum
from edgesched.envs.node_kernel import evaluate_nodes, node_rule
from edgesched.envs.sharing import GPU_EPS, node_outcome

#: every model of the committed measured table
MODELS = tuple(load_colocation()["models"])


@pytest.fixture(scope="module")
def tables():
    tab = colocation_table(MODELS)
    return tab, kernel_tables(tab)


def _reference(tab, cls, cap, models, alloc, share, cpu_weight=1.0, in_pair=False):
    """``sharing.node_outcome`` on GPU class ``cls`` (-1: unmeasured)."""
    measured = cls >= 0
    return node_outcome(
        tab,
        tab.pair[cls].tolist() if measured else None,
        tab.fail[cls].tolist() if measured else None,
        cap,
        models,
        alloc,
        share,
        cpu_weight,
        in_pair,
    )


def _compiled(k, cls, cap, models, alloc, share, cpu_weight=1.0, in_pair=False):
    """``node_kernel.node_rule`` with fresh scratch, in the reference's output form."""
    n, gpus = len(models), max(int(np.rint(cap[1])), 1)
    rate, shared = np.empty(n), np.empty(n, dtype=bool)
    crash = np.empty(n, dtype=np.int64)
    n_crash, n_mem, starved = node_rule(
        cls, cap, models, alloc, tuple(k), share, cpu_weight, in_pair, rate, shared, crash,
        np.empty(n, dtype=bool), np.empty(n, dtype=bool),
        np.empty((gpus, n), dtype=np.int64), np.zeros(gpus, dtype=np.int64),
        np.empty((gpus, n), dtype=np.int64), np.zeros(gpus, dtype=np.int64),
    )  # fmt: skip
    # the memory crashes come first: the newest workers past the node's memory
    over = np.cumsum(alloc[:, 2]) > cap[2] + GPU_EPS
    assert crash[:n_mem].tolist() == np.flatnonzero(over)[::-1].tolist()
    return crash[:n_crash].tolist(), rate.tolist(), shared.tolist(), bool(starved)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=0, max_size=300))
def test_np_sum_is_numpys_sum_bit_for_bit(x):
    a = np.asarray(x, dtype=np.float64)
    assert np_sum(a) == float(np.sum(a))


@pytest.mark.parametrize("n", [127, 128, 129, 255, 256, 1000, 4099, 100_003])
def test_np_sum_splits_long_runs_as_numpy_does(n):
    a = np.random.default_rng(n).random(n) * 10.0 ** np.random.default_rng(1).uniform(-3, 6, n)
    assert np_sum(a) == float(np.sum(a))


@settings(max_examples=300, deadline=None)
@given(
    xs=st.lists(st.floats(0.0, 20.0), min_size=2, max_size=10, unique=True),
    ys=st.lists(st.floats(0.0, 3.0), min_size=10, max_size=10),
    x=st.floats(-1.0, 25.0),
    dup=st.booleans(),
)
def test_interp1_is_numpys_interp_bit_for_bit(xs, ys, x, dup):
    xp = np.sort(np.asarray(xs))
    if dup:  # a repeated point, as a measured curve may hold
        xp = np.sort(np.append(xp[:-1], xp[0]))
    fp = np.asarray(ys[: len(xp)])
    for v in (x, float(xp[0]), float(xp[-1]), float(xp[len(xp) // 2])):
        assert interp1(v, xp, fp, len(xp)) == float(np.interp(v, xp, fp))


def test_interp1_reads_only_the_curves_points(tables):
    tab, k = tables
    for m in range(len(tab.cpu_x)):
        for v in np.linspace(0.0, 12.0, 97):
            got = interp1(float(v), k.cpu_x[m], k.cpu_y[m], int(k.cpu_n[m]))
            assert got == float(tab.cpu_rate(m, float(v)))


workers = st.lists(
    st.tuples(
        st.integers(0, len(MODELS) - 1),
        st.integers(0, 12),  # cores
        st.sampled_from([0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0]),  # GPUs
        st.integers(1, 40),  # memory
    ),
    min_size=1,
    max_size=9,
)


@settings(max_examples=400, deadline=None)
@given(
    ws=workers,
    cls=st.integers(-1, 2),
    cap=st.tuples(st.integers(1, 32), st.integers(0, 4), st.integers(8, 96)),
    share=st.sampled_from([0.5, 1.0]),
    cpu_weight=st.sampled_from([0.0, 1.0, 2.0]),
    in_pair=st.booleans(),
)
def test_node_rule_equals_the_reference(tables, ws, cls, cap, share, cpu_weight, in_pair):
    tab, k = tables
    models = np.array([w[0] for w in ws], dtype=np.int64)
    alloc = np.array([[w[1], w[2], w[3]] for w in ws], dtype=np.float64)
    capa = np.array(cap, dtype=np.float64)
    want = _reference(tab, cls, capa, models, alloc, share, cpu_weight, in_pair)
    assert _compiled(k, cls, capa, models, alloc, share, cpu_weight, in_pair) == want


def test_cpu_starvation_weight_is_the_cpu_factors_exponent(tables):
    """One worker per GPU, cores oversubscribed 2x: each runs at factor ** weight."""
    tab, k = tables
    m = MODELS.index("cifar10")  # ResNet-18: strongly CPU-bound (Synergy)
    cap = np.array([4.0, 2.0, 64.0])
    models = np.array([m, m], dtype=np.int64)
    alloc = np.array([[4.0, 1.0, 8.0], [4.0, 1.0, 8.0]])  # 8 cores held on 4
    factor = float(tab.cpu_rate(m, 2.0)) / float(tab.cpu_rate(m, 4.0))
    assert 0.0 < factor < 1.0
    for w in (0.0, 1.0, 2.0):
        crash, rate, shared, starved = _compiled(k, 2, cap, models, alloc, 1.0, w)
        assert starved and not crash and not any(shared)
        np.testing.assert_allclose(rate, [factor**w] * 2, rtol=1e-12)
        assert (crash, rate, shared, starved) == _reference(tab, 2, cap, models, alloc, 1.0, w)


def test_node_rule_covers_the_failing_pair_and_memory_cases(tables):
    """The reference's branches, by construction (hypothesis may miss the rare ones)."""
    tab, k = tables
    k80 = tab.classes.index("k80")
    imagenet = MODELS.index("imagenet")
    assert tab.fail[k80, imagenet, imagenet]
    cifar10 = MODELS.index("cifar10")
    three = [imagenet, imagenet, cifar10]  # on one GPU: a failing pair and a newer third
    cases = [
        # three imagenet workers on 2 GPUs of a k80 node: GPU 0 holds workers 0 and 2, a
        # failing pair, so the newest (2) crashes
        (k80, (16, 2, 64), [imagenet] * 3, [[2, 1, 4]] * 3, [2], False, False),
        # memory over capacity (4 + 4 + 4 > 10) crashes the newest first
        (k80, (16, 2, 10), [0, 1, 2], [[2, 1, 4]] * 3, [2], False, False),
        # cores oversubscribed (9 > 4) on an unmeasured board with fractional GPUs
        (-1, (4, 1, 64), [0, 2, 0], [[3, 0.5, 4], [3, 0.5, 4], [3, 1, 4]], [], True, False),
        # newest: the cifar10 worker outside the failing pair crashes, then the pair's newer
        (k80, (16, 1, 64), three, [[2, 1, 4]] * 3, [2, 1], False, False),
        # in_pair: only the pair's newer one
        (k80, (16, 1, 64), three, [[2, 1, 4]] * 3, [1], False, True),
    ]
    for cls, cap, m, a, crash, starved, in_pair in cases:
        models, alloc, capa = np.array(m), np.array(a, dtype=float), np.array(cap, float)
        want = _reference(tab, cls, capa, models, alloc, 1.0, in_pair=in_pair)
        assert (want[0], want[3]) == (crash, starved)
        assert _compiled(k, cls, capa, models, alloc, 1.0, in_pair=in_pair) == want


def _busy_sim(scenario: str = "edge50-highload", steps: int = 120):
    sim = edgesched.make_batched(scenario, 1)
    sim.reset(seeds=[4])
    rng = np.random.default_rng(2)
    for _ in range(steps):
        act = (rng.random(sim.mask.shape) * sim.mask).argmax(axis=1)
        sim.step(act.reshape(1, -1))
    return sim


def test_first_pass_writes_nothing_when_a_job_must_crash():
    """Crashes are decided on the placements as they stand; the survivors' rates come in a
    second pass. A first pass that finds a crash must leave every rate and flag as it was;
    the second writes and names the node for a re-check."""
    sim = _busy_sim()
    j = int(sim.running[0])
    n = int(sim.w_node[j, 0])
    # the job's first worker now holds twice its node's memory: its job must crash
    extra = float(sim.capacity[n, 2]) * 2 - sim.w_alloc[j, 0, 2]
    sim.w_alloc[j, 0, 2] += extra
    sim.used[n, 2] += extra  # over capacity: the node is not calm
    sim.w_rate[:] = 0.5  # a value no evaluation writes, so any write shows
    slowed = sim._node_slowed.copy()
    dirty = np.zeros(sim.num_agents, dtype=bool)
    dirty[n] = True
    crashed, memory, recheck = evaluate_nodes(dirty, True, sim.running, sim._kernel_state())
    assert j in crashed.tolist() and recheck.tolist() == [n]
    assert memory[crashed == j].all()  # its worker broke the node's memory
    assert (sim.w_rate == 0.5).all()
    np.testing.assert_array_equal(sim._node_slowed, slowed)
    crashed, _, recheck = evaluate_nodes(dirty, False, sim.running, sim._kernel_state())
    assert len(crashed) == 0 and recheck.tolist() == [n]
    assert (sim.w_rate[sim.w_node == n] != 0.5).all()


def test_evaluate_nodes_equals_the_reference_node_by_node():
    """Every dirty node's stored rates after one pass are the reference's, in placement
    order; nodes not dirty keep what they held."""
    sim = _busy_sim("edge50", 200)
    dirty = np.zeros(sim.num_agents, dtype=bool)
    dirty[::2] = True
    held = sim.w_rate.copy()
    crashed, _, _ = evaluate_nodes(dirty, False, sim.running, sim._kernel_state())
    assert len(crashed) == 0
    checked = 0
    for n in range(sim.num_agents):
        r, w = np.nonzero(sim.w_node[sim.running] == n)
        if not len(r):
            continue
        jobs = sim.running[r]
        order = np.argsort(sim.w_seq[jobs, w], kind="stable")
        jobs, w = jobs[order], w[order]
        if not dirty[n]:
            np.testing.assert_array_equal(sim.w_rate[jobs, w], held[jobs, w])
            continue
        _, rate, shared, starved = sim._node_outcome(n, sim.j_model[jobs], sim.w_alloc[jobs, w])
        calm = (sim.used[n] <= sim.capacity[n] + 1e-9).all()
        if calm:  # within capacity, whole GPUs: rate 1 (written only if it was slowed)
            assert (sim.w_rate[jobs, w] == 1.0).all() or not sim._node_slowed[n]
            continue
        assert sim.w_rate[jobs, w].tolist() == rate
        assert sim.w_gshared[jobs, w].tolist() == shared
        assert (sim.w_starved[jobs, w] == starved).all()
        checked += 1
    assert checked > 3


def test_a_simulator_pickled_before_the_compiled_rule_resumes_identically():
    """Checkpoints hold pickled simulators; one from before the compiled rule carries the
    memo and list tables instead of ``_coloc_k`` and must continue exactly."""
    sim = _busy_sim("edge50-highload", 60)
    state = pickle.loads(pickle.dumps(sim)).__dict__
    old = dict(state)
    old.pop("_coloc_k")
    old.update(_coloc_memo={}, _pair_l=[], _fail_l=[], _pick_ext=np.zeros(3, dtype=bool))
    # the old cache held the job ids of shared and starved workers, not per-copy counts
    run = old["running"]
    old["_slow_cache"] = (run, old["_rates_gen"], run, run, None)
    resumed = type(sim).__new__(type(sim))
    resumed.__setstate__(old)
    assert "_coloc_memo" not in resumed.__dict__
    twin = pickle.loads(pickle.dumps(sim))
    rng = np.random.default_rng(9)
    for _ in range(80):
        act = (rng.random(twin.mask.shape) * twin.mask).argmax(axis=1).reshape(1, -1)
        a, b = twin.step(act)[0], resumed.step(act)[0]
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(twin.w_rate, resumed.w_rate)
    np.testing.assert_array_equal(twin.progress, resumed.progress)
    np.testing.assert_equal(twin.episode_metrics(0), resumed.episode_metrics(0))


def test_a_pickle_leaves_out_the_call_buffers_and_resumes_identically():
    """The measured call's buffers (and the slowdowns they hold for reuse) are scratch: a
    pickle leaves them out, and the unpickled simulator continues exactly as the original,
    which keeps and reuses them."""
    sim = _busy_sim("edge50-highload", 60)
    assert sim._kstate is not None and sim._slow_cache is not None
    state = sim.__getstate__()
    assert state["_kstate"] is None and state["_slow_cache"] is None
    assert sim._kstate is not None  # the original keeps its own
    twin = pickle.loads(pickle.dumps(sim))
    rng = np.random.default_rng(5)
    for _ in range(80):
        act = (rng.random(sim.mask.shape) * sim.mask).argmax(axis=1).reshape(1, -1)
        np.testing.assert_array_equal(sim.step(act)[0], twin.step(act)[0])
    np.testing.assert_array_equal(sim.progress, twin.progress)
    np.testing.assert_equal(sim.episode_metrics(0), twin.episode_metrics(0))


def test_the_compile_cache_reloads_in_a_fresh_process(tmp_path):
    """numba caches the compiled rule on disk; a second process must load it and run.

    A self-recursive function crashed the process when loaded from numba's cache (why
    ``np_sum`` walks its split tree with a stack): this runs the kernels twice, each time
    in a new interpreter, against one empty cache directory.
    """
    code = (
        "import numpy as np, edgesched\n"
        "from edgesched.envs.kernel_math import np_sum\n"
        "assert np_sum(np.arange(1000.0)) == float(np.sum(np.arange(1000.0)))\n"
        "sim = edgesched.make_batched('edge50-highload', 1); sim.reset(seeds=[0])\n"
        "rng = np.random.default_rng(0)\n"
        "for _ in range(150):\n"
        "    a = (rng.random(sim.mask.shape) * sim.mask).argmax(axis=1)\n"
        "    sim.step(a.reshape(1, -1))\n"
        "print(int(sim.episode_metrics(0)['crashes']), float(sim.progress.sum()))\n"
    )
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    runs = [
        subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        for _ in range(2)
    ]
    for r in runs:
        assert r.returncode == 0, r.stderr[-2000:]
    assert runs[0].stdout == runs[1].stdout
    assert any(p.suffix == ".nbi" for p in tmp_path.rglob("*"))


def test_evaluate_nodes_with_nothing_dirty_changes_nothing():
    sim = _busy_sim("edge10", 50)
    before = sim.w_rate.copy(), sim._node_slowed.copy()
    crashed, _, recheck = evaluate_nodes(
        np.zeros(sim.num_agents, dtype=bool), True, sim.running, sim._kernel_state()
    )
    assert len(crashed) == 0 and len(recheck) == 0
    np.testing.assert_array_equal(sim.w_rate, before[0])
    np.testing.assert_array_equal(sim._node_slowed, before[1])


def test_restart_seconds_of_many_equals_one_at_a_time(tables):
    """A crash looks up every crashed job's restart seconds at once."""
    tab, _ = tables
    models = np.repeat(np.arange(len(MODELS)), 9)
    gpus = np.tile([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 8.0, 64.0], len(MODELS))
    want = [tab.restart_seconds(int(m), float(g)) for m, g in zip(models, gpus, strict=True)]
    assert tab.restart_seconds_of(models, gpus).tolist() == want


def test_compiled_falls_back_to_memory_where_nothing_can_be_cached(monkeypatch):
    """A read-only install with no writable cache directory still runs (compiled per
    process): numba raises at decoration time there, which must not break the import."""
    from numba.core.caching import NullCache
    from numba.core.dispatcher import Dispatcher

    from edgesched.envs.kernel_math import compiled

    def refuse(self):
        raise RuntimeError("cannot cache function 'add_one': no locator available")

    monkeypatch.setattr(Dispatcher, "enable_caching", refuse)

    def add_one(x):
        return x + 1

    f = compiled(add_one)
    assert f(41) == 42
    assert isinstance(f._cache, NullCache)
