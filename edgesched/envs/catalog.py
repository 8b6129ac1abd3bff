"""Hardware tiers and the model catalog.

The measured figures (throughput per worker, GPU scaling exponent, convergence curves,
straggler distribution, accelerator speed ratios) come from ``data/profiles.json``, which
``scripts/derive_profiles.py`` computes from the real public data sets:

* Pollux artifact (Qiao et al., OSDI'21; github.com/petuum/adaptdl, osdi21-artifact,
  Apache-2.0): step times per placement and validation curves of six DL models on T4 GPUs.
* Gavel (Narayanan et al., OSDI'20; github.com/stanford-futuredata/gavel, MIT): throughput of
  DL models on K80/P100/V100.
* Alibaba PAI GPU trace 2020 (Weng et al., NSDI'22; mini-batch times from Xiao et al.,
  AntMan, OSDI'20; CC BY 4.0): per-worker mini-batch times, for stragglers.

What the data does not contain is declared below, with its reason: minimum per-worker demands,
CPU sensitivity (none of the data sets varies CPU) and model sizes (public parameter counts).
No data set was measured on edge devices; the tier speed factors say how datacenter
profiles are scaled to edge hardware.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

RESOURCES = ("cpu", "gpu", "mem")


@dataclass(frozen=True)
class HardwareTier:
    """One class of edge hardware.

    Attributes:
        name: registry key.
        cpu: CPU cores.
        gpu: GPUs.
        mem: memory in GiB.
        speed: compute speed relative to one NVIDIA T4 (the Pollux reference GPU).
        description: what real device the tier stands for.
    """

    name: str
    cpu: float
    gpu: float
    mem: float
    speed: float
    description: str


def _tier_speeds() -> dict[str, float]:
    """Speed factors of the datacenter-class tiers, from Gavel's measured K80/P100/V100 ratios.

    We equate the T4 (Pollux's reference) with the P100: both deliver about the same
    FP32 training throughput on these models. This is an assumption, stated here.
    """
    g = load_profiles()["gavel_tier_speed"]
    p100 = g["p100"]
    return {"k80": g["k80"] / p100, "v100": g["v100"] / p100}


@lru_cache(maxsize=1)
def hardware_tiers() -> dict[str, HardwareTier]:
    """Return the declared hardware-tier catalog, keyed by name.

    Edge boards have no public training profile in our data; the Jetson-class factor (1/6 of a
    T4) is an assumption from vendor FP16 throughput ratios and is stated as such.
    """
    s = _tier_speeds()
    tiers = [
        HardwareTier("jetson", 8, 1, 32, 1.0 / 6.0, "Jetson AGX-class board (8 cores, 1 iGPU)"),
        HardwareTier("small_server", 16, 2, 64, s["k80"], "small edge server, 2 K80-class GPUs"),
        HardwareTier("gpu_server", 32, 4, 128, 1.0, "GPU edge server, 4 T4 GPUs"),
        HardwareTier("v100_server", 48, 8, 256, s["v100"], "large edge server, 8 V100 GPUs"),
    ]
    return {t.name: t for t in tiers}


# Declared per-model requirements that the public data does not measure.
#   min_cpu/min_gpu/min_mem: minimum per-worker demand (cores, GPUs, GiB) to run at all.
#   cpu_per_gpu (kappa) and cpu_gamma: data-loading CPU needed per GPU and how sharply
#     throughput drops when starved, thr ~ min(1, c / (kappa g)) ** gamma. TapFinger measured
#     that CPU-starved GPU jobs slow down; the figures are assumptions.
#   model_mb: size of the gradients exchanged per iteration, from public parameter counts
#     (ResNet-18 11.7M, ResNet-50 25.6M, BERT-base 110M, DeepSpeech2 ~38M, NeuMF ~5M,
#     YOLOv3 62M) in FP32.
MODEL_REQUIREMENTS: dict[str, dict[str, float]] = {
    "cifar10": dict(min_cpu=2, min_gpu=1, min_mem=4, cpu_per_gpu=2, cpu_gamma=0.5, model_mb=45),
    "imagenet": dict(min_cpu=4, min_gpu=1, min_mem=16, cpu_per_gpu=4, cpu_gamma=0.8, model_mb=100),
    "bert": dict(min_cpu=2, min_gpu=1, min_mem=12, cpu_per_gpu=1, cpu_gamma=0.2, model_mb=440),
    "deepspeech2": dict(
        min_cpu=4, min_gpu=1, min_mem=8, cpu_per_gpu=3, cpu_gamma=0.6, model_mb=150
    ),
    "ncf": dict(min_cpu=2, min_gpu=1, min_mem=4, cpu_per_gpu=1, cpu_gamma=0.3, model_mb=20),
    "yolov3": dict(min_cpu=4, min_gpu=1, min_mem=12, cpu_per_gpu=3, cpu_gamma=0.6, model_mb=240),
}


@dataclass(frozen=True)
class ModelCatalog:
    """Per-model figures as parallel numpy arrays (index = model id), for vectorized lookups.

    Attributes:
        names: model names, in index order.
        base_tput: samples/s of one worker with one T4 GPU at ``local_bsz``.
        local_bsz: per-worker batch size.
        gpu_alpha: throughput of g GPUs in one worker grows as ``g ** gpu_alpha``.
        min_demand: (M, 3) minimum per-worker (cpu, gpu, mem).
        cpu_per_gpu: data-loading cores per GPU before CPU starvation.
        cpu_gamma: exponent of the CPU-starvation slowdown.
        model_mb: megabytes exchanged per synchronization.
        conv_k: shape of the convergence curve q(x) = 1 - exp(-(x / tau) ** k).
        q90_factor: (-ln 0.1) ** (1 / k), so tau = x90 / q90_factor.
        metric: Pollux's recorded metric name per model.
        metric_start: metric at the start of training.
        metric_best: best metric reached (maps normalized quality 1.0 back to the metric).
    """

    names: tuple[str, ...]
    base_tput: np.ndarray
    local_bsz: np.ndarray
    gpu_alpha: np.ndarray
    min_demand: np.ndarray
    cpu_per_gpu: np.ndarray
    cpu_gamma: np.ndarray
    model_mb: np.ndarray
    conv_k: np.ndarray
    q90_factor: np.ndarray
    metric: tuple[str, ...]
    metric_start: np.ndarray
    metric_best: np.ndarray

    def index(self, name: str) -> int:
        """Return the model id of ``name``; raise ``KeyError`` listing the catalog."""
        try:
            return self.names.index(name)
        except ValueError:
            raise KeyError(
                f"unknown model {name!r}; the catalog holds {list(self.names)}"
            ) from None

    def metric_at(self, model: np.ndarray, quality: np.ndarray) -> np.ndarray:
        """Map normalized quality in [0, 1] back to each model's own metric."""
        start, best = self.metric_start[model], self.metric_best[model]
        return start + quality * (best - start)


@lru_cache(maxsize=1)
def load_profiles() -> dict[str, Any]:
    """Load the committed derived profile table (see module docstring for sources)."""
    text = resources.files("edgesched.envs").joinpath("data/profiles.json").read_text()
    return json.loads(text)


@lru_cache(maxsize=1)
def model_catalog() -> ModelCatalog:
    """Build the model catalog from measured profiles plus declared requirements."""
    prof = load_profiles()["models"]
    names = tuple(sorted(prof))
    missing = set(names) ^ set(MODEL_REQUIREMENTS)
    if missing:
        raise RuntimeError(f"profiles.json and MODEL_REQUIREMENTS disagree on models {missing}")

    def col(src: dict[str, dict[str, Any]], key: str) -> np.ndarray:
        return np.array([float(src[n][key]) for n in names])

    k = col(prof, "conv_k")
    return ModelCatalog(
        names=names,
        base_tput=col(prof, "base_tput"),
        local_bsz=col(prof, "local_bsz"),
        gpu_alpha=col(prof, "gpu_alpha"),
        min_demand=np.stack([col(MODEL_REQUIREMENTS, f"min_{r}") for r in RESOURCES], axis=1),
        cpu_per_gpu=col(MODEL_REQUIREMENTS, "cpu_per_gpu"),
        cpu_gamma=col(MODEL_REQUIREMENTS, "cpu_gamma"),
        model_mb=col(MODEL_REQUIREMENTS, "model_mb"),
        conv_k=k,
        q90_factor=(-np.log(0.1)) ** (1.0 / k),
        metric=tuple(str(prof[n]["metric"]) for n in names),
        metric_start=col(prof, "metric_start"),
        metric_best=col(prof, "metric_best"),
    )


@dataclass(frozen=True)
class StragglerModel:
    """Heavy-tailed per-worker slowdown, fitted from Alibaba PAI mini-batch times.

    A worker is delayed in a slot with probability ``p_delay``; its slowdown is then
    ``1 + excess`` with ``excess`` Lomax(``alpha``, ``scale``) (a shifted Pareto), or log-normal
    when that family fits the data better (``family``).
    """

    family: str
    p_delay: float
    alpha: float
    scale: float
    mu: float
    sigma: float

    def sample(
        self, rng: np.random.Generator, n: int, excess_scale: float, prob_scale: float
    ) -> np.ndarray:
        """Draw ``n`` slowdown factors (>= 1).

        Args:
            rng: the episode's generator.
            n: number of factors.
            excess_scale: multiplies the excess above 1 (0 turns stragglers off).
            prob_scale: multiplies the probability of being delayed.
        """
        if excess_scale == 0.0 or n == 0:
            return np.ones(n)
        p = min(1.0, self.p_delay * prob_scale)
        u = rng.random(n)
        # one uniform per worker: u < p decides the delay, and u / p is again uniform on
        # [0, 1) given the delay, so it drives the excess (half the random draws)
        v = np.minimum(u * (1.0 / p), 1.0 - 1e-12) if p > 0 else u
        if self.family == "pareto":
            excess = self.scale * ((1.0 - v) ** (-1.0 / self.alpha) - 1.0)
        else:
            # the log-normal is fitted to log(r - 1), the excess itself; inverse-CDF draw
            excess = np.exp(self.mu + self.sigma * _norm_ppf(v))
        # A single pathological draw must not freeze a job for the rest of the episode;
        # the data's own maximum bounds the ratio.
        np.minimum(excess, self._max_excess, out=excess)
        excess *= excess_scale
        excess[u >= p] = 0.0
        return 1.0 + excess

    @property
    def _max_excess(self) -> float:
        return float(load_profiles()["straggler"]["quantiles"]["max"]) - 1.0


def _norm_ppf(v: np.ndarray) -> np.ndarray:
    """Standard normal quantile (Acklam's rational approximation, |error| < 1.2e-9).

    numpy has no inverse normal CDF and scipy is not a base dependency.
    """
    a = (
        -3.969683028665376e01,
        2.209460984245205e02,
        -2.759285104469687e02,
        1.383577518672690e02,
        -3.066479806614716e01,
        2.506628277459239e00,
    )
    b = (
        -5.447609879822406e01,
        1.615858368580409e02,
        -1.556989798598866e02,
        6.680131188771972e01,
        -1.328068155288572e01,
    )
    c = (
        -7.784894002430293e-03,
        -3.223964580411365e-01,
        -2.400758277161838e00,
        -2.549732539343734e00,
        4.374664141464968e00,
        2.938163982698783e00,
    )
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00)
    v = np.clip(v, 1e-300, 1 - 1e-16)
    lo = v < 0.02425
    hi = v > 1 - 0.02425
    q = np.where(lo, np.sqrt(-2 * np.log(v)), np.sqrt(-2 * np.log1p(-v)))
    tail = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / (
        (((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1
    )
    r = (v - 0.5) ** 2
    mid = ((((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * (v - 0.5)) / (
        ((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1
    )
    return np.where(lo, tail, np.where(hi, -tail, mid))


@lru_cache(maxsize=1)
def straggler_model() -> StragglerModel:
    """Return the straggler model fitted from the PAI mini-batch times."""
    s = load_profiles()["straggler"]
    return StragglerModel(
        family=str(s["family"]),
        p_delay=1.0 - float(s["p_no_delay"]),
        alpha=float(s["pareto_alpha"]),
        scale=float(s["pareto_scale"]),
        mu=float(s["lognorm_mu"]),
        sigma=float(s["lognorm_sigma"]),
    )
