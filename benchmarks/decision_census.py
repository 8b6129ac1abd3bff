r"""Where a learned scheduler can differ from the heuristics: a census of its decisions.

A learned entry can only beat a heuristic through the decisions where the two could differ.
This script replays each committed board policy (``leaderboards/policies/<board>/``) on
held-out seeds exactly as the leaderboard evaluates it (strict simulator, greedy or seeded
sampling as its registry entry says, its own shield in front) and, at every decision round,
asks stateless heuristics what they would have proposed in the same state. Per entry (mean
over its training seeds' policies):

* ``decisions``: agent-decisions over the episodes;
* ``fits %``: the share where at least one placement fits (otherwise deferring is forced);
* ``choices``: mean number of fitting placements (slot x target x level) in those;
* ``defer %``: the share of those in which the policy deferred although a placement fit;
* ``= <heuristic> %``: on decisions where a placement fits, how often the policy's proposal
  equals the heuristic's proposal in the same state (``tgt``: the same target node, among
  decisions where both placed).

The same columns for the heuristics against each other are the scale: two fixed rules that
differ on most decisions still end up within a few percent of each other on the boards.
Learners that evaluate themselves through their own view (``dqn_central``, ``rlpto``) have
no per-agent proposals and are left out. Usage::

    python benchmarks/decision_census.py                    # edge50, edge50-highload
    python benchmarks/decision_census.py --boards edge10 --seeds 10000 --out benchmarks/results
    python benchmarks/decision_census.py --boards tapfinger-hetero6 --name decision_census_tfh6 \
        --out benchmarks/results
    python benchmarks/decision_census.py --boards edge100 --variants   # + the studies' runs
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from _report import Report, cpu_name, replay_on_one_thread

from edgesched.baselines import make_baseline
from edgesched.experiment.evaluation import (
    load_policy,
    make_eval_sim,
    reallocate_once_per_slot,
)
from edgesched.policy import EnvSpec
from edgesched.protocol import eval_workload_seed
from edgesched.shields import make_shield

#: Heuristics whose proposal is a function of the current observation and mask alone (no
#: memory across rounds, no graph view), so asking them in the policy's states is fair.
STATELESS = ("min_alloc", "least_loaded", "best_fit", "fifo", "sjf")
#: Learners that act through the shared multi-agent view (one proposal per agent); a policy
#: file is ``<algo>[-<variant>][_<shield>]_seed<k>.pt`` (``leaderboard collect``'s names).
SHARED_VIEW = re.compile(
    r"^((?:mappo|ippo|srole|tapfinger)(-[A-Za-z0-9.]+)?(?:_central|_regional)?)_seed(\d+)\.pt$"
)


def entry_of(filename: str, variants: bool = False) -> str | None:
    """The entry a policy file belongs to (``srole-b300k_central``), or ``None`` to skip it.

    Args:
        filename: a file name under ``leaderboards/policies/<board>/``.
        variants: also variant entries (``tapfinger-b300k``: a study's runs), not only the
            default ones.
    """
    m = SHARED_VIEW.match(filename)
    if m is None or (m.group(2) and not variants):
        return None
    return m.group(1)


class Tally:
    """Running counts of one replay (a policy or a heuristic) against the references."""

    def __init__(self, refs: tuple[str, ...]) -> None:
        self.refs = refs
        self.n = 0
        self.fits = 0
        self.choices = 0
        self.deferred = 0
        self.same = dict.fromkeys(refs, 0)
        self.same_tgt = dict.fromkeys(refs, 0)
        self.both_placed = dict.fromkeys(refs, 0)

    def add(
        self, decode: Callable, mask: np.ndarray, a: np.ndarray, ref: dict[str, np.ndarray]
    ) -> None:
        """Count one round: ``a`` the proposals, ``ref`` each reference rule's proposals.

        ``decode`` splits placements into (slot, target, level): the simulator's
        (``sim.view().decode``).
        """
        k = mask[:, 1:].sum(axis=1)
        fit = k > 0
        self.n += len(a)
        self.fits += int(fit.sum())
        self.choices += int(k[fit].sum())
        self.deferred += int((fit & (a == 0)).sum())
        for name in self.refs:
            r = ref[name]
            self.same[name] += int((fit & (a == r)).sum())
            both = fit & (a > 0) & (r > 0)
            self.both_placed[name] += int(both.sum())
            if both.any():
                ta = decode(a[both])[1]
                tr = decode(r[both])[1]
                self.same_tgt[name] += int((ta == tr).sum())

    def row(self) -> dict[str, float]:
        """Shares of this tally."""
        f = max(self.fits, 1)
        out = {
            "decisions": float(self.n),
            "fits": 100.0 * self.fits / max(self.n, 1),
            "choices": self.choices / f,
            "defer": 100.0 * self.deferred / f,
        }
        for name in self.refs:
            out[f"={name}"] = 100.0 * self.same[name] / f
            out[f"tgt={name}"] = 100.0 * self.same_tgt[name] / max(self.both_placed[name], 1)
        return out


def replay(path: Path, seeds: list[int]) -> tuple[dict[str, float], float]:
    """Census of one policy file on ``seeds``; its mean JCT on them."""
    policy, scenario, overrides = load_policy(str(path))
    sim = make_eval_sim(scenario, overrides)
    shield = make_shield(policy.shield, sim, **policy.shield_kwargs)
    refs = {name: make_baseline(name, policy.spec) for name in STATELESS}
    decode = sim.view().decode
    tally = Tally(STATELESS)
    jct = []
    for seed in map(eval_workload_seed, seeds, [0] * len(seeds)):
        sim.reset(seed)
        policy.reset(seed)
        for h in refs.values():
            h.reset(seed)
        slot = -1
        while not (sim.terminated or sim.truncated):
            slot = reallocate_once_per_slot(policy, sim, slot)
            obs, mask, state = sim.obs, sim.mask, sim.state()
            graph = sim.graph() if policy.needs_graph else None
            ref = {name: h.act(obs, mask, state) for name, h in refs.items()}
            if shield is None:
                a = policy.act(obs, mask, state, graph=graph)
                run = a
            else:
                a, prefs = policy.act_with_preferences(obs, mask, state, graph=graph)
                run = shield(a, prefs).actions
            tally.add(decode, mask, np.asarray(a), ref)
            sim.step(run)
        jct.append(sim.episode_metrics()["jct_mean"])
    return tally.row(), float(np.mean(jct))


def heuristic_rows(
    board: str, seeds: list[int], **overrides: object
) -> dict[str, dict[str, float]]:
    """The stateless heuristics replayed against each other (the scale of disagreement).

    ``overrides`` are scenario parameters (the tests shorten episodes with them).
    """
    out = {}
    for name in STATELESS:
        sim = make_eval_sim(board, overrides)
        spec = EnvSpec.of(sim)
        decode = sim.view().decode
        rules = {o: make_baseline(o, spec) for o in STATELESS}
        tally = Tally(STATELESS)
        jct = []
        for seed in map(eval_workload_seed, seeds, [0] * len(seeds)):
            sim.reset(seed)
            for h in rules.values():
                h.reset(seed)
            while not (sim.terminated or sim.truncated):
                obs, mask, state = sim.obs, sim.mask, sim.state()
                ref = {o: h.act(obs, mask, state) for o, h in rules.items()}
                a = ref[name]  # this rule drives; the others are asked in its states
                tally.add(decode, mask, a, ref)
                sim.step(a)
            jct.append(sim.episode_metrics()["jct_mean"])
        out[name] = {**tally.row(), "jct": float(np.mean(jct))}
    return out


def main() -> None:
    replay_on_one_thread()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--boards", nargs="+", default=["edge50", "edge50-highload"])
    p.add_argument("--seeds", nargs="+", type=int, default=[10000, 10001])
    p.add_argument("--policies", default="leaderboards/policies")
    p.add_argument("--out", default="")
    p.add_argument("--name", default="decision_census", help="results page: <out>/<name>.md")
    p.add_argument(
        "--variants",
        action="store_true",
        help="also the variant entries' policies (a budget study's tapfinger-b300k, say)",
    )
    args = p.parse_args()
    rep = Report(args.name, args.out)
    t0 = time.perf_counter()
    rep.print(
        f"Machine: {cpu_name()}. Held-out seeds {', '.join(map(str, args.seeds))} (episode 0), "
        "board policies from leaderboards/policies; percentages of agent-decisions."
    )
    cols = ["fits", "choices", "defer"] + [f"={h}" for h in STATELESS]
    cols += [f"tgt={h}" for h in ("min_alloc", "least_loaded")]
    head = ["entry", "policies", "decisions", "fits %", "choices", "defer %"]
    head += [f"= {h} %" for h in STATELESS] + ["tgt = min_alloc %", "tgt = least_loaded %"]
    head += ["mean JCT"]
    for board in args.boards:
        groups: dict[str, list[tuple[dict[str, float], float]]] = {}
        for f in sorted(Path(args.policies, board).glob("*.pt")):
            entry = entry_of(f.name, args.variants)
            if entry:
                groups.setdefault(entry, []).append(replay(f, args.seeds))
        rep.print()
        rep.print(f"## {board}")
        rep.print()
        rep.print("| " + " | ".join(head) + " |")
        rep.print("|" + "---|" * len(head))
        for entry, runs in groups.items():
            mean = {k: float(np.mean([r[0][k] for r in runs])) for k in ["decisions", *cols]}
            jct = float(np.mean([r[1] for r in runs]))
            cells = [entry, str(len(runs)), f"{mean['decisions']:,.0f}"]
            cells += [f"{mean[c]:.1f}" for c in cols] + [f"{jct:.2f}"]
            rep.print("| " + " | ".join(cells) + " |")
        for name, row in heuristic_rows(board, args.seeds).items():
            cells = [f"{name} (heuristic)", "-", f"{row['decisions']:,.0f}"]
            cells += [f"{row[c]:.1f}" for c in cols] + [f"{row['jct']:.2f}"]
            rep.print("| " + " | ".join(cells) + " |")
    rep.print()
    rep.print(f"{time.perf_counter() - t0:.0f} s.")
    rep.save()


if __name__ == "__main__":
    main()
