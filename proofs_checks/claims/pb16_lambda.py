"""Claim PB16: λ_t as measured by the forward hooks equals a hand computation from the weights.

PB16 is a convention of this code: λ_t = per-token ‖a_t‖/(‖x_t‖ + ‖a_t‖), averaged over positions
then sequences, as measured by :func:`posflow.simulate.models.measure.mixing_coefficients`, lies
in (0, 1) and equals explicit matrix algebra on the weights (posflow's LM and GPT-2). The λ_t hook
mutants are shared with PB15 (:mod:`posflow.proofs_checks.claims.pb20_like_for_like`), which
measures through the same hook.

torch is imported inside the check (``kit.optional_torch``, looked up at call time); without it
the verdict is INCONCLUSIVE.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from posflow.proofs_checks import kit
from posflow.proofs_checks.kit import (
    Context,
    Evidence,
    Table,
    add_mutant,
    at_most,
    cite,
    close,
    exact_tol,
    fp_tol,
    holds,
    info,
    register,
)

__all__ = ["pb16"]

# --------------------------------------------------------------------------------------------
# PB16: λ_t by hand


def _hand_posflow(model, ids, dtype=None):
    """λ_t of a posflow LM (ALiBi/NoPE) by explicit matrix algebra on its weights.

    Every weight is cast to ``dtype`` (default float64) and every operation is written out:
    pre-LayerNorm, q, k, v, causal softmax of q kᵀ/√d − m_h (i − j), the output projection a_t,
    the per-token ratio ‖a_t‖/(‖x_t‖ + ‖a_t‖), its mean over positions, then over sequences.
    """
    torch = kit.optional_torch()
    F = torch.nn.functional
    dt = torch.float64 if dtype is None else dtype

    def w(p):
        return p.detach().to(dt)

    x = w(model.tok_emb.weight)[ids]  # (B, n, D)
    B, n, D = x.shape
    lam = []
    for blk in model.blocks:
        at = blk.attn
        H, d = at.n_head, at.d_head
        h = F.layer_norm(x, (D,), w(blk.ln1.weight), w(blk.ln1.bias), blk.ln1.eps)
        q, k, v = (h @ w(at.qkv_proj.weight).T).split(D, dim=-1)
        q, k, v = (t.reshape(B, n, H, d).permute(0, 2, 1, 3) for t in (q, k, v))
        i = torch.arange(n, dtype=dt)
        m = at.scheme.slopes()
        m = torch.zeros(H, dtype=dt) if m is None else torch.from_numpy(np.asarray(m)).to(dt)
        logits = q @ k.transpose(-1, -2) / math.sqrt(d) - m[:, None, None] * (i[:, None] - i)
        logits = logits.masked_fill(i[None, :] > i[:, None], -math.inf)
        y = (torch.softmax(logits, -1) @ v).permute(0, 2, 1, 3).reshape(B, n, D)
        a = y @ w(at.out_proj.weight).T
        na, nx = a.norm(dim=-1), x.norm(dim=-1)
        lam.append((na / (na + nx)).mean(dim=1).mean().item())
        x = x + a
        h = F.layer_norm(x, (D,), w(blk.ln2.weight), w(blk.ln2.bias), blk.ln2.eps)
        x = x + F.gelu(h @ w(blk.mlp[0].weight).T) @ w(blk.mlp[2].weight).T
    return np.array(lam)


def _hand_gpt2(model, ids, dtype=None):
    """λ_t of a Hugging Face GPT-2 by hand: block inputs from output_hidden_states, a_t from
    the weights (Conv1D: h W + b, causal softmax of q kᵀ/√d, c_proj). ``dtype`` (default: the
    model's) is the precision of the model run and of the hand algebra."""
    torch = kit.optional_torch()
    if dtype is not None and dtype != next(model.parameters()).dtype:
        import copy

        model = copy.deepcopy(model).to(dtype)
    with torch.no_grad():
        hs = model(input_ids=ids, output_hidden_states=True).hidden_states
    lam = []
    for t, blk in enumerate(model.transformer.h):
        x = hs[t]
        B, n, D = x.shape
        H = blk.attn.num_heads
        d = D // H
        h = torch.nn.functional.layer_norm(x, (D,), blk.ln_1.weight, blk.ln_1.bias, blk.ln_1.eps)
        qkv = h @ blk.attn.c_attn.weight + blk.attn.c_attn.bias
        q, k, v = (s.reshape(B, n, H, d).permute(0, 2, 1, 3) for s in qkv.split(D, dim=-1))
        logits = q @ k.transpose(-1, -2) / math.sqrt(d)
        logits = logits.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -math.inf)
        y = (torch.softmax(logits, -1) @ v).permute(0, 2, 1, 3).reshape(B, n, D)
        a = y @ blk.attn.c_proj.weight + blk.attn.c_proj.bias
        na, nx = a.norm(dim=-1), x.norm(dim=-1)
        lam.append((na / (na + nx)).mean(dim=1).mean().item())
    return np.array(lam)


