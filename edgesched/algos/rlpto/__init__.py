"""RLPTO (task-volume forecasting, multi-priority queues, accuracy-aware RL scheduling).

:mod:`~edgesched.algos.rlpto.forecast` holds the forecaster (no torch import until a GRU is
fitted); :mod:`~edgesched.algos.rlpto.trainer` the scheduler (``algo=rlpto``).
"""

from .forecast import VolumeForecaster, mae_rmse, naive_forecasts, validate_series

__all__ = ["VolumeForecaster", "mae_rmse", "naive_forecasts", "validate_series"]
