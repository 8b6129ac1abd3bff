"""Forecasting accuracy of RLPTO's task-volume forecaster (issue 7, part a).

Usage::

    python benchmarks/forecasting.py [--data-dir ../shared/data] [--out benchmarks/results]

Two hourly arrival series:

* **Philly**: submissions per hour of Microsoft's Philly trace (2,614 hours);
* **simulated**: arrivals per hour (60 one-minute slots) of edge50's synthetic workload over
  30 days (seed 0), Poisson with diurnal and burst modulation.

Each is split 70/30; models are fitted on the first 70% and forecast the last 30% one step
ahead (observations are used as they arrive, parameters are not refitted). Prints, and writes
``forecasting.md``, MAE and RMSE of ARIMA, GRU, their recent-error-weighted combination and
the naive baselines. Nothing is asserted here.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from edgesched.algos.rlpto import VolumeForecaster, mae_rmse
from edgesched.envs import EdgeClusterSim, make_config
from edgesched.envs.topology import find_data_dir
from edgesched.envs.trace_scenarios import PHILLY_TRACE
from edgesched.envs.workloads import read_philly

METHODS = ("arima", "gru", "combined", "last_value", "moving_average", "seasonal_naive")


def philly_hourly(data: Path) -> np.ndarray:
    """Submissions per hour from the first submission."""
    t = read_philly(data / PHILLY_TRACE)
    return np.bincount((t.submit // 3600).astype(np.int64)).astype(np.float64)


def simulated_hourly(days: int = 30, seed: int = 0) -> np.ndarray:
    """Arrivals per 60 slots of edge50's workload model over ``days`` days."""
    slots = days * 1440
    sim = EdgeClusterSim(make_config("edge50", arrival_slots=slots, max_slots=slots))
    sim.reset(seed)
    return np.bincount(sim.j_arrival // 60, minlength=days * 24).astype(np.float64)


def evaluate(x: np.ndarray, seed: int) -> tuple[dict[str, tuple[float, float]], float]:
    """MAE/RMSE per method on the last 30%, and the fit time in seconds."""
    split = int(0.7 * len(x))
    t0 = time.perf_counter()
    fc = VolumeForecaster(seed=seed).fit(x[:split])
    fit_s = time.perf_counter() - t0
    out = fc.rolling(x)
    return {m: mae_rmse(out[m], x, split) for m in METHODS}, fit_s


def main() -> None:
    """Run both series and print/write the table."""
    import torch

    torch.set_num_threads(1)
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default="")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = ap.parse_args()
    data = find_data_dir(args.data_dir)
    series = {}
    if data is not None:
        series["Philly (hourly submissions)"] = philly_hourly(data)
    else:
        print("real-data folder not found: Philly skipped (pass --data-dir)")
    series["edge50 simulated (hourly arrivals, 30 days)"] = simulated_hourly()
    lines = [
        "One-step-ahead forecasts on the last 30% of each series (fitted on the first 70%).",
        "",
        "| series | hours | method | MAE | RMSE |",
        "|---|---:|---|---:|---:|",
    ]
    notes = []
    for name, x in series.items():
        res, fit_s = evaluate(x, seed=0)
        for m in METHODS:
            lines.append(f"| {name} | {len(x)} | {m} | {res[m][0]:.2f} | {res[m][1]:.2f} |")
        best = min(res["arima"][0], res["gru"][0])
        gain = 100 * (best - res["combined"][0]) / best
        notes.append(
            f"{name}: combined MAE {res['combined'][0]:.2f} vs better single model "
            f"{best:.2f} ({gain:+.1f}%; target >= +10%); fit {fit_s:.1f} s"
        )
    text = "\n".join(lines + [""] + [f"- {n}" for n in notes]) + "\n"
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "forecasting.md").write_text(text)


if __name__ == "__main__":
    main()
