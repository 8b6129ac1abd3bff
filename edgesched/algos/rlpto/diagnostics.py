"""What a trained RLPTO controller decides, and whether its forecast and queue inputs matter.

Issue 22 asks for controllers "that keep using the forecast and the queues". This module
measures that on held-out episodes, run greedily exactly as in evaluation:

* how many controller calls are decisions at all (a job that can neither shrink nor grow
  has one feasible action);
* the greedy choice among shrink / keep / grow on the real decisions, and how often it is
  "grow whenever growing is feasible" (the collapse the leaderboards showed);
* the policy's entropy on the real decisions;
* sensitivity: the share of real decisions whose greedy action changes when only the
  forecast input moves from 0 to 2 (no arrivals to twice the usual), or only the queue
  inputs from empty to one job per agent in every priority class. A controller that ignores
  an input scores 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from edgesched.algos.common import masked_logits

from .trainer import GROW, KEEP, SHRINK, RLPTOTrainer


def controller_diagnostics(
    trainer: RLPTOTrainer, env_name: str, overrides: dict[str, Any], seeds: list[int]
) -> dict[str, float]:
    """Greedy rollouts of ``trainer``'s controller on ``seeds`` (one episode each).

    Args:
        trainer: a trained (or loaded) RLPTO trainer.
        env_name: the scenario, as in its run record.
        overrides: the run's scenario overrides.
        seeds: held-out workload seeds.

    Returns:
        ``calls``, ``decisions`` (calls with at least two feasible actions),
        ``shrink``/``keep``/``grow`` (shares of the greedy choice on decisions),
        ``always_grow`` (share of decisions where the choice equals "grow if feasible, else
        keep"), ``entropy`` (mean on decisions), ``forecast_sensitivity`` and
        ``queue_sensitivity`` (shares of decisions whose choice flips, see the module docs).
    """
    import edgesched

    trainer._refit(current=True)  # evaluation's forecaster (the final history)
    p = trainer.num_prio
    fc_col = 2 * p + 9
    queue_cols = slice(p + 9, 2 * p + 9)
    sim = edgesched.make_parallel(env_name, **(overrides or {})).sim
    calls = decisions = always_grow = 0
    counts = np.zeros(3)
    entropy: list[float] = []
    flips = {"forecast": 0, "queue": 0}

    def logits_of(x: np.ndarray, m: np.ndarray) -> torch.Tensor:
        return masked_logits(trainer.actor.policy(torch.from_numpy(x)), torch.from_numpy(m))

    for seed in seeds:
        sim.reset(seed=int(seed))
        while not (sim.terminated or sim.truncated):
            fc = trainer._forecast(sim)
            prev = trainer._quality_before(sim)
            _, feats, mask, rule = trainer._jobs(sim, prev, fc)
            calls += int((~rule).sum())
            real = ~rule & (mask.sum(1) > 1)
            if real.any():
                f, m = feats[real], mask[real]
                with torch.no_grad():
                    logits = logits_of(f, m)
                    pr = torch.softmax(logits, -1)
                    entropy.append(float(-(pr * torch.log(pr.clamp_min(1e-12))).sum(-1).sum()))
                    a = logits.argmax(-1).numpy()
                    np.add.at(counts, a, 1)
                    rule_grow = np.where(m[:, GROW], GROW, KEEP)
                    always_grow += int((a == rule_grow).sum())
                    for key, cols, lo, hi in (
                        ("forecast", fc_col, 0.0, 2.0),
                        ("queue", queue_cols, 0.0, 1.0),
                    ):
                        x0, x1 = f.copy(), f.copy()
                        x0[:, cols], x1[:, cols] = lo, hi
                        a0, a1 = logits_of(x0, m).argmax(-1), logits_of(x1, m).argmax(-1)
                        flips[key] += int((a0 != a1).sum())
                decisions += len(f)
            trainer._control(sim, prev, fc, greedy=True)
            sim.step(trainer.placer.act(sim.obs, sim.mask, None))
    d = max(decisions, 1)
    return {
        "calls": float(calls),
        "decisions": float(decisions),
        "shrink": float(counts[SHRINK]) / d,
        "keep": float(counts[KEEP]) / d,
        "grow": float(counts[GROW]) / d,
        "always_grow": always_grow / d,
        "entropy": float(np.sum(entropy)) / d,
        "forecast_sensitivity": flips["forecast"] / d,
        "queue_sensitivity": flips["queue"] / d,
    }


class RuleController(torch.nn.Module):
    """A fixed shrink/keep/grow rule in the controller's place (reference points).

    Args:
        rule: ``"grow"`` (grow whenever feasible), ``"keep"`` (never resize by choice;
            convergence-aware shrinking still applies) or ``"grow_if_idle"`` (grow only when
            no job waits in any queue, else keep: the use of the queues the paper intends).
        num_prio: priority classes of the scenario (locates the queue inputs).
    """

    RULES = ("grow", "keep", "grow_if_idle")

    def __init__(self, rule: str, num_prio: int) -> None:
        super().__init__()
        if rule not in self.RULES:
            raise ValueError(f"rule={rule!r}: use one of {self.RULES}")
        self.rule = rule
        self.queue_cols = slice(num_prio + 9, 2 * num_prio + 9)

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        """Logits (J, 3) that make the rule's choice the greedy one."""
        logits = torch.zeros(feats.shape[0], 3)
        grow = torch.ones(feats.shape[0], dtype=torch.bool)
        if self.rule == "keep":
            grow[:] = False
        elif self.rule == "grow_if_idle":
            grow = feats[:, self.queue_cols].sum(-1) == 0
        logits[:, KEEP] = 1.0
        logits[:, GROW] = torch.where(grow, 2.0, 0.0)
        return logits


def evaluate_rule(
    trainer: RLPTOTrainer,
    rule: str,
    env_name: str,
    overrides: dict[str, Any],
    seeds: list[int],
) -> dict[str, float]:
    """Held-out summary of RLPTO with :class:`RuleController` ``rule`` as its controller.

    Everything else is the trainer's own: placement, convergence-aware shrinking, forecaster.
    The trainer's controller is restored afterwards.
    """
    learned = trainer.actor.policy
    trainer.actor.policy = RuleController(rule, trainer.num_prio)
    try:
        return trainer.evaluate(env_name, overrides, list(seeds), 1)["summary"]
    finally:
        trainer.actor.policy = learned


def advantage_by_choice(
    trainer: RLPTOTrainer, scenario: str, batches: int, copies: int = 4, steps: int = 128
) -> dict[str, float]:
    """The learning signal between grow and keep under ``trainer``'s current policy.

    Collects ``batches`` rollouts as training does (no update) and compares the advantages
    PPO would use on decisions where both grow and keep were feasible. A difference within
    its standard error means the reward (the team's, or the job's under per-job credit)
    cannot yet tell one controller's grow from its keep, and the policy drifts with the noise.

    Returns:
        ``n_grow``, ``n_keep``, ``adv_grow``, ``adv_keep`` (mean GAE advantage of each
        choice) and ``se_diff`` (standard error of their difference).
    """
    from edgesched.algos.common import VecSim
    from edgesched.envs import make_config

    vec = VecSim(make_config(scenario), copies, seed=trainer.seed)
    grow: list[np.ndarray] = []
    keep: list[np.ndarray] = []
    for _ in range(batches):
        b = trainer.collect(vec, steps)
        if "group" in b:  # team credit: each decision has its slot's advantage
            adv, mask, acts = b["adv"][b["group"]], b["mask"], b["actions"]
        else:  # per-job credit: rows of every running job, the decisions among them
            rows = b["learn"]
            adv, mask, acts = b["adv"][rows], b["mask"][rows], b["actions"][rows]
        both = mask[:, GROW] & mask[:, KEEP]
        grow.append(adv[both & (acts == GROW)])
        keep.append(adv[both & (acts == KEEP)])
    g, k = np.concatenate(grow), np.concatenate(keep)
    se = float(np.sqrt(g.var() / max(len(g), 1) + k.var() / max(len(k), 1)))
    return {
        "n_grow": float(len(g)),
        "n_keep": float(len(k)),
        "adv_grow": float(g.mean()) if len(g) else float("nan"),
        "adv_keep": float(k.mean()) if len(k) else float("nan"),
        "se_diff": se,
    }
