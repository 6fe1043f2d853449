"""Conceptual questions (hand-written; each option explains itself)."""

from __future__ import annotations

from norms.i18n import tr

from .builders import choice

_CONCEPTS = {
    "affine": (
        tr("Why do normalization layers multiply by γ and add β after normalizing?"),
        [
            (
                tr(
                    "So the layer can still produce any scale and offset, including undoing "
                    "the normalization (γ = σ, β = μ) when that suits the next layer."
                ),
                True,
                tr(
                    "Correct: normalizing alone would force every feature to mean 0 and "
                    "variance 1; γ and β give that freedom back as two learned numbers per "
                    "feature, decoupled from the batch statistics."
                ),
            ),
            (
                tr("To keep the output's variance exactly 1."),
                False,
                tr("No: normalizing already gives variance 1; γ moves it away from 1."),
            ),
            (tr("To avoid dividing by zero."), False, tr("No: that is what ε is for.")),
            (
                tr("So that the layer in front of the normalization becomes scale-invariant."),
                False,
                tr(
                    "No: the normalization does that on its own (scaling W scales μ and σ by "
                    "the same factor, which cancels); γ and β are applied afterwards and do "
                    "not depend on W."
                ),
            ),
        ],
    ),
    "layernorm_transformers": (
        tr("Why do transformers use LayerNorm (or RMSNorm) rather than BatchNorm?"),
        [
            (
                tr(
                    "Each token is normalized over its own features, so nothing depends on "
                    "the other sequences in the batch, on padding or on batch size, and "
                    "training and inference compute the same thing."
                ),
                True,
                tr(
                    "Correct: BatchNorm's statistics mix tokens from different sequences and "
                    "positions, need running averages at inference, and are noisy with small "
                    "or variable batches."
                ),
            ),
            (
                tr("LayerNorm is much cheaper to compute."),
                False,
                tr(
                    "No: both compute a mean and a variance per statistic; the cost is about "
                    "the same."
                ),
            ),
            (
                tr("LayerNorm has no learnable parameters, so it cannot overfit."),
                False,
                tr("No: LayerNorm has γ and β, one per feature (d_model of each)."),
            ),
            (
                tr("BatchNorm cannot be applied to 3-D (batch, time, feature) tensors."),
                False,
                tr(
                    "No: BatchNorm1d accepts (N, C, L); the problem is what its statistics "
                    "mix, not the shape."
                ),
            ),
        ],
    ),
    "eps_purpose": (
        tr("What is ε (eps) for?"),
        [
            (
                tr(
                    "It keeps the denominator away from zero when a group of values has "
                    "(almost) zero variance."
                ),
                True,
                tr(
                    "Correct: √(σ² + ε) ≥ √ε, so constant inputs give 0 instead of 0/0, and "
                    "tiny variances do not blow up the output."
                ),
            ),
            (
                tr("It is a learning rate for γ and β."),
                False,
                tr("No: ε is a fixed constant, not an optimizer setting."),
            ),
            (
                tr(
                    "It keeps the weights in front of the normalization from growing during "
                    "training."
                ),
                False,
                tr(
                    "No: nothing in the layer limits ‖W‖; under plain SGD it grows at every "
                    "step (weight decay is what pulls it back)."
                ),
            ),
            (
                tr("It makes the normalization exactly scale-invariant."),
                False,
                tr(
                    "No: the opposite. ε is the one term that does not scale with the input, "
                    "so L(aW) = L(W) holds only up to ε; to make it exact, ε has to be "
                    "scaled by a² as well."
                ),
            ),
        ],
    ),
    "small_batches": (
        tr("Why does BatchNorm work poorly with very small batches (say 2 samples per GPU)?"),
        [
            (
                tr(
                    "The batch mean and variance are then noisy estimates, so each sample's "
                    "output depends strongly on which other samples it was batched with, and "
                    "the running averages are poor."
                ),
                True,
                tr(
                    "Correct: this is why GroupNorm and LayerNorm, whose statistics are per "
                    "sample, are used there."
                ),
            ),
            (
                tr("The running mean overflows."),
                False,
                tr("No: the running mean is an average; it cannot overflow."),
            ),
            (
                tr("γ and β cannot be learned with small batches."),
                False,
                tr("No: they get gradients as usual; the problem is the statistics."),
            ),
            (
                tr("BatchNorm refuses any batch smaller than 8."),
                False,
                tr("No: it only refuses a single value per channel in training."),
            ),
        ],
    ),
    "running_stats_why": (
        tr("Why does BatchNorm keep running averages of the mean and variance?"),
        [
            (
                tr(
                    "At inference there may be one sample, or samples that must not "
                    "influence each other, so eval mode uses fixed statistics estimated "
                    "during training."
                ),
                True,
                tr(
                    "Correct: the running averages make the eval-mode layer a fixed affine "
                    "map per channel."
                ),
            ),
            (
                tr("To speed up training."),
                False,
                tr("No: training normalizes with the batch's own statistics anyway."),
            ),
            (
                tr("Because the gradient needs them."),
                False,
                tr(
                    "No: the gradient flows through the batch statistics; the running ones "
                    "are buffers without gradient."
                ),
            ),
            (
                tr("To initialize γ and β."),
                False,
                tr("No: γ starts at 1 and β at 0, independently of the data."),
            ),
        ],
    ),
    "covariate_shift": (
        tr(
            "Santurkar et al. (2018) added random noise with a non-zero mean and a "
            "non-unit variance after every BatchNorm layer, drawn afresh at each "
            "step, so that the inputs of the later layers shifted more than in a "
            "network without BatchNorm. What did they find?"
        ),
        [
            (
                tr(
                    "The noisy network trained about as well as the standard BatchNorm "
                    "network: reducing internal covariate shift is not what makes BatchNorm "
                    "work."
                ),
                True,
                tr(
                    "Correct: more shift, yet the benefit stayed (the chapter repeats this "
                    "at toy scale). What BatchNorm does change is the loss landscape: the "
                    "loss and its gradient vary less along the gradient, so large steps are "
                    "safe."
                ),
            ),
            (
                tr(
                    "It trained as badly as the network without normalization, confirming "
                    "the explanation of Ioffe and Szegedy (2015)."
                ),
                False,
                tr(
                    "No: that is what the covariate-shift explanation predicts, and it is "
                    "not what happened."
                ),
            ),
            (
                tr("The next BatchNorm removed the noise, so the experiment tested nothing."),
                False,
                tr(
                    "No: the noise changes the input of the next linear layer at every step, "
                    "which is exactly the shift the explanation is about; measured, it was "
                    "larger than without BatchNorm."
                ),
            ),
            (
                tr("It diverged: noise after a normalization makes the loss explode."),
                False,
                tr("No: it trained; the normalization in front still bounds the activations."),
            ),
        ],
    ),
    "what_helps": (
        tr("Which of these are supported explanations of why normalization layers help training?"),
        [
            (
                tr(
                    "They keep every layer's signal at a fixed scale, whatever the scale of "
                    "the weights."
                ),
                True,
                tr("Yes: mean 0 and std 1 at every depth, for any initialization scale."),
            ),
            (
                tr(
                    "The layers in front of them become scale-invariant, so the effective "
                    "learning rate η/‖W‖² adapts by itself (and weight decay controls it)."
                ),
                True,
                tr("Yes: L(aW) = L(W), the gradient is orthogonal to W and scales as 1/a."),
            ),
            (
                tr(
                    "The loss and its gradient change much more slowly along the gradient "
                    "(measured by Santurkar et al. 2018), so larger learning rates stay "
                    "useful."
                ),
                True,
                tr(
                    "Yes: Santurkar et al. (2018) measured a smoother loss landscape with "
                    "BatchNorm: along the gradient direction the loss and its gradient vary "
                    "much less, so a larger step still lands where the gradient predicted. "
                    "It is a measured property of the networks they trained, not a guarantee."
                ),
            ),
            (
                tr(
                    "They remove internal covariate shift, the change of each layer's input "
                    "distribution during training."
                ),
                False,
                tr(
                    "No: that was the original explanation (Ioffe and Szegedy, 2015); a "
                    "network with more shift injected after each BatchNorm trains about as "
                    "well."
                ),
            ),
            (
                tr("They make the initialization irrelevant."),
                False,
                tr(
                    "No: they make the scale of the weights irrelevant; the direction of the "
                    "weights still matters, and so does every part of the network that is "
                    "not normalized, such as the last layer."
                ),
            ),
        ],
    ),
}


_SELECT_ALL_CONCEPTS = {"what_helps"}


def concept(key):
    def gen(rng, names=None):
        question, options = _CONCEPTS[key]
        return choice(
            question,
            list(options),
            dict(kind="concept", concept=key),
            many=key in _SELECT_ALL_CONCEPTS,
        )

    gen.__name__ = f"concept_{key}"
    return gen
