"""The algorithm contract (BenchMARL style): what a learned scheduler provides.

Three pieces, all read by :mod:`edgesched.experiment` and by the tests:

* :class:`Trainer` (a :class:`typing.Protocol`): exactly the members the runner
  (:mod:`edgesched.experiment.runner`) and the evaluation harness
  (:mod:`edgesched.experiment.evaluation`) call. Optional behaviour is not probed with
  ``hasattr``: an algorithm declares it with a capability flag of its registry entry, and the
  flag names the extra protocol the trainer then implements (:class:`SharedViewTrainer`,
  :class:`OwnViewTrainer`, :class:`SampledTrainer`, :class:`BudgetedTrainer`).
  :func:`missing_members` checks a trainer against them when it is built.
* A config dataclass per algorithm, derived from :class:`AlgorithmConfig` (usually through
  :class:`PPOConfig`): Hydra validates ``conf/algo/<name>.yaml`` and the command line against
  it (ConfigStore node ``schema/algo/<name>``), ``train.py --help`` lists its fields with the
  descriptions of its ``Attributes:`` docstring, and ``train.py`` rejects a hyperparameter the
  algorithm does not have.
* :class:`AlgorithmEntry`: the registry entry (``edgesched.algos.register_algorithm``) with
  the factory, the config class and the capability flags from which shield validation,
  ``--help`` and the test matrix derive.

This module imports nothing from ``edgesched`` at run time, nor torch or omegaconf, so the
registry and the schemas stay importable with the base dependencies.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

    from edgesched.envs.handle import ScenarioHandle
    from edgesched.policy import EnvSpec

MISSING = "???"
"""OmegaConf's marker of a value that must be set (``omegaconf.MISSING``), spelled out so
that the registry imports without the training extras."""


# ------------------------------------------------------------------------------ protocol
@runtime_checkable
class Trainer(Protocol):
    """What the runner calls on every trainer.

    The runner loops ``collect`` / ``update`` until ``updates`` reaches the budget, saves
    ``state_dict()`` into the resumable checkpoint (and restores it with
    ``load_state_dict``), and stores ``actor.state_dict()`` in ``policy.pt``.

    Attributes:
        updates: learner updates done so far (restored by :meth:`load_state_dict`).
        actor: the trained network (a ``torch.nn.Module``); ``policy.pt`` holds its
            ``state_dict()`` and :func:`edgesched.experiment.evaluation.load_policy` loads it
            into a freshly built trainer.
    """

    updates: int
    actor: Any

    def collect(self, vec: Any, steps: int) -> dict[str, Any]:
        """Step the training environments ``steps`` decision rounds per copy.

        Args:
            vec: the run's environment copies (resumed runs pass the pickled ones back).
            steps: decision rounds per copy.

        Returns:
            The batch :meth:`update` consumes, with at least ``episodes`` (metrics of the
            episodes that finished: ``jct_mean``, ``collisions_proposed``,
            ``episode_return_mean``), ``collisions`` (count) and ``rewards`` (array); an
            optional ``log`` dict is added to the metrics line.
        """
        ...

    def update(self, batch: dict[str, Any], progress: float) -> dict[str, float]:
        """Learn from ``batch``; ``progress`` in [0, 1) is the share of the budget done.

        Returns:
            Scalars for the metrics line (losses, entropy, ...). Increments ``updates``.
        """
        ...

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue training bit-for-bit (networks, optimizer, RNGs)."""
        ...

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output."""
        ...


@runtime_checkable
class SharedViewTrainer(Trainer, Protocol):
    """A trainer evaluated through the shared multi-agent view (``own_view=False``).

    The evaluation harness wraps it in
    :class:`~edgesched.experiment.evaluation.LearnedScheduler` and plays the held-out
    episodes itself, with the run's shield around it.
    """

    def act(
        self,
        obs: np.ndarray,
        mask: np.ndarray,
        greedy: bool = False,
        with_probs: bool = False,
        **kw: Any,
    ) -> tuple[Any, ...]:
        """Actions for one decision round of one simulator.

        Args:
            obs: (N, D) observations.
            mask: (N, A) action masks.
            greedy: the most likely feasible action instead of a sample.
            with_probs: also return the action probabilities (shield preferences).
            **kw: ``graphs=[graph]`` for algorithms with ``needs_graph_view``.

        Returns:
            ``(actions (N,), ...)``; with ``with_probs`` the last item is (N, A)
            probabilities.
        """
        ...


@runtime_checkable
class OwnViewTrainer(Trainer, Protocol):
    """A trainer that evaluates itself (``own_view=True``).

    For learners whose decisions are not one action per agent of the multi-agent view:
    ``dqn_central`` (one cluster head on the central Gymnasium view) and ``rlpto`` (its
    placement rule plus per-job controllers). They play the same held-out workloads
    (:func:`edgesched.protocol.eval_workload_seed`) and report the same metrics
    (:data:`edgesched.protocol.SCALAR_METRICS`).
    """

    def evaluate(
        self,
        env_name: str | ScenarioHandle,
        env_overrides: dict[str, Any],
        eval_seeds: list[int],
        episodes: int,
    ) -> dict[str, Any]:
        """Held-out evaluation on a strict simulator (invalid actions raise).

        Args:
            env_name: the run's :class:`~edgesched.envs.handle.ScenarioHandle`, or a
                scenario name or versioned id.
            env_overrides: with a handle, the evaluation's settings on top of its overrides
                (the strict-evaluation keys); with a name, its parameters, strict-evaluation
                keys included (:func:`edgesched.envs.handle.evaluation_config`).
            eval_seeds: held-out seeds.
            episodes: episodes per seed.

        Returns:
            ``{"per_episode": [...], "summary": {...}}`` as
            :func:`edgesched.experiment.evaluation.evaluate_scheduler` returns.
        """
        ...


@runtime_checkable
class SampledTrainer(Trainer, Protocol):
    """A trainer evaluated with its sampled policy (``eval_sampled=True``)."""

    def seed_sampling(self, seed: int) -> None:
        """Restart the action draws from ``seed`` (each held-out episode's workload seed)."""
        ...


@runtime_checkable
class BudgetedTrainer(Trainer, Protocol):
    """A trainer told its whole budget before the first update (``uses_budget=True``)."""

    def set_budget(self, total_env_steps: int) -> None:
        """The run's total env steps (decisions of a central head), e.g. for schedules."""
        ...


def protocol_members(protocol: type) -> tuple[str, ...]:
    """The public members a protocol class declares, its bases' included."""
    names: set[str] = set()
    for cls in protocol.__mro__:
        if cls in (Protocol, object) or not getattr(cls, "_is_protocol", False):
            continue
        names |= set(getattr(cls, "__annotations__", {}))
        names |= {n for n, v in vars(cls).items() if callable(v) and not n.startswith("_")}
    return tuple(sorted(names))


def missing_members(trainer: Any, *protocols: type) -> list[str]:
    """Members of ``protocols`` that ``trainer`` lacks.

    Looked up with :func:`inspect.getattr_static`: properties are not evaluated (the
    ``dqn_central`` actor is a property that builds a network), unlike ``isinstance``
    against a runtime-checkable protocol on Python < 3.12.
    """
    sentinel = object()
    return [
        f"{p.__name__}.{name}"
        for p in protocols
        for name in protocol_members(p)
        if inspect.getattr_static(trainer, name, sentinel) is sentinel
    ]


def team_reward_for(value: bool | None, sim_config: Any, name: str) -> bool:
    """Whether a learner with ``algo.team_reward`` learns from the agents' mean reward.

    ``None`` follows the scenario. The mean where a waiting job's cost can move between
    agents: under ``visibility="shared"`` with ``waiting_charge="home"`` a job waits in
    several agents' windows but only its home agent pays for it, so an agent learning from
    its own reward learns to leave other agents' jobs waiting (measured on
    ``tapfinger-hetero6``: ``tapfinger.py``'s docstring; mappo, ippo and srole end worse
    than ``random`` there on their own reward, ``benchmarks/results/team_reward_tfh6.md``),
    and the mean (minus the cluster's total completion time over N, by Little's law)
    removes that. Each agent's own reward elsewhere: under ``visibility="home"`` (the edge
    scenarios) nothing moves, and the mean only dilutes an agent's credit by the number of
    agents (TapFinger's own reward ended 18-42% lower in mean JCT than the mean on edge10,
    edge50, edge100 and edge50-highload, ``docs/tapfinger.md``); under
    ``waiting_charge="every_viewer"`` each agent already pays for what it sees, the
    original TapFinger code's per-agent reward.

    Args:
        value: ``algo.team_reward`` (``True``/``False`` are returned as they are).
        sim_config: the scenario's :class:`~edgesched.envs.config.SimConfig`.
        name: the parameter's name, for the error.

    Raises:
        ValueError: ``value`` is ``None`` and ``sim_config`` is ``None`` (a hand-written
            spec without its scenario's configuration).
    """
    if value is not None:
        return bool(value)
    shared = _shared_visibility(sim_config, name, "true (the agents' mean reward) or false")
    return shared and getattr(sim_config, "waiting_charge", "home") == "home"


def _shared_visibility(sim_config: Any, name: str, forced: str) -> bool:
    """Whether a scenario shows a waiting job to several agents, for a ``None`` default.

    Raises:
        ValueError: no scenario configuration to follow (naming ``name`` and the values
            ``forced`` that set it without one).
    """
    if sim_config is None:
        raise ValueError(
            f"{name}=None follows the scenario's visibility, but the spec carries no scenario "
            "configuration (EnvSpec.config is None); build the spec with EnvSpec.of(sim) or "
            f"set {name} to {forced}"
        )
    return getattr(sim_config, "visibility", "home") == "shared"


POINTER_CLIP_SHARED = 10.0
"""TapFinger's pointer bound where agents contest tasks: the original code's ``10 tanh``."""


def pointer_clip_for(value: float | None, sim_config: Any, name: str) -> float:
    """The bound of TapFinger's pointer logits (``algo.pointer_clip``); 0 is unbounded.

    ``None`` follows the scenario. :data:`POINTER_CLIP_SHARED` where agents contest tasks
    (``visibility="shared"``: a task sits in several agents' windows and only one of the
    agents that choose it gets it): there the unbounded pointer sharpens with training and
    its agents lose more of their placement attempts to each other (0.232 of them at
    149,504 steps, 0.423 at 599,552 on ``tapfinger-hetero6``); bounded, 0.208, and the
    mean JCT is 22.2% lower, paired (``benchmarks/results/tapfinger_pointer_clip.md``).
    Unbounded elsewhere: under ``visibility="home"`` no task is contested, and the bound
    only keeps the sampled pointer less certain among the agent's own tasks (edge10: 14.1%
    higher mean JCT, ``benchmarks/results/tapfinger_pointer_clip_edge10.md``).

    Args:
        value: ``algo.pointer_clip`` (a number is returned as it is).
        sim_config: the scenario's :class:`~edgesched.envs.config.SimConfig`.
        name: the parameter's name, for the error.

    Raises:
        ValueError: ``value`` is ``None`` and ``sim_config`` is ``None``.
    """
    if value is not None:
        return float(value)
    shared = _shared_visibility(sim_config, name, "a number (0: unbounded)")
    return POINTER_CLIP_SHARED if shared else 0.0


# ------------------------------------------------------------------------------ configs
@dataclass
class AlgorithmConfig:
    """Keys every algorithm has.

    Attributes:
        name: registry key (``edgesched.algos.list_algorithms()``).
        variant: label of a configuration variant (an ablation, a tuned setting): records
            name the entry ``<name>-<variant>`` so it gets its own leaderboard row.
    """

    name: str = MISSING
    variant: str = ""

    #: keys that may default to ``None``, meaning "what suits the scenario", and the
    #: function ``(value, sim_config, name)`` that resolves each (``team_reward_for``,
    #: ``pointer_clip_for``)
    scenario_defaults: ClassVar[dict[str, Callable[[Any, Any, str], Any]]] = {}

    def for_scenario(self, sim_config: Any) -> AlgorithmConfig:
        """These settings with every scenario-dependent default resolved for ``sim_config``.

        A key of :attr:`scenario_defaults` left at ``None`` is resolved by its function. The
        trainer resolves it from the scenario it is built for, and provenance compares
        stored and default settings resolved the same way.

        Args:
            sim_config: the scenario's :class:`~edgesched.envs.config.SimConfig`, or
                ``None`` when unknown (then a ``None`` default stays ``None``).
        """
        if sim_config is None:
            return self
        resolved = {
            key: resolve(None, sim_config, f"algo.{key}")
            for key, resolve in self.scenario_defaults.items()
            if getattr(self, key) is None
        }
        return dataclasses.replace(self, **resolved) if resolved else self

    def inert_keys(self, shield: str) -> frozenset[str]:
        """Hyperparameters that cannot change training under these settings and ``shield``.

        Provenance does not report a stored value of one of them that differs from today's
        default (:func:`edgesched.leaderboard.provenance.algo_changes`). None by default.
        """
        return frozenset()


@dataclass
class PPOConfig(AlgorithmConfig):
    """Hyperparameters of the PPO family (shared by every on-policy learner here).

    Attributes:
        lr: Adam learning rate.
        gamma: discount per slot.
        gae_lambda: GAE lambda.
        clip: PPO ratio clip.
        epochs: optimisation epochs per update.
        minibatches: minibatches per epoch.
        vf_coef: value-loss weight.
        ent_coef_start: entropy bonus at the first update.
        ent_coef_end: entropy bonus at the last update (linear schedule).
        max_grad_norm: gradient clipping norm.
        hidden: MLP hidden sizes of actor and critic.
        value_norm: normalize value targets with running statistics (PopArt-style).
        collision_penalty: reward penalty per agent whose *proposed* placement took part in
            an action collision (SROLE's learner signal; needs a shield in the loop).
        anneal_lr: let the learning rate fall linearly from ``lr`` to 0 over the budget
            (CleanRL's ``anneal_lr``); off by default, as every committed run trained.
        target_kl: stop an update's epochs after the first whose mean approximate KL
            exceeds it (CleanRL's ``target_kl``); 0 never stops early (the default).
    """

    lr: float = 5e-4
    gamma: float = 0.99
    gae_lambda: float = 0.95
    clip: float = 0.2
    epochs: int = 4
    minibatches: int = 4
    vf_coef: float = 0.5
    ent_coef_start: float = 0.02
    ent_coef_end: float = 0.002
    max_grad_norm: float = 0.5
    hidden: list[int] = field(default_factory=lambda: [64, 64])
    value_norm: bool = True
    collision_penalty: float = 0.0
    anneal_lr: bool = False
    target_kl: float = 0.0


def config_keys(config_class: type) -> tuple[str, ...]:
    """The keys of an algorithm config class, ``name`` first and ``variant`` last."""
    keys = [f.name for f in fields(config_class) if f.name not in ("name", "variant")]
    return ("name", *keys, "variant")


# ------------------------------------------------------------------------------ registry
TrainerFactory = Callable[[Any, "EnvSpec", int, str, dict[str, Any]], Trainer]
"""``(config, spec, seed, shield, shield_kwargs) -> Trainer``."""


@dataclass(frozen=True)
class AlgorithmEntry:
    """A registered learned scheduler: how to build it and what it can do.

    Attributes:
        name: registry key, also ``conf/algo/<name>.yaml`` and ``algo.name``.
        factory: ``(config, spec, seed, shield, shield_kwargs) -> Trainer``; imports torch
            and the trainer module only when called.
        config_class: its hyperparameters (a subclass of :class:`AlgorithmConfig`), stored in
            Hydra's ConfigStore as ``schema/algo/<name>``.
        summary: one line for listings.
        needs_shield: trains and evaluates only with a shield in the loop (``srole``).
        accepts_shield: may run with a shield at all; False for algorithms whose decisions
            cannot collide or which resolve conflicts themselves.
        shield_note: why a shield is needed or refused (shown in the error).
        needs_graph_view: reads the heterogeneous graph view (``act(..., graphs=[g])``).
        own_view: evaluates itself (:class:`OwnViewTrainer`), e.g. ``dqn_central`` on the
            central view, ``rlpto`` with its own controllers; otherwise it is evaluated
            through the multi-agent view (:class:`SharedViewTrainer`).
        central_head: one decision per env step (a cluster head) instead of one per agent;
            the metrics' ``agent_decisions`` count that.
        on_policy: learns from the rollouts it just collected (PPO) rather than a replay
            buffer (DQN: its ``learning_starts`` must fit in a smoke budget).
        eval_sampled: evaluated with its sampled policy (:class:`SampledTrainer`), its
            draws seeded from each held-out episode's workload seed.
        uses_budget: told the run's total env steps before training
            (:class:`BudgetedTrainer`).
    """

    name: str
    factory: TrainerFactory
    config_class: type[AlgorithmConfig]
    summary: str = ""
    needs_shield: bool = False
    accepts_shield: bool = True
    shield_note: str = ""
    needs_graph_view: bool = False
    own_view: bool = False
    central_head: bool = False
    on_policy: bool = True
    eval_sampled: bool = False
    uses_budget: bool = False

    def __post_init__(self) -> None:
        if self.needs_shield and not self.accepts_shield:
            raise ValueError(
                f"algorithm {self.name!r}: needs_shield=True with accepts_shield=False; an "
                "algorithm that needs a shield accepts one"
            )
        if not (
            isinstance(self.config_class, type) and issubclass(self.config_class, AlgorithmConfig)
        ):
            raise TypeError(
                f"algorithm {self.name!r}: config_class={self.config_class!r} is not a "
                "subclass of edgesched.algos.base.AlgorithmConfig"
            )

    @property
    def protocols(self) -> tuple[type, ...]:
        """The protocols its trainer implements, derived from the flags."""
        out: list[type] = [OwnViewTrainer if self.own_view else SharedViewTrainer]
        if self.eval_sampled:
            out.append(SampledTrainer)
        if self.uses_budget:
            out.append(BudgetedTrainer)
        return tuple(out)

    @property
    def keys(self) -> tuple[str, ...]:
        """Its hyperparameter keys, ``name`` first and ``variant`` last."""
        return config_keys(self.config_class)

    def shield_error(self, shield: str, registered: Sequence[str] = ()) -> str | None:
        """Why ``shield`` cannot run with this algorithm, or None when it can.

        Args:
            shield: a registered shield name (``none`` for no shield).
            registered: the registered shields, to name the allowed ones in the message.
        """
        why = f" ({self.shield_note})" if self.shield_note else ""
        if self.needs_shield and shield == "none":
            real = [s for s in registered if s != "none"] or ["<a registered shield>"]
            use = " or ".join(f"shield={s}" for s in real)
            return f"{self.name} needs a shield in the loop{why}; use {use}"
        if not self.accepts_shield and shield != "none":
            return f"{self.name} takes no shield{why}; use shield=none"
        return None

    def shields(self, registered: list[str]) -> list[str]:
        """The shields of ``registered`` it runs with (the test matrix)."""
        return [s for s in registered if self.shield_error(s, registered) is None]

    def capabilities(self, registered: list[str]) -> str:
        """Its flags in words, for listings and ``--help`` (``registered``: the shields)."""
        shields = ", ".join(self.shields(registered))
        need = "needs a shield" if self.needs_shield else "shield optional"
        if not self.accepts_shield:
            need = "takes no shield"
        parts = [f"shield={shields} ({need}{'; ' + self.shield_note if self.shield_note else ''})"]
        if self.needs_graph_view:
            parts.append("reads the graph view")
        parts.append(
            "evaluates itself (own view)" if self.own_view else "acts on the multi-agent view"
        )
        if self.central_head:
            parts.append("one cluster-head decision per env step")
        parts.append("on-policy" if self.on_policy else "off-policy (replay buffer)")
        if self.eval_sampled:
            parts.append("evaluated with its sampled policy")
        if self.uses_budget:
            parts.append("schedules by the training budget")
        return "; ".join(parts)


__all__ = [
    "AlgorithmConfig",
    "AlgorithmEntry",
    "BudgetedTrainer",
    "OwnViewTrainer",
    "PPOConfig",
    "SampledTrainer",
    "SharedViewTrainer",
    "Trainer",
    "TrainerFactory",
    "config_keys",
    "missing_members",
    "protocol_members",
    "team_reward_for",
]
