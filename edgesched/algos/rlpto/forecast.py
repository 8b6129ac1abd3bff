"""Task-volume forecasting for RLPTO: ARIMA + GRU, combined by recent validation error.

RLPTO predicts how many tasks arrive per time window and feeds the forecast to its
scheduler. :class:`VolumeForecaster` does this for any series of non-negative counts (the
arrival history a scheduler has observed, or a trace's hourly counts):

* **ARIMA** (statsmodels ``ARIMA``) of order ``arima_order`` on ``log1p`` counts, with
  ``fourier_terms`` daily sine/cosine pairs as regressors (a seasonal ARIMA at period 24
  costs minutes to fit on months of hourly data; Fourier regressors give the daily shape
  for the price of a few coefficients).
* **GRU** (torch) reading the last ``window`` ``log1p`` counts, trained to predict the next.
* **Combination**: at every step, each model's weight is proportional to the inverse of its
  mean absolute error over the ``recent`` preceding one-step forecasts (equal weights until
  errors exist). Recent errors rather than a fixed split, so the weights follow changes of
  regime.
* **Naive baselines** for comparison: last value, moving average over ``season``, and the
  seasonal naive forecast (the value one ``season`` ago).

All forecasts are one step ahead with parameters fitted once on the history given to
:meth:`VolumeForecaster.fit` (rolling evaluation uses the later observations as they
arrive, never to refit). A history too short for a model (fewer than ``min_history`` points
for ARIMA, fewer than ``window + 16`` for the GRU) drops that model and says so in
``fallbacks``; with neither, forecasts fall back to the moving average.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


def validate_series(series, name: str = "series") -> np.ndarray:
    """Return ``series`` as float64, rejecting non-finite or negative counts.

    Raises:
        ValueError: naming the first bad index and value.
    """
    x = np.asarray(series, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {x.shape}")
    bad = ~np.isfinite(x)
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"{name}[{i}] = {float(x[i])}: counts must be finite (no NaN or inf)")
    if (x < 0).any():
        i = int(np.argmax(x < 0))
        raise ValueError(f"{name}[{i}] = {float(x[i])}: counts must be >= 0")
    return x


def naive_forecasts(x: np.ndarray, season: int) -> dict[str, np.ndarray]:
    """One-step forecasts of the naive baselines for every index (NaN where undefined).

    ``out[k][t]`` forecasts ``x[t]`` from ``x[:t]``.
    """
    n = len(x)
    last = np.full(n, np.nan)
    last[1:] = x[:-1]
    csum = np.concatenate([[0.0], np.cumsum(x)])
    ma = np.full(n, np.nan)
    t = np.arange(1, n)
    lo = np.maximum(t - season, 0)
    ma[1:] = (csum[t] - csum[lo]) / (t - lo)
    seasonal = np.full(n, np.nan)
    seasonal[season:] = x[:-season]
    return {"last_value": last, "moving_average": ma, "seasonal_naive": seasonal}


def _fourier(t: np.ndarray, season: int, k: int) -> np.ndarray:
    cols = []
    for j in range(1, k + 1):
        w = 2 * np.pi * j * t / season
        cols += [np.sin(w), np.cos(w)]
    return np.stack(cols, axis=1) if cols else np.zeros((len(t), 0))


@dataclass
class VolumeForecaster:
    """ARIMA + GRU task-volume forecaster (see the module docs).

    Args:
        season: period of the daily cycle in steps (24 for hourly counts).
        arima_order: ``(p, d, q)`` of the ARIMA part.
        fourier_terms: daily harmonics used as ARIMA regressors.
        window: GRU input length.
        hidden: GRU hidden size.
        epochs: GRU training epochs.
        recent: forecasts over which the combination weights' errors are measured.
        min_history: points needed to fit ARIMA.
        seed: seeds the GRU.
    """

    season: int = 24
    arima_order: tuple[int, int, int] = (2, 0, 1)
    fourier_terms: int = 3
    window: int = 48
    hidden: int = 32
    epochs: int = 60
    recent: int = 48
    min_history: int = 48
    seed: int = 0
    fallbacks: list[str] = field(default_factory=list)

    def fit(self, history) -> VolumeForecaster:
        """Fit ARIMA and the GRU on ``history`` (non-negative counts).

        Raises:
            ValueError: NaN, inf or negative counts.
        """
        x = validate_series(history, "history")
        self._n_fit = len(x)
        self.fallbacks = []
        self._arima = None
        self._gru = None
        y = np.log1p(x)
        if len(x) >= self.min_history:
            self._arima = self._fit_arima(y)
        else:
            self.fallbacks.append(
                f"arima: {len(x)} points < min_history={self.min_history}; not used"
            )
        if len(x) >= self.window + 16:
            self._gru = self._fit_gru(y)
        else:
            self.fallbacks.append(f"gru: {len(x)} points < window+16={self.window + 16}; not used")
        return self

    # ------------------------------------------------------------------ models
    def _fit_arima(self, y: np.ndarray):
        import warnings

        from statsmodels.tsa.arima.model import ARIMA

        exog = _fourier(np.arange(len(y)), self.season, self.fourier_terms)
        try:
            with warnings.catch_warnings():
                # convergence chatter of the optimizer; a failed fit raises and falls back
                warnings.simplefilter("ignore")
                return ARIMA(y, exog=exog, order=self.arima_order, trend="c").fit()
        except (ValueError, np.linalg.LinAlgError) as e:
            self.fallbacks.append(f"arima: fit failed ({e}); not used")
            return None

    def _fit_gru(self, y: np.ndarray):
        import torch
        from torch import nn

        torch.manual_seed(self.seed)
        mu, sd = float(y.mean()), float(y.std()) or 1.0
        z = (y - mu) / sd
        w = self.window
        xs = np.lib.stride_tricks.sliding_window_view(z[:-1], w)
        ys = z[w:]
        net = _GRU(self.hidden)
        opt = torch.optim.Adam(net.parameters(), lr=3e-3)
        xt = torch.tensor(xs[:, :, None], dtype=torch.float32)
        yt = torch.tensor(ys, dtype=torch.float32)
        gen = torch.Generator().manual_seed(self.seed)
        for _ in range(self.epochs):
            perm = torch.randperm(len(xt), generator=gen)
            for start in range(0, len(xt), 64):
                idx = perm[start : start + 64]
                loss = nn.functional.mse_loss(net(xt[idx]), yt[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
        net.eval()
        return net, mu, sd

    # ------------------------------------------------------------------ forecasting
    def rolling(self, series) -> dict[str, np.ndarray]:
        """One-step forecasts of every method for every index of ``series``.

        ``series`` starts with the fitted history (its first ``len(history)`` points must be
        that history) and may continue past it; forecasts use the observations before each
        index and the parameters fitted in :meth:`fit`.

        Returns:
            ``{method: (n,) forecasts}`` for ``arima``, ``gru``, ``combined`` and the naive
            baselines (NaN where a method has no forecast).
        """
        x = validate_series(series)
        n = len(x)
        y = np.log1p(x)
        out = naive_forecasts(x, self.season)
        out["arima"] = self._arima_rolling(y) if self._arima is not None else np.full(n, np.nan)
        out["gru"] = self._gru_rolling(y) if self._gru is not None else np.full(n, np.nan)
        out["combined"] = self._combine(x, out["arima"], out["gru"], out["moving_average"])
        return out

    def _arima_rolling(self, y: np.ndarray) -> np.ndarray:
        exog = _fourier(np.arange(len(y)), self.season, self.fourier_terms)
        res = self._arima.apply(y, exog=exog)  # same parameters, filtered over all of y
        pred = np.asarray(res.predict(start=0, end=len(y) - 1))  # one step ahead, in sample
        out = np.expm1(pred)
        out[0] = np.nan
        return np.maximum(out, 0.0)

    def _gru_rolling(self, y: np.ndarray) -> np.ndarray:
        import torch

        net, mu, sd = self._gru
        w = self.window
        out = np.full(len(y), np.nan)
        if len(y) <= w:
            return out
        z = (y - mu) / sd
        xs = np.lib.stride_tricks.sliding_window_view(z[:-1], w)
        with torch.no_grad():
            pred = net(torch.tensor(xs[:, :, None], dtype=torch.float32)).numpy()
        out[w:] = np.maximum(np.expm1(pred * sd + mu), 0.0)
        return out

    def _combine(self, x, arima, gru, fallback) -> np.ndarray:
        preds = np.stack([arima, gru])
        have = ~np.isnan(preds)
        err = np.where(have, np.abs(preds - x[None]), np.nan)
        out = np.full(len(x), np.nan)
        for t in range(1, len(x)):
            ok = have[:, t]
            if not ok.any():
                out[t] = fallback[t]
                continue
            lo = max(0, t - self.recent)
            recent = err[:, lo:t]
            counts = (~np.isnan(recent)).sum(1)
            mae = np.where(counts > 0, np.nansum(recent, 1) / np.maximum(counts, 1), np.nan)
            if ok.all() and np.isfinite(mae).all():
                wts = 1.0 / np.maximum(mae, 1e-9)
            else:
                wts = ok.astype(float)  # equal weights until both have recent errors
            wts = np.where(ok, wts, 0.0)
            out[t] = float(np.dot(wts, np.nan_to_num(preds[:, t])) / wts.sum())
        return out

    def predict_next(self, history) -> float:
        """Forecast of the step after ``history`` (which must start with the fitted one)."""
        x = validate_series(history, "history")
        ext = np.concatenate([x, [x[-1] if len(x) else 0.0]])  # placeholder for the next step
        f = self.rolling(ext)["combined"][-1]
        return float(f) if np.isfinite(f) else float(x[-self.season :].mean() if len(x) else 0.0)


class _GRU:
    """GRU -> linear head; a plain class so torch is imported only when a GRU is fitted."""

    def __new__(cls, hidden: int):
        from torch import nn

        class Net(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.gru = nn.GRU(1, hidden, batch_first=True)
                self.head = nn.Linear(hidden, 1)

            def forward(self, x):
                h, _ = self.gru(x)
                return self.head(h[:, -1]).squeeze(-1)

        return Net()


def mae_rmse(forecast: np.ndarray, actual: np.ndarray, start: int) -> tuple[float, float]:
    """MAE and RMSE of ``forecast`` against ``actual`` over indices ``start:``."""
    f, a = forecast[start:], actual[start:]
    if np.isnan(f).any():
        raise ValueError("forecast has NaN in the evaluated range")
    e = f - a
    return float(np.abs(e).mean()), float(np.sqrt((e**2).mean()))
