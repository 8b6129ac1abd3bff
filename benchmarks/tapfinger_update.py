"""TapFinger's network on a CPU: dense padded attention against PyG's sparse HGTConv.

Records real graph views from a TapFinger rollout (``num_envs`` copies x ``rollout_steps``
rounds of the default experiment, the shapes the learner sees), then times, interleaved
(A, B, A, B, ...), the two computations of the same network (same parameters):

* **sparse**: what the network ran before: ``batch_graphs`` merges the graphs into one
  ``HeteroData``, PyG's ``HGTConv.forward`` passes messages along the edge lists, the
  allocation head runs on concatenated embeddings;
* **dense**: :func:`edgesched.algos.graph.pad_graphs` pads and stacks the graphs, and the
  backbone computes the same layer as masked softmax attention with batched matrix products.

Figures: the rollout forward pass (``num_envs`` graphs, no gradient, all pending slots),
one PPO minibatch (forward on the chosen slot + backward) and one whole PPO update's network
work (``epochs x minibatches`` minibatches of the rollout, the graph conversion included:
the sparse path merges every minibatch's graphs, the dense one pads the rollout once).
Medians over the rounds, and the ratio sparse / dense. Then the dense update as the trainer
runs it, each minibatch padded in groups of similar sizes where that saves enough work
(:func:`edgesched.algos.graph.size_buckets`), against one padded batch per minibatch.

Usage::

    python benchmarks/tapfinger_update.py
    python benchmarks/tapfinger_update.py --rounds 15 --out benchmarks/results
    python benchmarks/tapfinger_update.py --env edge50 --rounds 5 --name tapfinger_update_edge50 \
        --out benchmarks/results   # the larger graphs of an edge scenario
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch_geometric
from omegaconf import OmegaConf

import edgesched
from edgesched.algos.common import VecSim
from edgesched.algos.graph import (
    EDGE_TYPES,
    NODE_TYPES,
    agent_index,
    batch_graphs,
    in_size_groups,
    pad_graphs,
    size_buckets,
)
from edgesched.algos.tapfinger import TapFingerNet, TapFingerTrainer
from edgesched.envs import EdgeClusterSim, make_config
from edgesched.experiment.schema import AlgoConfig, ExperimentConfig
from edgesched.policy import EnvSpec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import Report, cpu_name  # benchmarks/ is a folder of scripts, not a package


def sparse_forward(net: TapFingerNet, graphs: list, only: torch.Tensor | None = None):
    """The network's computation before the dense backbone (same parameters, same outputs)."""
    data, off = batch_graphs(graphs)
    agents, slots, targets = agent_index(graphs, off)
    bb = net.backbone
    dtype = net.q.weight.dtype  # the tests run it in float64 too
    h = {t: bb.enc[t](data[t].x.to(dtype)) for t in NODE_TYPES}
    edges = {et: data[et].edge_index for et in EDGE_TYPES}
    for conv in bb.convs:
        out = conv(h, edges)
        h = {t: h[t] + torch.tanh(out[t]) if out.get(t) is not None else h[t] for t in h}
    hn, hp = h["node"], h["pending"]
    zero = hn.new_zeros(1, net.hidden)
    ha = hn[torch.from_numpy(agents)]
    s = torch.from_numpy(slots)
    hs = torch.cat([hp, zero])[torch.where(s >= 0, s, len(hp))]
    tg = torch.from_numpy(targets)
    ht = torch.cat([hn, zero])[torch.where(tg >= 0, tg, len(hn))]
    ptr = (net.q(ha)[:, :, None, :] * net.k(hs)).sum(-1) / net.hidden**0.5
    ptr = torch.cat([net.defer(ha), ptr], dim=-1)
    if only is not None:
        hs = hs.gather(2, only[:, :, None, None].expand(-1, -1, 1, hs.shape[-1]))
    g, n, p, _ = hs.shape
    k1 = ht.shape[2]
    x = torch.cat(
        [
            ha[:, :, None, None, :].expand(g, n, p, k1, -1),
            hs[:, :, :, None, :].expand(g, n, p, k1, -1),
            ht[:, :, None, :, :].expand(g, n, p, k1, -1),
        ],
        dim=-1,
    )
    alloc = net.alloc(x).reshape(g, n, p, -1)
    batch = data["node"].batch
    pool = hn.new_zeros(g, net.hidden).index_add_(0, batch, hn)
    pool = pool / torch.bincount(batch, minlength=g).clamp_min(1)[:, None]
    v = net.critic(torch.cat([ha, pool[:, None, :].expand(-1, n, -1)], dim=-1))
    return ptr, alloc, v.squeeze(-1)


