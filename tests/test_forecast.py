"""RLPTO's task-volume forecaster (issue 7, part a)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("statsmodels")
pytest.importorskip("torch")

from edgesched.algos.rlpto import (
    VolumeForecaster,
    mae_rmse,
    naive_forecasts,
    validate_series,
)

FAST = {"epochs": 8, "window": 24, "recent": 24}


def seasonal_series(days: int = 20, seed: int = 0) -> np.ndarray:
    """Hourly Poisson counts with a strong daily cycle (known pattern)."""
    t = np.arange(days * 24)
    rate = 30 + 20 * np.sin(2 * np.pi * t / 24)
    return np.random.default_rng(seed).poisson(rate).astype(float)


def test_combined_forecast_beats_last_value_on_a_seasonal_series():
    x = seasonal_series()
    split = int(0.7 * len(x))
    out = VolumeForecaster(**FAST).fit(x[:split]).rolling(x)
    combined = mae_rmse(out["combined"], x, split)[0]
    last = mae_rmse(out["last_value"], x, split)[0]
    arima = mae_rmse(out["arima"], x, split)[0]
    assert combined < 0.8 * last
    assert arima < last  # the Fourier regressors capture the daily cycle


def test_short_history_falls_back_instead_of_crashing():
    x = seasonal_series(days=1)[:10]
    fc = VolumeForecaster(**FAST).fit(x)
    assert any(f.startswith("arima") for f in fc.fallbacks)
    assert any(f.startswith("gru") for f in fc.fallbacks)
    out = fc.rolling(x)
    np.testing.assert_allclose(out["combined"][1:], out["moving_average"][1:])
    assert np.isfinite(fc.predict_next(x))
    assert fc.predict_next(x) == pytest.approx(x.mean())


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ([1.0, np.nan, 2.0], r"history\[1\] = nan"),
        ([1.0, 2.0, -3.0], r"history\[2\] = -3.0: counts must be >= 0"),
        ([1.0, np.inf], r"history\[1\] = inf"),
        ([[1.0, 2.0]], "one-dimensional"),
    ],
)
def test_bad_counts_are_rejected_clearly(bad, match):
    with pytest.raises(ValueError, match=match):
        VolumeForecaster(**FAST).fit(bad)
    # the validator names its own argument
    with pytest.raises(ValueError, match=match.replace("history", "series")):
        validate_series(bad)


def test_naive_baselines_are_exact():
    x = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    out = naive_forecasts(x, season=2)
    np.testing.assert_array_equal(out["last_value"][1:], [1, 2, 4, 8])
    np.testing.assert_allclose(out["moving_average"][1:], [1, 1.5, 3, 6])
    np.testing.assert_array_equal(out["seasonal_naive"][2:], [1, 2, 4])
    assert np.isnan(out["last_value"][0]) and np.isnan(out["seasonal_naive"][:2]).all()


def test_combination_weights_follow_recent_errors():
    fc = VolumeForecaster(recent=5)
    x = np.arange(40, dtype=float)
    good = x + 0.1  # always 0.1 off
    bad = x + 3.0  # always 3 off
    good[0] = bad[0] = np.nan  # no forecast for the first step: no error known at t = 1
    out = fc._combine(x, good, bad, np.full(40, np.nan))
    # inverse-MAE weights 10 : 1/3 -> the combination is off by (10*0.1 + 3/3) / (10 + 1/3)
    np.testing.assert_allclose(out[6:] - x[6:], (10 * 0.1 + 1.0) / (10 + 1 / 3), rtol=1e-9)
    # before any error is known, equal weights
    assert out[1] - x[1] == pytest.approx((0.1 + 3.0) / 2)
