"""Topics: which generators each chapter's quiz draws from, and the deterministic question sets."""

from __future__ import annotations

import random
from typing import Callable

from .builders import english
from .chapters import q_bn_fold, q_group_members, q_instance_contrast, q_ln_accepts, q_rms_value
from .computed import (
    q_batch_independent,
    q_groupnorm_special,
    q_invariance,
    q_num_statistics,
    q_param_shape,
    q_reduced_dims,
    q_state_dict,
    q_which_layer,
)
from .concepts import concept
from .dyt import (
    q_dyt_converted,
    q_dyt_depends,
    q_dyt_params,
    q_dyt_value,
    q_identity_at_init,
    q_qk_bound,
    q_qk_gamma_shape,
)
from .pitfalls import (
    q_autocast_dtype,
    q_btd_without_transpose,
    q_decay_effective_lr,
    q_dropout_shift,
    q_frozen_bn,
    q_momentum_none,
    q_no_decay_group,
    q_padded_mean,
    q_zero_init_block,
)
from .running import (
    q_batch_one,
    q_biased_unbiased,
    q_eps,
    q_keras_momentum,
    q_running_mean,
    q_running_var,
    q_train_eval,
)
from .small_batches import (
    q_agc_factor,
    q_frn_value,
    q_ghost_chunks,
    q_renorm_r,
    q_spectral_sigma,
    q_weight_norm_g,
)
from .speed import q_backward_sweeps, q_intensity, q_passes, q_perfect_bytes, q_variance_formula
from .syncbatchnorm import (
    q_chan_variance,
    q_eval_communication,
    q_local_or_global,
    q_running_count,
    q_sync_numbers,
)
from .training import (
    q_linear_scaling,
    q_prediction_depends_on_batch,
    q_running_after_small_batches,
    q_small_batch_choice,
    q_update_ratio,
    q_values_per_statistic,
)
from .transformer import (
    q_final_norm,
    q_gamma_shape,
    q_ln_stats_btd,
    q_prenorm_position,
    q_rms_saves,
)
from .why import (
    q_bias_before_norm,
    q_grad_scale,
    q_relu_depth,
    q_saturation,
    q_scale_invariance,
    q_weight_norm_growth,
)


def _for(gen, names):
    def g(rng):
        return gen(rng, names)

    g.__name__ = f"{gen.__name__}[{','.join(names) if names else 'all'}]"
    return g


_BN = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d"]
_IN = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]

