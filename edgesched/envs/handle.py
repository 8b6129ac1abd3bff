"""A scenario resolved once: the handle that travels through training and evaluation.

Looking a scenario up by name, applying its overrides and building a simulator to read its
static facts (:class:`~edgesched.policy.EnvSpec`) happens once, in
:func:`resolve_scenario`; the runner, the evaluation harness, the trainers' factories and
the records receive the resulting :class:`ScenarioHandle` instead of the name.

    handle = resolve_scenario("edge50", arrival_rate=0.3)
    handle.id                       # 'edge50-v0', what records store
    handle.config.arrival_rate      # 0.3 (a validated SimConfig)
    handle.spec.num_agents          # 50 (one simulator built on first access, then cached)
    handle.config_with(invalid_action="raise")  # the strict evaluation config
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from .config import SimConfig
from .scenarios import Scenario, get_scenario

if TYPE_CHECKING:
    from edgesched.policy import EnvSpec


@dataclass(frozen=True)
class ScenarioHandle:
    """A registered scenario with its overrides applied, resolved once.

    Attributes:
        scenario: the registry entry.
        overrides: the scenario parameters changed from the registered ones (what records
            store as ``env_overrides``); read-only.
        config: the validated simulator configuration (registered parameters plus
            ``overrides``).
    """

    scenario: Scenario
    overrides: Mapping[str, Any] = field(default_factory=dict)
    config: SimConfig = field(default=None)  # type: ignore[assignment]  # set in __post_init__

    def __post_init__(self) -> None:
        frozen = MappingProxyType(dict(self.overrides))
        object.__setattr__(self, "overrides", frozen)
        if self.config is None:
            object.__setattr__(self, "config", self.scenario.config(**frozen))

    def __reduce__(self) -> tuple[Any, ...]:
        # a mappingproxy does not pickle; rebuild from a plain copy (sweep workers, caches)
        return (ScenarioHandle, (self.scenario, dict(self.overrides), self.config))

    @property
    def name(self) -> str:
        """Registry key, e.g. ``edge50``."""
        return self.scenario.name

    @property
    def id(self) -> str:
        """Versioned id, e.g. ``edge50-v0`` (what records and loggers name)."""
        return self.scenario.id

    @property
    def gym_id(self) -> str:
        """Gymnasium id of the central view, e.g. ``edgesched/Edge50-v0``."""
        return self.scenario.gym_id

    @cached_property
    def spec(self) -> EnvSpec:
        """The multi-agent view's static facts; one simulator is built on first access.

        They depend on the cluster (capacities, neighbourhoods), which only building the
        simulator draws, so the handle builds one lazily and keeps the answer.
        """
        from edgesched.policy import EnvSpec

        from .core import EdgeClusterSim

        return EnvSpec.of(EdgeClusterSim(self.config, scenario_id=self.id))

    def config_with(self, **extra: Any) -> SimConfig:
        """The configuration with ``extra`` parameters on top of :attr:`overrides`.

        For settings that are not part of the scenario's identity (the strict evaluation's
        ``invalid_action``, a training-only ``max_slots`` cap): the handle's own
        :attr:`overrides`, and so the records, stay as they are.

        Raises:
            ConfigError: an unknown or out-of-range parameter, named.
        """
        if not extra:
            return self.config
        return self.scenario.config(**{**self.overrides, **extra})

    def overrides_dict(self) -> dict[str, Any]:
        """:attr:`overrides` as a plain (mutable, JSON-ready) dict."""
        return dict(self.overrides)


def resolve_scenario(name: str | ScenarioHandle, **overrides: Any) -> ScenarioHandle:
    """Look up scenario ``name``, apply ``overrides`` and validate them, once.

    Args:
        name: registered scenario name (``edge50``) or versioned id (``edge50-v0``); a
            handle is returned as it is (then ``overrides`` must be empty).
        **overrides: simulator parameters to change (see :class:`SimConfig`).

    Returns:
        The handle.

    Raises:
        KeyError: unknown scenario, listing the registered ones.
        ConfigError: an unknown or out-of-range parameter, named.
        ValueError: ``name`` is already a handle and ``overrides`` were given.
    """
    if isinstance(name, ScenarioHandle):
        if overrides:
            raise ValueError(
                f"resolve_scenario: name is already the handle of {name.id!r}, so overrides="
                f"{sorted(overrides)} cannot be applied; resolve the scenario name with them"
            )
        return name
    return ScenarioHandle(get_scenario(name), overrides)


def evaluation_config(
    scenario: str | ScenarioHandle, settings: Mapping[str, Any] | None = None
) -> tuple[str, SimConfig]:
    """The versioned id and the configuration an evaluation environment is built with.

    Args:
        scenario: the run's handle, whose overrides stay its identity and ``settings`` go on
            top (the strict evaluation's ``invalid_action``); or a name or versioned id,
            resolved here with ``settings`` as its overrides.
        settings: simulator parameters for this evaluation.

    Raises:
        KeyError: unknown scenario.
        ConfigError: an unknown or out-of-range parameter, named.
    """
    settings = dict(settings or {})
    if isinstance(scenario, ScenarioHandle):
        return scenario.id, scenario.config_with(**settings)
    handle = resolve_scenario(scenario, **settings)
    return handle.id, handle.config


__all__ = ["ScenarioHandle", "evaluation_config", "resolve_scenario"]
