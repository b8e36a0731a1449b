"""Uncertainty quantification for agent sessions: a confidence per step, and what to do about it.

Why: an agent that is unsure should not
silently act as if it were sure. Each step gets a confidence in [0, 1]; the session keeps a
belief state across steps; a three-tier ladder turns the confidence into an action.

Pipeline for one model response (`estimator.UncertaintyEstimator.observe_llm_response`),
"dual-process":

* System 1 (fast, always; `signals`, `fusion`):

  1. Verbalized confidence: what the response itself says ("Confidence: 85%") — see
     `parse_verbalized_confidence`. Nothing found: `default_verbalized` (0.5, "no information").
  2. P(True), when `UncertaintyPolicy.enable_p_true` and a model is given: one follow-up call
     asking the model how likely its answer is correct (`P_TRUE_PROMPT`).
  3. Calibrated fusion. Both signals are over-confident, so each is shrunk by its calibration
     bias, then they are blended::

         calibrated(x, bias) = x * (1 - bias)
         fused = (wv * calibrated(verbalized, 0.25) + wp * calibrated(p_true, 0.10)) / (wv + wp)
               with wv = 0.4, wp = 0.6 (they sum to 1, so the division changes nothing at defaults)
         fused = calibrated(verbalized, 0.25)       when P(True) did not run

     Consequence, by design: verbalized confidence alone is capped at 0.75, so a session that
     never runs P(True) cannot stay at LOW uncertainty for long (a model's stated confidence is
     a weak signal on its own: expected calibration errors of 0.377 and more are measured).

* System 2 (slow, opt-in with `enable_semantic_sampling`; `sampling`): when the fused confidence
  lies in the trigger zone ``0.50 <= fused <= 0.72`` (both ends included), the prompt is
  re-sampled at temperature `SAMPLING_TEMPERATURE`: 2 samples first; if their word-set Jaccard
  similarity is >= 0.60 sampling stops early, otherwise it extends to 5. Samples are clustered
  greedily (a sample joins the first cluster whose first member it matches with Jaccard >= 0.40),
  and::

         semantic = 1 - H(cluster sizes) / log2(n_samples)     (Shannon entropy, base 2)
         fused    = min(fused, semantic)                       (pessimistic fusion)

Propagation through prior steps (`propagation`; SAUP-style: a step's weight depends on its
type, because a decision cascades further than a memory read)::

    cumulative(0) = 1.0                       (no evidence of doubt before the first step)
    propagated(t) = w(type) * fused(t) + (1 - w(type)) * cumulative(t - 1)
    cumulative(t) = propagated(t)
    w: decision 0.70, llm_call 0.55, tool_call 0.45, memory_read 0.35

Unrolled, a step's confidence is a weighted average of every earlier step's fused confidence
with geometrically decaying weights, so one unsure step is not erased by the next confident
one. Because of the prior, a single first step cannot fall below ``1 - w`` (0.45 for an
`llm_call`: HIGH, a pause), so an ABORT needs doubt sustained over steps (or a `decision`).

Classification of the propagated confidence (`policy`; each boundary belongs to the more
confident tier)::

    c >= 0.80 -> LOW       -> PROCEED
    c >= 0.60 -> MEDIUM    -> PROCEED_WITH_LOG  (PAUSE_FOR_HUMAN before an irreversible tool)
    c >= 0.40 -> HIGH      -> PAUSE_FOR_HUMAN   (System-2 reflection flagged on model steps)
    c <  0.40 -> CRITICAL  -> ABORT             (the caller raises `aborts.UncertaintyAbort`)

Confidences are clamped to [0, 1] and rounded to 12 decimal places (`confidence`), so that
worked numbers that are exact on paper (0.4 * 0.75 + 0.6 * 0.9 ...) land exactly on a threshold
instead of a float's width below it.

What is recorded of each step and of the session is in `belief`; the model is reached through
`model` (`ConfidenceModel`, see its docstring for an adapter over `agora.llm.ModelClient`).

Everything here is pure: no Dapr, no network, deterministic. Each name is imported from the
module that holds its idea (`agora.core.uncertainty.estimator`...); this package exports
nothing itself.
"""

__all__: list[str] = []