TOPICS: dict[str, list[Callable]] = {
    "batchnorm": [
        _for(q_num_statistics, _BN),
        _for(q_param_shape, _BN),
        _for(q_reduced_dims, _BN),
        _for(q_train_eval, _BN),
        _for(q_running_var, None),
        _for(q_running_mean, None),
        _for(q_eps, ["BatchNorm1d"]),
        _for(q_batch_one, _BN),
        _for(q_keras_momentum, None),
        _for(q_biased_unbiased, None),
        _for(q_state_dict, _BN),
        _for(q_bn_fold, None),
        concept("running_stats_why"),
        concept("small_batches"),
        concept("affine"),
        concept("eps_purpose"),
    ],
    "layernorm": [
        _for(q_num_statistics, ["LayerNorm"]),
        _for(q_param_shape, ["LayerNorm"]),
        _for(q_reduced_dims, ["LayerNorm"]),
        _for(q_train_eval, ["LayerNorm"]),
        _for(q_eps, ["LayerNorm"]),
        _for(q_batch_one, ["LayerNorm"]),
        _for(q_ln_accepts, None),
        concept("layernorm_transformers"),
        _for(q_state_dict, ["LayerNorm"]),
    ],
    "rmsnorm": [
        _for(q_num_statistics, ["RMSNorm"]),
        _for(q_param_shape, ["RMSNorm"]),
        _for(q_reduced_dims, ["RMSNorm"]),
        _for(q_state_dict, ["RMSNorm"]),
        _for(q_eps, ["RMSNorm"]),
        _for(q_invariance, None),
        _for(q_rms_value, None),
    ],
    "groupnorm": [
        _for(q_num_statistics, ["GroupNorm"]),
        _for(q_param_shape, ["GroupNorm"]),
        _for(q_reduced_dims, ["GroupNorm"]),
        _for(q_train_eval, ["GroupNorm"]),
        _for(q_groupnorm_special, None),
        _for(q_eps, ["GroupNorm"]),
        _for(q_batch_one, ["GroupNorm"]),
        _for(q_group_members, None),
        concept("small_batches"),
    ],
    "instancenorm": [
        _for(q_num_statistics, _IN),
        _for(q_reduced_dims, _IN),
        _for(q_train_eval, _IN),
        _for(q_state_dict, _IN),
        _for(q_param_shape, _IN),
        _for(q_eps, ["InstanceNorm1d"]),
        _for(q_instance_contrast, None),
    ],
    # what why-normalize.ipynb teaches: drift and saturation with depth, scale invariance and the
    # covariate-shift debate (γ, β, ε and the running statistics come in the BatchNorm chapter)
    "why": [
        _for(q_relu_depth, None),
        _for(q_saturation, None),
        _for(q_scale_invariance, None),
        _for(q_grad_scale, None),
        _for(q_weight_norm_growth, None),
        _for(q_bias_before_norm, None),
        concept("covariate_shift"),
        concept("what_helps"),
    ],
    "comparison": [
        _for(q_which_layer, None),
        _for(q_batch_independent, None),
        _for(q_num_statistics, None),
        _for(q_reduced_dims, None),
        _for(q_train_eval, None),
        _for(q_batch_one, None),
        _for(q_invariance, None),
        _for(q_groupnorm_special, None),
    ],
}
# what transformer.ipynb teaches: the norms inside transformer layers (statistics, γ shape, pre-LN,
# final norm)
TOPICS["transformer"] = [
    _for(q_ln_stats_btd, None),
    _for(q_gamma_shape, None),
    _for(q_prenorm_position, None),
    _for(q_final_norm, None),
    _for(q_rms_saves, None),
]
TOPICS["syncbatchnorm"] = [
    _for(q_sync_numbers, None),
    _for(q_chan_variance, None),
    _for(q_running_count, None),
    _for(q_local_or_global, None),
    _for(q_eval_communication, None),
]
# what training.ipynb and pitfalls.ipynb teach (norms.quiz.training, norms.quiz.pitfalls)
TOPICS["training"] = [
    _for(q_values_per_statistic, None),
    _for(q_linear_scaling, None),
    _for(q_update_ratio, None),
    _for(q_prediction_depends_on_batch, None),
    _for(q_small_batch_choice, None),
    _for(q_running_after_small_batches, None),
]
TOPICS["pitfalls"] = [
    _for(q_dropout_shift, None),
    _for(q_frozen_bn, None),
    _for(q_autocast_dtype, None),
    _for(q_padded_mean, None),
    _for(q_btd_without_transpose, None),
    _for(q_momentum_none, None),
    _for(q_decay_effective_lr, None),
    _for(q_no_decay_group, None),
    _for(q_zero_init_block, None),
]
TOPICS["speed"] = [
    _for(q_perfect_bytes, None),
    _for(q_intensity, None),
    _for(q_passes, None),
    _for(q_backward_sweeps, None),
    _for(q_variance_formula, None),
]
TOPICS["running"] = [
    _for(q_running_var, None),
    _for(q_running_mean, None),
    _for(q_keras_momentum, None),
    _for(q_biased_unbiased, None),
    _for(q_train_eval, _BN),
]