def _pb16_models(ctx: Context, n: int) -> dict:
    """The float64 models PB16 measures: the trained toy LM, a random NoPE LM, a random GPT-2
    (when transformers is installed), and the control: a NoPE LM whose attention output
    projections are zero (a_t = 0 exactly)."""
    import copy

    torch = kit.optional_torch()
    from posflow.simulate.models.lm import LM, LMConfig
    from posflow.simulate.models.train import cached_model

    trained, _, _ = cached_model("default" if ctx.full else "quick")
    nope = LMConfig(n_layer=3, n_head=2, d_model=32, scheme="nope")
    models = {
        "trained ALiBi LM": copy.deepcopy(trained).double(),
        "random NoPE LM": LM(nope, seed=ctx.seed).double(),
    }
    try:
        import transformers
    except ImportError:
        pass
    else:
        cfg = transformers.GPT2Config(
            n_layer=3,
            n_head=2,
            n_embd=32,
            vocab_size=256,
            n_positions=n,
            bos_token_id=None,
            eos_token_id=None,
        )
        torch.manual_seed(ctx.seed)
        gpt2 = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
        models["random GPT-2"] = gpt2.double().eval()
    silent = LM(nope, seed=ctx.seed + 1).double()
    with torch.no_grad():
        for blk in silent.blocks:
            blk.attn.out_proj.weight.zero_()
    return models, silent


def _hand_judge(key: str, lam, hand, sens: float, name: str):
    """The judge: max over layers |λ_t(hooks) − λ_t(hand)| ≤ the float32 gap ``sens``."""
    err = float(np.abs(np.asarray(lam) - np.asarray(hand)).max())
    return at_most(
        key,
        err,
        0.0,
        fp_tol(
            sens,
            f"both sides run in float64 and differ only by rounding, which scales with "
            f"the unit roundoff: the same hand computation in float32 moves λ by "
            f"{sens:.2g}, so float64 rounding is ≈ 2⁻²⁹ of that (≈ {sens * 2**-29:.1g});"
            " the float32 gap is a generous bound on it",
        ),
        label=f"{name}: max_t |λ_t(hooks) − λ_t(hand)|",
    )


def _model_measurements(name: str, model, ids, torch) -> tuple[list, list]:
    """λ_t of one model by the hooks and by hand (float64, and float32 to size the rounding)."""
    from posflow.simulate.models.measure import mixing_coefficients

    hand_fn = _hand_gpt2 if "GPT-2" in name else _hand_posflow
    lam, std = mixing_coefficients(model, ids)
    hand = hand_fn(model, ids)
    hand32 = hand_fn(model, ids, torch.float32)
    sens = float(np.abs(hand32 - hand).max())
    key = name.replace(" ", "_").replace("-", "").lower()
    last = hand.copy()
    last[-1] += 4 * sens  # only the last layer wrong, by 4× the tolerance
    ms = [
        holds(
            f"{key}.in_open_unit_interval",
            bool(((lam > 0) & (lam < 1)).all()),
            label=f"{name}: every λ_t lies in (0, 1)",
        ),
        _hand_judge(f"{key}.max_error_vs_hand", lam, hand, sens, name),
        kit.rejects(f"{key}.hand_judge_control_last_layer", _hand_judge("c", lam, last, sens, name),
                    "the hand λ of the last layer moved by 4× the tolerance (the worst layer "
                    "must be seen)"),
        info(
            f"{key}.float32_sensitivity",
            sens,
            label=f"{name}: max |λ(float32) − λ(float64)| of the hand computation",
        ),
    ]
    rows = [[name, t, float(lam[t]), float(std[t]), float(hand[t])] for t in range(lam.size)]
    return ms, rows


_CITES = (
    cite("posflow.simulate.models.measure:mixing_coefficients",
         "explicit float64 matrix algebra on the weights (posflow LM; GPT-2 from its block "
         "inputs), and λ = 0 exactly for zero attention outputs",
         "trained_alibi_lm.max_error_vs_hand", "random_nope_lm.max_error_vs_hand",
         "zero_attention.max_lambda"),
)  # fmt: skip


