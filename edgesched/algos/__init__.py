"""Learned schedulers. One registry; Hydra's ``conf/algo/`` mirrors it.

Each algorithm is one :class:`~edgesched.algos.base.AlgorithmEntry`: its trainer factory
``(config, spec, seed, shield, shield_kwargs) -> Trainer``, its config dataclass (below; Hydra
validates ``conf/algo/<name>.yaml`` against it) and its capability flags (needs or accepts a
shield, reads the graph view, evaluates itself, ...). Shield validation, ``train.py --help``
and the tests' matrix of (algorithm, shield, scenario) derive from the entries; the contract
itself is in :mod:`edgesched.algos.base`.

torch is imported only when a trainer is built, so ``import edgesched`` stays light.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Optional

from .base import (
    AlgorithmConfig,
    AlgorithmEntry,
    PPOConfig,
    Trainer,
    missing_members,
    pointer_clip_for,
    team_reward_for,
)

_REGISTRY: dict[str, AlgorithmEntry] = {}


def register_algorithm(entry: AlgorithmEntry) -> AlgorithmEntry:
    """Register ``entry`` under ``entry.name`` (a later entry of the same name replaces it).

    Returns:
        ``entry``.
    """
    if not isinstance(entry, AlgorithmEntry):
        raise TypeError(
            f"register_algorithm: entry={entry!r} is not an edgesched.algos.base.AlgorithmEntry"
        )
    _REGISTRY[entry.name] = entry
    return entry


def list_algorithms() -> list[str]:
    """Names of the registered learned schedulers."""
    return sorted(_REGISTRY)


def get_algorithm(name: str) -> AlgorithmEntry:
    """The registry entry of algorithm ``name``.

    Raises:
        KeyError: unknown name, listing the registered ones.
    """
    if name not in _REGISTRY:
        raise KeyError(f"unknown algorithm {name!r}; registered algorithms: {list_algorithms()}")
    return _REGISTRY[name]


def algo_config(name: str, **values: Any) -> AlgorithmConfig:
    """A config dataclass instance of algorithm ``name`` (its defaults, ``values`` on top).

    Raises:
        KeyError: unknown algorithm.
        TypeError: a key the algorithm does not have.
    """
    return get_algorithm(name).config_class(name=name, **values)


def config_from_dict(values: Mapping[str, Any]) -> AlgorithmConfig:
    """The typed config of a stored algorithm config (a run's ``config.yaml``, ``policy.pt``).

    Runs written before each algorithm had its own config class stored every algorithm's
    hyperparameters; the keys the algorithm does not have are dropped (it never read them).
    Keys the config gained later take their default, which keeps the stored behaviour.

    Args:
        values: the stored ``algo`` node, with its ``name``.

    Raises:
        KeyError: no ``name`` or an unknown algorithm.
    """
    values = dict(values)
    name = str(values.get("name", ""))
    cls = get_algorithm(name).config_class
    # a key whose default changed after it existed: absent, it keeps the stored behaviour
    for key, value in getattr(cls, "stored_defaults", {}).items():
        values.setdefault(key, value)
    known = {f.name for f in dataclasses.fields(cls)}
    return algo_config(name, **{k: v for k, v in values.items() if k in known and k != "name"})


def make_trainer(
    name: str,
    algo_cfg: Any,
    spec: Any,
    seed: int,
    shield: str = "none",
    shield_kwargs: dict[str, Any] | None = None,
) -> Trainer:
    """Build the trainer of algorithm ``name``; unknown names list the registry.

    Args:
        name: registry key.
        algo_cfg: hyperparameters (the entry's ``config_class``, or a DictConfig of it).
        spec: the scenario's :class:`~edgesched.policy.EnvSpec` (``ScenarioHandle.spec``).
        seed: training seed.
        shield: registered shield in the training loop.
        shield_kwargs: the shield's options.

    Raises:
        KeyError: unknown algorithm.
        ValueError: a shield the algorithm needs but lacks, or refuses but got.
        TypeError: the trainer lacks a member of the protocols its flags promise.
    """
    entry = get_algorithm(name)
    problem = entry.shield_error(shield)
    if problem:
        raise ValueError(f"shield={shield!r}: {problem}")
    trainer = entry.factory(algo_cfg, spec, seed, shield, shield_kwargs or {})
    missing = missing_members(trainer, *entry.protocols)
    if missing:
        raise TypeError(
            f"algorithm {name!r}: its trainer {type(trainer).__name__} lacks {missing}, which "
            "its registry flags promise (edgesched/algos/base.py)"
        )
    return trainer


# ---------------------------------------------------------------------------- PPO family
POLICY_ROWS = ("all", "choice")
"""Values of the shared-actor learners' ``algo.policy_rows`` (:class:`SharedPPOConfig`)."""


@dataclass
class SharedPPOConfig(PPOConfig):
    """Keys of the shared-actor PPO learners (MAPPO, IPPO, SROLE; ``algos/mappo.py``).

    Attributes:
        feature_norm: a LayerNorm on the actor's and the critic's inputs (observation and
            state), as the MAPPO authors' implementation does by default
            (``use_feature_normalization``, Yu et al., NeurIPS'22). Off by default: every
            committed board entry was trained without it (a stored config without the key
            loads as trained); ``benchmarks/results/feature_norm.md`` measures it (mean JCT
            1-9% lower, no paired 95% CI excluding no change).
        team_reward: each agent learns from the mean of all agents' rewards (``true``) or
            from its own (``false``). ``None`` (the default) follows the scenario, as for
            ``tapfinger`` (:func:`team_reward_for`): the mean where a waiting job's cost can
            pass between agents (``tapfinger-hetero6``: the simulator charges a queued job to
            its home agent and a running job to the agent that placed it, so under shared
            visibility an agent that places another agent's job takes over its cost; on its
            own reward each learner there ends worse than ``random``, on the mean 68.5% to
            77.0% lower, ``benchmarks/results/team_reward_tfh6.md``), each agent's own
            elsewhere (the edge scenarios, where every committed entry was trained so: on
            the mean, mean JCT on edge50 ended 49.8% (MAPPO), 19.1% (IPPO) and 45.6% (SROLE)
            higher, paired, and MAPPO's level on edge10 and edge100,
            ``benchmarks/results/mappo_team_reward_edge50.md``). A stored config without
            the key trained on its own reward and loads so.
        policy_rows: the agent rows over which the policy loss, its advantage
            normalization and the entropy bonus are averaged. ``all``: every agent's row,
            also those with one feasible action (they can only defer, so they carry no
            gradient but shift and scale the normalized advantages: on edge50 about nine
            rows in ten). ``choice``: the rows with more than one feasible action, as the
            MAPPO authors' implementation treats inactive agents
            (``use_policy_active_masks``; :func:`~edgesched.algos.common.choice_rows_loss`).
            ``all`` by default: every committed board entry was trained so (a stored config
            without the key loads as trained); ``benchmarks/results/policy_rows.md``
            measures ``choice``.
    """

    #: a stored config without ``team_reward`` was trained on each agent's own reward
    stored_defaults: ClassVar[dict[str, Any]] = {"team_reward": False}
    scenario_defaults: ClassVar[dict[str, Any]] = {"team_reward": team_reward_for}

    feature_norm: bool = False
    team_reward: Optional[bool] = None  # noqa: UP045 (OmegaConf reads no `bool | None`)
    policy_rows: str = "all"


@dataclass
class MAPPOConfig(SharedPPOConfig):
    """MAPPO: PPO with parameter sharing and a centralized critic on ``state()``."""

    name: str = "mappo"


@dataclass
class IPPOConfig(SharedPPOConfig):
    """IPPO: PPO with parameter sharing and a local critic on each agent's observation."""

    name: str = "ippo"


@dataclass
class SROLEConfig(SharedPPOConfig):
    """SROLE (Sen & Shen, ICDCS'22): MAPPO with a collision shield in the loop.

    Attributes:
        collision_penalty: reward penalty per penalized agent (see ``penalize``), in the
            reward's unit (jobs x slots): about one slot of one job's completion time.
        shield_training: how the learner trains with its shield. ``postposed``: the actor
            proposes, the shield corrects, and the learner keeps its proposal and that
            proposal's log-probability (the environment's correction is part of the
            dynamics). ``preemptive``: agents commit in a random order drawn each round,
            and each agent's mask already excludes the placements that would no longer fit
            after the earlier agents' commitments (within its region under the regional
            shield), so the sampled distribution is the one stored and PPO's ratio stays
            exact (Alshiekh et al., AAAI'18, preemptive shielding). The default: on
            edge50-v1 (3 training seeds each) it reached mean JCT 45.6 against 55.4
            (post-posed, changed agents pay) and 61.7 (post-posed, collided agents pay;
            ``benchmarks/results/srole_shield_training.md``).
        penalize: which agents pay ``collision_penalty`` (``postposed``): ``changed`` (the
            default), only agents whose action the shield changed; ``collided`` (the v0
            rule), every agent whose proposal took part in a collision. On edge50-v1,
            post-posed, the mean JCT was 55.4 against 61.7 with ``collided``. Under
            ``preemptive`` training with the central shield no proposal collides or is
            changed, so it has no effect (:meth:`inert_keys`).
    """

    #: a stored config without ``shield_training`` was trained before the option existed,
    #: post-posed (the only form then), and one without ``penalize`` with ``collided``: it
    #: loads, resumes and is reported as it was trained
    stored_defaults: ClassVar[dict[str, Any]] = {
        **SharedPPOConfig.stored_defaults,
        "shield_training": "postposed",
        "penalize": "collided",
    }

    name: str = "srole"
    collision_penalty: float = 1.0
    shield_training: str = "preemptive"
    penalize: str = "changed"

    def inert_keys(self, shield: str) -> frozenset[str]:
        """``penalize`` under preemptive training behind the central shield.

        The commitments' masks make every joint action fit the whole cluster, so the
        shield neither reports a collision nor changes an action: both rules charge no one.
        Under the regional shield a placement across a region boundary can still collide.
        """
        if self.shield_training == "preemptive" and shield == "central":
            return frozenset({"penalize"})
        return frozenset()


def _mappo(cfg: Any, spec: Any, seed: int, shield: str, shield_kwargs: dict) -> Trainer:
    from .mappo import PPOTrainer

    return PPOTrainer(cfg, spec, seed, True, shield, shield_kwargs)


def _ippo(cfg: Any, spec: Any, seed: int, shield: str, shield_kwargs: dict) -> Trainer:
    from .mappo import PPOTrainer

    return PPOTrainer(cfg, spec, seed, False, shield, shield_kwargs)


register_algorithm(
    AlgorithmEntry("mappo", _mappo, MAPPOConfig, summary="PPO, shared actor, centralized critic")
)
register_algorithm(AlgorithmEntry("ippo", _ippo, IPPOConfig, summary="PPO, local critics"))
register_algorithm(
    AlgorithmEntry(
        "srole",
        _mappo,
        SROLEConfig,
        summary="MAPPO with a collision shield in the loop",
        needs_shield=True,
        shield_note="it is MAPPO with a shield in the loop",
    )
)


# ---------------------------------------------------------------------------- DQN head
@dataclass
class DQNCentralConfig(AlgorithmConfig):
    """Centralized RL (SROLE's comparator): stable-baselines3 DQN as one cluster head.

    Attributes:
        lr: Adam learning rate.
        gamma: discount per head decision.
        max_grad_norm: gradient clipping norm.
        hidden: MLP hidden sizes of the Q-network.
        buffer_size: DQN replay buffer size.
        learning_starts: DQN decisions before learning starts.
        batch_size: DQN minibatch size.
        train_freq: DQN decisions between gradient steps.
        target_update_interval: DQN decisions between target-network updates.
        exploration_fraction: DQN share of the budget over which epsilon decays.
        exploration_final_eps: DQN final epsilon.
        action_masking: mask infeasible actions in training (greedy choice, targets and
            exploration; ``edgesched.algos.dqn_central``). On by default (with
            ``work_conserving``); alone, on edge10-v1, it did not remove the collapse to
            deferring (module docstring).
        discount_unit: ``decision`` (default: SB3's TD target as is, ``gamma`` per head
            decision) or ``slot`` (``gamma`` per slot the decision ended, so a longer queue
            does not make a slot's cost cheaper; ``SlotDiscountReplayBuffer``).
        queue_shaping: weight ``k`` of the potential-based shaping ``phi(s) = -k * (queued
            jobs)`` (default 0: off; ``algos.central_vec.CentralVecEnv``). Off by default:
            with the work-conserving head, three seeds did not separate it from no shaping
            (``benchmarks/results/dqn_central_shaping_fixed.md``; the older study's shaping
            rows were measured with a potential that did not move, see ``dqn_central``'s
            module docstring).
        work_conserving: the head may pass over a job only when none of its placements
            fits (needs ``action_masking``; in training and evaluation). On by default: it
            removed the collapse to passing on edge10-v1 and edge50-v1
            (``benchmarks/results/dqn_central_study.md``).
        copies: cluster heads trained side by side, as one batched simulator (SB3's DQN on
            a ``copies``-wide vector environment, one gradient step per copy every
            ``train_freq`` vector steps, so still one per ``train_freq`` decisions). Default
            1: every committed entry trained one head.
    """

    #: what a stored config without these keys ran (they defaulted to False until the
    #: work-conserving head became the default): old policies load as they were trained
    stored_defaults: ClassVar[dict[str, Any]] = {"action_masking": False, "work_conserving": False}

    name: str = "dqn_central"
    lr: float = 5e-4
    gamma: float = 0.99
    max_grad_norm: float = 10.0
    hidden: list[int] = dataclasses.field(default_factory=lambda: [64, 64])
    buffer_size: int = 100_000
    learning_starts: int = 1_000
    batch_size: int = 64
    train_freq: int = 4
    target_update_interval: int = 2_000
    exploration_fraction: float = 0.3
    exploration_final_eps: float = 0.05
    action_masking: bool = True
    discount_unit: str = "decision"
    queue_shaping: float = 0.0
    work_conserving: bool = True
    copies: int = 1


def _dqn_central(cfg: Any, spec: Any, seed: int, shield: str, shield_kwargs: dict) -> Trainer:
    from .dqn_central import DQNCentralTrainer

    return DQNCentralTrainer(cfg, spec, seed, shield, shield_kwargs)


register_algorithm(
    AlgorithmEntry(
        "dqn_central",
        _dqn_central,
        DQNCentralConfig,
        summary="one DQN cluster head on the central view",
        accepts_shield=False,
        shield_note="one cluster head deciding one task at a time cannot collide",
        own_view=True,
        central_head=True,
        on_policy=False,
        uses_budget=True,
    )
)


# ---------------------------------------------------------------------------- TapFinger
TAPFINGER_CONFLICT_WINNERS = ("sampled", "argmax")
"""``algo.conflict_winner``: how TapFinger picks one winner among agents that chose one task."""


@dataclass
class TapFingerConfig(PPOConfig):
    """TapFinger (Li et al., INFOCOM'23): HGTConv over the graph view, pointer, PPO.

    Attributes:
        gnn_hidden: TapFinger embedding width.
        gnn_layers: TapFinger HGTConv layers.
        gnn_heads: TapFinger attention heads.
        graph_attention: TapFinger message passing (false: the no-attention ablation).
        pointer: TapFinger learned task selection (false: uniform task choice ablation).
        team_reward: TapFinger learns from the mean of the agents' rewards (cooperative
            agents, ``true``) or from each agent's own reward (``false``). ``None`` (the
            default) follows the scenario (:func:`team_reward_for`): the mean where a
            waiting job's cost can pass between agents (shared visibility with the cost
            charged to its home agent: ``tapfinger-hetero6``), each agent's own elsewhere
            (every edge scenario, where only a job's home agent sees it).
        work_conserving: TapFinger's pointer may defer only when no task of the agent's
            window fits (in training and at evaluation).
        conflict_winner: who wins when agents chose one task: ``sampled`` (drawn in
            proportion to pointer probability x softmax of the fit in training, the most
            probable at evaluation) or ``argmax`` (the largest pointer probability x fit,
            always; the original TapFinger code's rule).
        pointer_clip: bound ``C`` of the pointer's logits (task scores and defer score),
            ``C * tanh(logit / C)``: near 0 unchanged, never beyond ``+-C``; 0 leaves them
            unbounded. The original code's pointers are bounded (its LSTM pointer ``10 *
            tanh``, its attention pointer additive, ``v . tanh(...)``); ours is a scaled dot
            product, whose logits grow with training (``benchmarks/results/
            tapfinger_pointer.md``). ``None`` (the default) follows the scenario
            (:func:`pointer_clip_for`): 10, the original's bound, where agents contest
            tasks (shared visibility), unbounded where each agent sees only its own queue.
            A stored config without the key loads as 0 (unbounded), as it trained.
    """

    name: str = "tapfinger"
    gnn_hidden: int = 64
    gnn_layers: int = 2
    gnn_heads: int = 2
    graph_attention: bool = True
    pointer: bool = True
    team_reward: Optional[bool] = None  # noqa: UP045 (OmegaConf reads no `bool | None`)
    work_conserving: bool = False
    conflict_winner: str = "sampled"
    pointer_clip: Optional[float] = None  # noqa: UP045 (as team_reward)

    # configs stored before a key existed: team_reward (0e96081) trained on each agent's own
    # reward, pointer_clip with unbounded pointer logits
    stored_defaults: ClassVar[dict[str, Any]] = {"team_reward": False, "pointer_clip": 0.0}
    scenario_defaults: ClassVar[dict[str, Any]] = {
        "team_reward": team_reward_for,
        "pointer_clip": pointer_clip_for,
    }


def _tapfinger(cfg: Any, spec: Any, seed: int, shield: str, shield_kwargs: dict) -> Trainer:
    from .tapfinger import TapFingerTrainer

    return TapFingerTrainer(cfg, spec, seed)


register_algorithm(
    AlgorithmEntry(
        "tapfinger",
        _tapfinger,
        TapFingerConfig,
        summary="HGT graph network, pointer task choice, Bayes/fit conflict resolution",
        accepts_shield=False,
        shield_note="it resolves task conflicts itself (pointer probability x fit)",
        needs_graph_view=True,
        # the single most likely allocation on its 0-16 x 0-16 grid is not representative
        # of the distribution PPO trained (see TapFingerTrainer)
        eval_sampled=True,
    )
)


# ---------------------------------------------------------------------------- RLPTO
RLPTO_PLACEMENTS = ("min_alloc", "least_loaded", "best_fit")
"""The baselines RLPTO may place with: those that place at the minimum allocation."""


@dataclass
class RLPTOConfig(PPOConfig):
    """RLPTO (Lu et al., TPDS'23): priority queues, per-job PPO controllers, forecasting.

    Attributes:
        resource_weight: RLPTO reward weight of the occupied share of CPU and GPU.
        accuracy_weight: RLPTO reward weight of the quality gained per slot.
        shrink_gain: RLPTO's convergence rule: shrink a job (past half its quality) whose
            quality gain in the last slot fell below this fraction of its own mean gain per
            slot since it started (its curve has flattened).
        forecast_window: RLPTO forecaster's window in slots.
        forecast_refit: RLPTO refits its forecaster every this many updates.
        credit: ``team`` (every decision of a slot shares the slot's cluster-reward
            advantage) or ``job`` (the slot's reward split over the running jobs, GAE along
            each job's decisions with a job critic; :mod:`edgesched.algos.rlpto.job_credit`).
        placement: the rule that places each agent's first feasible queued job at its
            minimum allocation (a baseline of the same name): ``min_alloc`` (the first
            feasible target in neighbourhood order, the agent itself first), ``least_loaded``
            (the target with the most free GPU fraction; the rule before issue #22) or
            ``best_fit``. The paper does not name one (an assumption, chosen from the
            heuristic rows of the v1 boards; see :mod:`edgesched.algos.rlpto.trainer`).
    """

    name: str = "rlpto"
    resource_weight: float = 1.0
    accuracy_weight: float = 1.0
    shrink_gain: float = 0.5
    forecast_window: int = 10
    forecast_refit: int = 50
    credit: str = "job"
    placement: str = "min_alloc"
    # stored configs from before per-job credit trained with the team's, and those from
    # before the placement option placed least-loaded
    stored_defaults: ClassVar[dict[str, Any]] = {"credit": "team", "placement": "least_loaded"}


def _rlpto(cfg: Any, spec: Any, seed: int, shield: str, shield_kwargs: dict) -> Trainer:
    from .rlpto.trainer import RLPTOTrainer

    return RLPTOTrainer(cfg, spec, seed)


register_algorithm(
    AlgorithmEntry(
        "rlpto",
        _rlpto,
        RLPTOConfig,
        summary="priority-queue placement, per-job shrink/keep/grow PPO, ARIMA+GRU forecast",
        accepts_shield=False,
        shield_note="it places with its priority-queue rule, which a shield cannot rank",
        own_view=True,
    )
)


__all__ = [
    "POLICY_ROWS",
    "RLPTO_PLACEMENTS",
    "TAPFINGER_CONFLICT_WINNERS",
    "AlgorithmConfig",
    "AlgorithmEntry",
    "DQNCentralConfig",
    "IPPOConfig",
    "MAPPOConfig",
    "PPOConfig",
    "RLPTOConfig",
    "SROLEConfig",
    "TapFingerConfig",
    "Trainer",
    "algo_config",
    "config_from_dict",
    "get_algorithm",
    "list_algorithms",
    "make_trainer",
    "pointer_clip_for",
    "register_algorithm",
    "team_reward_for",
]