# what without-normalization.ipynb and modern-transformers.ipynb teach (norms.quiz.dyt)
TOPICS["without-normalization"] = [
    _for(q_dyt_value, None),
    _for(q_dyt_params, None),
    _for(q_dyt_converted, None),
    _for(q_dyt_depends, None),
]
TOPICS["modern-transformers"] = [
    _for(q_qk_gamma_shape, None),
    _for(q_qk_bound, None),
    _for(q_identity_at_init, None),
]

# what small-batches.ipynb and normalizing-weights.ipynb teach (norms.quiz.small_batches)
TOPICS["small_batches"] = [
    _for(q_ghost_chunks, None),
    _for(q_renorm_r, None),
    _for(q_frn_value, None),
]
TOPICS["weights"] = [
    _for(q_weight_norm_g, None),
    _for(q_spectral_sigma, None),
    _for(q_agc_factor, None),
]


#: The chapter (its file name in book/, without .ipynb) whose quiz asks each topic's questions; the
#: self-quiz points a wrong answer there. Every topic has one (tests/test_quiz.py checks it against
#: _toc.yml).
CHAPTER_OF: dict[str, str] = {
    "why": "why-normalize",
    "batchnorm": "batchnorm",
    "running": "batchnorm",
    "layernorm": "layernorm",
    "rmsnorm": "rmsnorm",
    "groupnorm": "groupnorm",
    "instancenorm": "groupnorm",
    "comparison": "side-by-side",
    "syncbatchnorm": "syncbatchnorm",
    "training": "training",
    "pitfalls": "pitfalls",
    "transformer": "transformer",
    "speed": "speed",
    "without-normalization": "without-normalization",
    "modern-transformers": "modern-transformers",
    "small_batches": "small-batches",
    "weights": "normalizing-weights",
}


def topics() -> list:
    """Names accepted by :func:`questions_for` and :func:`show`."""
    return list(TOPICS)


def _generate(gens, n, rng, tries_per_question=20):
    out, seen = [], set()
    order = []
    attempts = 0
    while len(out) < n and attempts < n * tries_per_question:
        if not order:
            order = list(gens)
            rng.shuffle(order)
        gen = order.pop()
        attempts += 1
        q = gen(rng)
        key = (english(q["question"]), q.get("code"))  # the same in every language
        if key in seen:
            continue
        seen.add(key)
        out.append(q)
    return out


def questions_for(topic: str, n: int = 4, seed: int = 0) -> list:
    """``n`` distinct questions on ``topic`` (see :func:`topics`), deterministic in ``seed``."""
    if topic not in TOPICS:
        raise ValueError(f"unknown topic {topic!r}; choose from {', '.join(TOPICS)}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive whole number of questions, got {n!r}")
    return _generate(TOPICS[topic], n, random.Random(f"{topic}:{seed}"))


def topics_for_chapters(chapters) -> list:
    """The topics whose questions a set of chapters teach (file names in book/, without
    .ipynb), in the order of :func:`topics`: a quiz for what a lecture covered is
    ``bank(topics=topics_for_chapters([...]))``."""
    chapters = set(chapters)
    unknown = chapters - set(CHAPTER_OF.values())
    known = sorted(set(CHAPTER_OF.values()))
    if unknown and not chapters - unknown:
        raise ValueError(f"no quiz topic for chapters {sorted(unknown)}; those with one: {known}")
    return [t for t in TOPICS if CHAPTER_OF[t] in chapters]


def bank(seed: int = 0, size: int = 60, topics=None) -> list:
    """A mixed bank of ``size`` distinct questions, deterministic in ``seed``, from every topic
    or (``topics``, a list of names of :func:`topics`) from those only."""
    if topics is None:
        chosen = list(TOPICS)
    else:
        chosen = [topics] if isinstance(topics, str) else list(topics)
        bad = [t for t in chosen if t not in TOPICS]
        if bad or not chosen:
            raise ValueError(f"unknown topics {bad}; choose one or more of {', '.join(TOPICS)}")
    gens = [g for t in chosen for g in TOPICS[t]]
    return _generate(gens, size, random.Random(f"bank:{seed}"))