@register(
    "PB16",
    "[convention]",
    "λ_t measurement: per-token ‖a_t‖/(‖x_t‖+‖a_t‖) averaged over positions then sequences "
    "lies in (0,1) and equals a hand computation from the weights; λ_t = 0 when a_t = 0",
    assumptions=("tiny models built from configs (posflow LM, Hugging Face GPT-2)",),
    compares=_CITES,
)
def pb16(ctx: Context) -> Evidence:
    """Claim PB16: ``mixing_coefficients`` (the λ_t hooks) against a hand computation from the
    weights in float64 (tolerance: the float32 gap of the same hand computation), λ_t in (0, 1),
    and λ = 0 for zero attention outputs. Negative control: the judge rejects a hand λ wrong in
    the last layer only."""
    torch = kit.optional_torch()
    if torch is None:
        return kit.no_torch()
    from posflow.simulate.models.measure import mixing_coefficients

    rng = np.random.default_rng(ctx.seed + 16)
    n, count = (128, 8) if ctx.full else (32, 4)
    models, silent = _pb16_models(ctx, n)
    ids = torch.from_numpy(rng.integers(0, 256, size=(count, n)))
    ms, rows = [], []
    for name, model in models.items():
        m, r = _model_measurements(name, model, ids, torch)
        ms += m
        rows += r
    quiet, _ = mixing_coefficients(silent, ids)
    ms.append(
        close(
            "zero_attention.max_lambda",
            float(np.abs(quiet).max()),
            0.0,
            exact_tol("‖a_t‖ = 0 exactly (zero output projections) gives λ = 0/(‖x_t‖ + 0) = 0"),
            role="control",
            label="control, NoPE LM with zero attention output: max_t λ_t",
        )
    )
    ms += [info("n", n, label="sequence length n"), info("sequences", count)]
    return Evidence(
        ms,
        tables=[
            Table(
                "lambdas",
                "λ_t per model: hooks (mean, std over sequences) and hand computation",
                ["model", "layer t", "λ_t (hooks)", "std", "λ_t (hand)"],
                rows,
            )
        ],
        setup=f"{len(models)} float64 models and a zero-attention control, {count} random "
        f"byte sequences of n = {n} (seed {ctx.seed} + 16); the hooks of "
        "simulate.models.measure against explicit matrix algebra on the weights (GPT-2: block "
        "inputs from output_hidden_states); float32 reruns of the hand computation size the "
        "rounding.",
    )


# -- mutants: breaks of the λ_t hook ---------------------------------------------------------------
_ATTN_OUT = "posflow.simulate.models._hooks:_Recorder._attn_out"


def _norms_swapped(original):
    @functools.wraps(original)
    def attn_out(self, t, idx):
        hook = original(self, t, idx)

        def swapped(mod, args, out):
            hook(mod, args, out)  # appends mean_i ‖a‖/(‖x‖+‖a‖); ‖x‖/(‖x‖+‖a‖) is 1 − it
            self.ratios[t][-1] = 1.0 - self.ratios[t][-1]

        return swapped

    return attn_out


def _ratio_of_means(original):
    @functools.wraps(original)
    def attn_out(self, t, idx):
        torch = kit.optional_torch()

        def hook(mod, args, out):
            a = (out if idx is None else out[idx]).detach().double()
            na, nx = a.norm(dim=-1), self.x[t].double().norm(dim=-1)
            ma, mx = na.mean(dim=1), nx.mean(dim=1)  # averaged before the ratio
            self.ratios[t].append(torch.where(ma + mx > 0, ma / (ma + mx), 0.0).cpu())

        return hook

    return attn_out


add_mutant(("PB20", "PB16"), "norms-swapped", _ATTN_OUT, _norms_swapped,
           "λ_t measured as ‖x_t‖/(‖x_t‖ + ‖a_t‖): the two norms swapped")  # fmt: skip
add_mutant("PB16", "ratio-of-means", _ATTN_OUT, _ratio_of_means,
           "positions averaged before the ratio: mean‖a‖/(mean‖x‖ + mean‖a‖)")  # fmt: skip



def _hand_judge_best_layer(original):
    @functools.wraps(original)
    def _hand_judge(key, lam, hand, sens, name):
        lam, hand = np.asarray(lam), np.asarray(hand)
        i = int(np.argmin(np.abs(lam - hand)))  # the best layer taken for the worst
        return original(key, lam[i : i + 1], hand[i : i + 1], sens, name)

    return _hand_judge


add_mutant("PB16", "hand-judge-best-layer", "posflow.proofs_checks.claims.pb16_lambda:_hand_judge",
           _hand_judge_best_layer, "the judge takes the best layer's error for the worst")
