"""Calibrated fusion of the System-1 signals into one step's confidence. Both signals are
over-confident, so each is shrunk by its calibration bias, then they are blended::

    calibrated(x, bias) = x * (1 - bias)
    fused = (wv * calibrated(verbalized, 0.25) + wp * calibrated(p_true, 0.10)) / (wv + wp)
          with wv = 0.4, wp = 0.6 (they sum to 1, so the division changes nothing at defaults)
    fused = calibrated(verbalized, 0.25)       when P(True) did not run

Consequence, by design: verbalized confidence alone is capped at 0.75, so a session that never
runs P(True) cannot stay at LOW uncertainty for long (a model's stated confidence is a weak
signal on its own: expected calibration errors of 0.377 and more are measured)."""

from __future__ import annotations

from agora.core.uncertainty.confidence import unit

__all__ = [
    "P_TRUE_CALIBRATION_BIAS",
    "P_TRUE_WEIGHT",
    "VERBALIZED_CALIBRATION_BIAS",
    "VERBALIZED_WEIGHT",
    "calibrate",
    "fuse",
]

VERBALIZED_WEIGHT = 0.4
P_TRUE_WEIGHT = 0.6
VERBALIZED_CALIBRATION_BIAS = 0.25
P_TRUE_CALIBRATION_BIAS = 0.10


def calibrate(raw: float, bias: float) -> float:
    """ECE correction for an over-confident signal: ``raw * (1 - bias)``, within [0, 1]."""
    return unit(raw * (1.0 - bias))


def fuse(
    verbalized: float,
    p_true: float | None = None,
    *,
    verbalized_weight: float = VERBALIZED_WEIGHT,
    p_true_weight: float = P_TRUE_WEIGHT,
    verbalized_calibration_bias: float = VERBALIZED_CALIBRATION_BIAS,
    p_true_calibration_bias: float = P_TRUE_CALIBRATION_BIAS,
) -> float:
    """Calibrated weighted fusion of the raw signals; `p_true` None (or -1.0) = not run, and so
    is a P(True) of weight 0: the calibrated verbalized confidence alone."""
    calibrated_verbalized = calibrate(verbalized, verbalized_calibration_bias)
    if p_true is None or p_true < 0.0 or p_true_weight == 0.0:
        return calibrated_verbalized
    calibrated_p_true = calibrate(p_true, p_true_calibration_bias)
    total = verbalized_weight + p_true_weight
    return unit((verbalized_weight * calibrated_verbalized + p_true_weight * calibrated_p_true) / total)
