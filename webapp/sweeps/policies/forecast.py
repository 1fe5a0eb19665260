"""Forecasting a run's final value from its own noisy points, and the chance that it ends near the best run
(the ``bayes`` policy). Pure functions and one small fold; no numpy, no Django.

The trend model is the saturating curve ScaleRL fits to RL reward curves (Khatri et al., "The Art of Scaling
Reinforcement Learning Compute for LLMs", 2025), R(t) = A - (A - R0) / (1 + (t / t_mid)**B), with the exponent
fixed at B = 1. Then R(t) = R0 + (A - R0) * g(t) with g(t) = t / (t + t_mid): linear in (R0, A) for a fixed
``t_mid``, so for each ``t_mid`` of a small grid (``SHAPES``) the fit is ordinary (weighted) least squares, whose
sums a run updates point by point (``TrendStats``, JSON state) and whose residuals give the run's own noise. The
shapes' forecasts are averaged by how well each fits the sweep's runs (``shape_weights``, ``mix``).

Weights forget old points exponentially (half-life ``half_life`` steps: discounted least squares, Brown 1963;
Harrison & West, "Bayesian Forecasting and Dynamic Models", ch. 3), so a run whose curve turns (collapses, or
blooms late) is forecast from its recent course.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

__all__ = ["SHAPES", "TrendStats", "Forecast", "ShapeFit", "shape_fits", "shape_weights", "mix", "shrink",
           "p_near_best", "normal_cdf", "Z95"]

SHAPES = (0.05, 0.15, 0.4, 1.0)
"""The grid of ``t_mid`` (the step at which a curve is halfway from R0 to A), as fractions of ``max_steps``: from
a curve that saturates within the first steps (0.05) to one still rising almost linearly at the end (1.0)."""

Z95 = 1.959964  # the normal 97.5 % quantile: mean +- Z95 * sd is a 95 % interval


def normal_cdf(x: float) -> float:
    """Phi(x) = (1 + erf(x / sqrt(2))) / 2, the standard normal distribution function."""
    return 0.5 * (1.0 + math.erf(x * 0.7071067811865476))


class TrendStats:
    """The weighted sums of one run's points that the least-squares fits need, updated point by point.

    After points (t_k, y_k), k = 1..n, with weights w_k = 2 ** (-(t_n - t_k) / half_life) (all 1 without a
    half-life), it holds W = sum w, W2 = sum w**2, Sy = sum w*y, Syy = sum w*y**2 and, per shape s of the grid,
    Sg = sum w*g_s(t), Sgg = sum w*g_s(t)**2, Sgy = sum w*g_s(t)*y. Values are taken relative to the first one
    (y = x - x_1), so the sums stay small whatever the metric's scale. ``state()`` / ``load()`` give and put back
    those numbers exactly (JSON keeps a float's shortest repr), so a fold restored from a saved state goes on as
    the fold that saw every point.
    """

    def __init__(self, max_steps: int, half_life: Optional[float]):
        self.t_mids = [max(1e-9, s * max_steps) for s in SHAPES]
        self.decay = 0.5 ** (1.0 / half_life) if half_life else 1.0
        self.last: Optional[int] = None
        self.origin = 0.0
        self.sums = [0.0] * (4 + 3 * len(SHAPES))  # W, W2, Sy, Syy, then (Sg, Sgg, Sgy) per shape

    def add(self, step: int, value: float) -> None:
        s = self.sums
        if self.last is None:
            self.origin = value
        elif self.decay != 1.0:
            d = self.decay ** (step - self.last)
            d2 = d * d
            for i in range(len(s)):
                s[i] *= d2 if i == 1 else d
        self.last = step
        y = value - self.origin
        s[0] += 1.0
        s[1] += 1.0
        s[2] += y
        s[3] += y * y
        for k, t_mid in enumerate(self.t_mids):
            g = step / (step + t_mid)
            j = 4 + 3 * k
            s[j] += g
            s[j + 1] += g * g
            s[j + 2] += g * y

    def state(self) -> list:
        return [self.last, self.origin, list(self.sums)]

    def load(self, state: list) -> None:
        last, origin, sums = state
        self.last = None if last is None else int(last)
        self.origin = float(origin)
        self.sums = [float(x) for x in sums]


@dataclass(frozen=True)
class Forecast:
    """A run's forecast final value: ``mean`` and the predictive ``sd`` of the final (the trend's uncertainty,
    the shape's and the final's own noise), the run's noise ``noise_sd`` (residual sd of one point) and
    ``own_var``, the part of sd**2 that is the final's own noise (the mean of its last points scatters around the
    run's expected final whatever anyone knows: ``shrink`` leaves it out of the pooling)."""

    mean: float
    sd: float
    noise_sd: float
    own_var: float = 0.0

    @property
    def ci(self) -> tuple[float, float]:
        """The 95 % predictive interval mean +- 1.96 sd."""
        return self.mean - Z95 * self.sd, self.mean + Z95 * self.sd


