"""RLPTO (task-volume forecasting, multi-priority queues, accuracy-aware RL scheduling).

Only the forecaster is implemented so far: :mod:`edgesched.algos.rlpto.forecast`.
"""

from .forecast import VolumeForecaster, mae_rmse, naive_forecasts, validate_series

__all__ = ["VolumeForecaster", "mae_rmse", "naive_forecasts", "validate_series"]