def _loss(out) -> torch.Tensor:
    """A PPO-shaped scalar of the outputs (every output reaches the gradient)."""
    ptr, alloc, v = out
    return (
        torch.log_softmax(ptr, -1).mean() + torch.log_softmax(alloc, -1).mean() + v.square().mean()
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="tapfinger-hetero6")
    parser.add_argument("--rounds", type=int, default=11, help="interleaved rounds per figure")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="", help="directory for the results file")
    parser.add_argument(
        "--name", default="tapfinger_update", help="results file name (<out>/<name>.md)"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)  # the runner's default (experiment.threads)
    report = Report(args.name, args.out)
    cpu = cpu_name()
    report.print(
        f"machine: {cpu}, {os.cpu_count()} CPUs, python {platform.python_version()}, "
        f"torch {torch.__version__} (1 thread), torch_geometric {torch_geometric.__version__}, "
        f"edgesched {edgesched.__version__}"
    )

    # the default experiment and TapFinger's own settings, as train.py composes them
    exp = ExperimentConfig()
    cfg = OmegaConf.structured(AlgoConfig(name="tapfinger"))
    own = OmegaConf.load(Path(__file__).resolve().parents[1] / "conf" / "algo" / "tapfinger.yaml")
    own.pop("defaults", None)
    cfg = OmegaConf.merge(cfg, own)
    envs, steps = exp.num_envs, exp.rollout_steps
    vec = VecSim(make_config(args.env), envs, args.seed, args.env)
    spec = EnvSpec.of(EdgeClusterSim(make_config(args.env)))
    trainer = TapFingerTrainer(cfg, spec, args.seed)
    batch = trainer.collect(vec, steps)
    rounds = batch["graphs"]  # (steps, envs) graph views, as the learner stores them
    graphs = [g for step in rounds for g in step]
    sizes = {t: np.array([len(g["nodes"][t]) for g in graphs]) for t in NODE_TYPES}
    padded_all = pad_graphs(graphs)
    report.print(
        f"{args.env}: {len(graphs)} recorded graphs ({steps} rounds x {envs} copies); rows "
        + ", ".join(f"{t} {int(np.median(c))} median / {c.max()} max" for t, c in sizes.items())
    )
    net = trainer.actor
    mb = max(len(graphs) // int(cfg.minibatches), 1)
    passes = int(cfg.epochs) * int(cfg.minibatches)
    rng = np.random.default_rng(args.seed)
    choice = torch.from_numpy(batch["choice"].reshape(len(graphs), -1))
    only_all = (choice - 1).clamp_min(0)

    def rollout(dense: bool) -> float:
        """Seconds per rollout forward pass (mean over the recorded rounds)."""
        t0 = time.perf_counter()
        with torch.no_grad():
            for step in rounds:
                net(pad_graphs(step)) if dense else sparse_forward(net, step)
        return (time.perf_counter() - t0) / len(rounds)

    def minibatch(dense: bool, idx: np.ndarray, padded=None, grouped: bool = False) -> None:
        if grouped:  # as the trainer runs it
            _, out = in_size_groups(lambda p: net(padded.select(p), only_all[p]), padded.count, idx)
        elif dense:
            out = net(padded.select(idx), only_all[idx])
        else:
            out = sparse_forward(net, [graphs[i] for i in idx], only_all[idx])
        net.zero_grad()
        _loss(out).backward()

    def one_minibatch(dense: bool) -> float:
        idx = rng.permutation(len(graphs))[:mb]
        padded = pad_graphs(graphs) if dense else None
        t0 = time.perf_counter()
        minibatch(dense, idx, padded)
        return time.perf_counter() - t0

    def update(dense: bool, grouped: bool = False) -> float:
        t0 = time.perf_counter()
        padded = pad_graphs(graphs) if dense else None  # once per update
        for _ in range(int(cfg.epochs)):
            perm = rng.permutation(len(graphs))
            for start in range(0, len(graphs), mb):
                minibatch(dense, perm[start : start + mb], padded, grouped)
        return time.perf_counter() - t0

    report.print(
        f"interleaved sparse/dense x {args.rounds} rounds; medians (ms); ratio = sparse / dense"
    )
    report.print(f"{'figure':<46} {'sparse':>9} {'dense':>9} {'ratio':>6}")
    figures = [
        (f"rollout forward ({envs} graphs, no grad)", rollout),
        (f"PPO minibatch fwd+bwd ({mb} graphs)", one_minibatch),
        (f"PPO update network work ({passes} minibatches)", update),
    ]
    for name, fn in figures:
        fn(True), fn(False)  # warm-up
        times: dict[bool, list[float]] = {False: [], True: []}
        for _ in range(args.rounds):
            for dense in (False, True):
                times[dense].append(fn(dense))
        sp, de = statistics.median(times[False]), statistics.median(times[True])
        report.print(f"{name:<46} {sp * 1e3:>9.2f} {de * 1e3:>9.2f} {sp / de:>6.2f}")

    # the dense update as the trainer runs it: each minibatch padded in groups of similar
    # sizes where that saves enough work (graph.size_buckets), against one padded batch
    update(True, grouped=True), update(True, grouped=False)  # warm-up
    times = {False: [], True: []}
    groups = [
        len(size_buckets(padded_all.count, rng.permutation(len(graphs))[:mb])) for _ in range(50)
    ]
    for _ in range(args.rounds):
        for grouped in (False, True):
            times[grouped].append(update(True, grouped))
    one, grp = statistics.median(times[False]), statistics.median(times[True])
    report.print(
        f"dense update in size groups (mean {np.mean(groups):.2f} groups per minibatch): "
        f"one padded batch {one * 1e3:.2f} ms, size groups {grp * 1e3:.2f} ms, "
        f"ratio {one / grp:.2f}"
    )
    report.save()


if __name__ == "__main__":
    main()
