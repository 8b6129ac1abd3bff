"""RLPTO's placement rule (``algo.placement``): which baseline places, and what old configs keep."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("statsmodels")
from omegaconf import OmegaConf

from edgesched.algos import RLPTO_PLACEMENTS, config_from_dict, make_trainer
from edgesched.algos.rlpto.trainer import RLPTOTrainer
from edgesched.baselines import make_baseline
from edgesched.envs import EdgeClusterSim, make_config
from edgesched.experiment.schema import AlgoConfig
from edgesched.policy import EnvSpec


def _trainer(**kw) -> RLPTOTrainer:
    cfg = OmegaConf.structured(AlgoConfig(name="rlpto", hidden=[16, 16], **kw))
    return RLPTOTrainer(cfg, EnvSpec.of(EdgeClusterSim(make_config("edge10"))), seed=0)


def test_the_default_places_locally_first_and_old_configs_keep_least_loaded():
    assert type(_trainer().placer).__name__ == "MinAllocScheduler"
    old = config_from_dict({"name": "rlpto"})  # a policy file from before the option
    assert old.placement == "least_loaded"
    spec = EnvSpec.of(EdgeClusterSim(make_config("edge10")))
    assert type(make_trainer("rlpto", old, spec, 0, "none", {}).placer).__name__ == (
        "LeastLoadedScheduler"
    )


@pytest.mark.parametrize("placement", RLPTO_PLACEMENTS)
def test_each_placement_places_with_its_baseline(placement):
    tr = _trainer(placement=placement)
    assert type(tr.placer) is type(make_baseline(placement, tr.spec))
    sim = EdgeClusterSim(make_config("edge10"))
    sim.reset(seed=3)
    placed = 0
    for _ in range(40):
        act = tr.placer.act(sim.obs, sim.mask, None)
        placed += int((act > 0).sum())  # placement actions are positive (view.decode)
        sim.step(act)
    assert placed > 0


def test_the_placement_changes_what_rlpto_does():
    """Evaluated on the same workloads, the two rules give different episodes (a regression
    that ignored the option would make them equal)."""
    out = {
        p: _trainer(placement=p).evaluate("edge10", {"max_slots": 80}, [10000], 1)["summary"]
        for p in ("least_loaded", "min_alloc")
    }
    assert out["least_loaded"]["jct_mean"] != out["min_alloc"]["jct_mean"]