@dataclass(frozen=True)
class ShapeFit:
    """One shape's least-squares trend of one run: its log profile likelihood, the forecast final's mean and
    variance, the noise variance of one point, and the final's own noise variance (part of ``var``)."""

    log_likelihood: float
    mean: float
    var: float
    noise_var: float
    final_var: float = 0.0


def shape_fits(stats: TrendStats, horizon: int, final_points: int) -> Optional[list[Optional[ShapeFit]]]:
    """Per shape of the grid, the least-squares trend y = a + b * g(t) and its Gaussian predictive distribution
    of the final value (the mean of ``final_points`` points) at ``horizon``; None for a shape whose g hardly
    varies over the points, and None for all when they cannot fit a line with residuals (effective n <= 3).

    With weighted means g_bar = Sg/W, y_bar = Sy/W, Sxx = Sgg - W g_bar**2, Sxy = Sgy - W g_bar y_bar:
    b = Sxy / Sxx, SSE = (Syy - W y_bar**2) - b Sxy; with the effective number of points n = W**2 / W2 (Kish),
    the noise variance s2 = SSE / W * n / (n - 2), and at g* = g(horizon)

        m = y_bar + b (g* - g_bar),   v = s2 * (1/n + (g* - g_bar)**2 / (Sxx n / W)) + s2 / final_points,

    the textbook variance of a regression line's value at g* (Draper & Smith, "Applied Regression Analysis",
    §1.4; exact for unit weights) plus the final's own noise; log likelihood -n/2 log SSE (the Gaussian profile
    likelihood, sigma maximised out).
    """
    w, w2, sy, syy = stats.sums[:4]
    if w <= 0.0 or w * w <= 3.0 * w2:
        return None
    n = w * w / w2
    y_bar = sy / w
    syy_c = max(syy - w * y_bar * y_bar, 0.0)
    fits: list[Optional[ShapeFit]] = []
    for k, t_mid in enumerate(stats.t_mids):
        sg, sgg, sgy = stats.sums[4 + 3 * k: 7 + 3 * k]
        g_bar = sg / w
        sxx = sgg - w * g_bar * g_bar
        if sxx <= 1e-12 * w:
            fits.append(None)  # the points' g hardly differ: no trend can be told from them
            continue
        sxy = sgy - w * g_bar * y_bar
        b = sxy / sxx
        sse = max(syy_c - b * sxy, 1e-12 * w)
        s2 = sse / w * n / (n - 2.0)
        g_star = horizon / (horizon + t_mid)
        var = s2 * (1.0 / n + (g_star - g_bar) ** 2 / (sxx * n / w) + 1.0 / final_points)
        fits.append(ShapeFit(-0.5 * n * math.log(sse), stats.origin + y_bar + b * (g_star - g_bar), var, s2,
                             s2 / final_points))
    return fits if any(f is not None for f in fits) else None


def shape_weights(log_likelihoods: Sequence[float]) -> list[float]:
    """Posterior weights of the shapes under a flat prior: w_k = exp(L_k) / sum exp(L_j) (Bayesian model averaging,
    Hoeting et al., Statistical Science 1999). The policy sums L_k over the sweep's runs: seeds of one config
    follow one curve shape, so every run's points inform it, not one run's first few."""
    top = max(log_likelihoods)
    weights = [math.exp(x - top) for x in log_likelihoods]
    total = sum(weights)
    return [x / total for x in weights]


def mix(fits: Sequence[Optional[ShapeFit]], weights: Sequence[float], drift_var: float = 0.0) -> Forecast:
    """The shapes' forecasts averaged, moment-matched to one Gaussian: mean = sum w m,
    var = sum w (v + m**2) - mean**2 (the mixture's moments; a shape without a fit is left out, the weights of
    the others renormalised). Which shape a run follows is uncertain, and the shapes part far ahead: that spread
    enters the interval. ``drift_var`` is added to the variance: what no shape of the grid foresees (the policy's
    ``drift``: a random walk of the level over the steps left, drift**2 * (T - t) / T)."""
    pairs = [(x, f) for x, f in zip(weights, fits) if f is not None]
    total = sum(x for x, _ in pairs) or 1.0
    if total <= 0.0:
        pairs, total = [(1.0, f) for _, f in pairs], float(len(pairs))
    mean = sum(x * f.mean for x, f in pairs) / total
    var = max(sum(x * (f.var + f.mean ** 2) for x, f in pairs) / total - mean * mean, 0.0) + drift_var
    noise = sum(x * f.noise_var for x, f in pairs) / total
    own = sum(x * f.final_var for x, f in pairs) / total
    return Forecast(mean=mean, sd=math.sqrt(var), noise_sd=math.sqrt(noise), own_var=min(own, var))


def shrink(forecasts: dict) -> dict:
    """Empirical-Bayes forecasts: the seeds of one config draw their true finals from one distribution, so each
    run's forecast is pulled toward the others' as far as it is uncertain (Efron & Morris, "Data analysis using
    Stein's estimator and its generalizations", JASA 1975).

    Model: theta_i ~ N(mu, tau2), m_i | theta_i ~ N(theta_i, v_i) (theta_i: a run's expected final; m_i its
    forecast mean; v_i = sd_i**2 - own_i the variance of that estimate, its forecast variance less the final's
    own noise ``own_var``, which is no uncertainty about theta_i and is added back to the result). mu and tau2 by the DerSimonian-Laird moments (Controlled Clinical Trials 1986): with w_i = 1/v_i,
    mu_w = sum w m / sum w, Q = sum w (m - mu_w)**2, tau2 = max(0, (Q - (k - 1)) / (sum w - sum w**2 / sum w)),
    mu = sum m / (v + tau2) / sum 1 / (v + tau2). Then theta_i | m ~ N(mu + B_i (m_i - mu), B_i v_i + (1 - B_i)**2
    Var(mu)) with B_i = tau2 / (tau2 + v_i) and Var(mu) = 1 / sum 1 / (v + tau2), the uncertainty of mu itself
    (Morris, "Parametric empirical Bayes inference", JASA 1983): without it two runs whose forecasts agree
    would be drawn onto one point with sd 0. The result's variance is that plus own_i. Forecasts that differ less than their own noise say little, and are drawn
    together; a run that is clearly apart (tau2 large against its v_i) keeps its own forecast. ``forecasts``
    maps run -> Forecast; fewer than 2 are returned as they are.
    """
    if len(forecasts) < 2:
        return dict(forecasts)
    v = {run_id: max(f.sd * f.sd - f.own_var, 1e-18) for run_id, f in forecasts.items()}
    w = {run_id: 1.0 / x for run_id, x in v.items()}
    sw = sum(w.values())
    mu_w = sum(w[r] * f.mean for r, f in forecasts.items()) / sw
    q = sum(w[r] * (f.mean - mu_w) ** 2 for r, f in forecasts.items())
    tau2 = max(0.0, (q - (len(forecasts) - 1)) / (sw - sum(x * x for x in w.values()) / sw))
    precision = sum(1.0 / (v[r] + tau2) for r in forecasts)
    mu = sum(f.mean / (v[r] + tau2) for r, f in forecasts.items()) / precision
    mu_var = 1.0 / precision  # mu is estimated from these same runs: its own uncertainty
    shrunk = {}
    for run_id, f in forecasts.items():
        b = tau2 / (tau2 + v[run_id])
        var = b * v[run_id] + (1.0 - b) ** 2 * mu_var + f.own_var
        shrunk[run_id] = Forecast(mean=mu + b * (f.mean - mu), sd=math.sqrt(var), noise_sd=f.noise_sd,
                                  own_var=f.own_var)
    return shrunk


_NODES = 64
_Z = [-6.0 + 12.0 * (k + 0.5) / _NODES for k in range(_NODES)]
_WEIGHTS = [math.exp(-0.5 * z * z) for z in _Z]
_WEIGHTS = [x / sum(_WEIGHTS) for x in _WEIGHTS]  # phi(z) dz, normalised so that no peer gives P = 1


def p_near_best(mean: float, sd: float, peers: Sequence[tuple[float, float]], tolerance: float) -> float:
    """P(X >= max_j Y_j - tolerance) for independent X ~ N(mean, sd**2), Y_j ~ N(m_j, s_j**2) (larger is better):
    the chance that a run's final ends within ``tolerance`` of the best final, itself included. A negative
    ``tolerance`` gives P(X > max_j Y_j + |tolerance|), the chance that the run ends clearly ahead of all the others
    (the ``needed`` criterion: without it none of them would be near-best).

    Conditioning on X = mean + sd * z, the peers fall below X + tolerance independently, so

        P = integral phi(z) * prod_j Phi((mean + sd z + tolerance - m_j) / s_j) dz,

    a one-dimensional integral taken exactly by the midpoint rule on 64 nodes over z in [-6, 6] (the tails
    beyond weigh < 2e-9), instead of Monte Carlo draws: no sampling noise, the same number on every replay. The
    Gaussian forecasts are independent because seeds are (Clark, "The greatest of a finite set of random
    variables", Operations Research 1961, takes the same product form). ``sd`` 0 is treated as 1e-12.
    """
    sd = max(sd, 1e-12)
    peers = [(m, max(s, 1e-12)) for m, s in peers]
    lowest = mean - 6.0 * sd + tolerance
    # a peer that stays below X + tolerance even at z = -6 (by 8 of its sds) multiplies by 1: skip it
    peers = [(m, s) for m, s in peers if (lowest - m) / s < 8.0]
    total = 0.0
    for z, weight in zip(_Z, _WEIGHTS):
        x = mean + sd * z + tolerance
        product = weight
        for m, s in peers:
            product *= normal_cdf((x - m) / s)
            if product < 1e-300:
                break
        total += product
    return min(1.0, total)
