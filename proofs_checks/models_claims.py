"""Claims PB15 and PB16 of [A]: measuring locally trained causal LMs.

PB15 trains posflow's small ALiBi LM once (cached in ``$XDG_CACHE_HOME/posflow``), measures
λ_t, mean kernels, content and gradient influence on held-out standard-library bytes, and asks
whether the residual-aware rollout predicts the measured influence better than the
attention-only one. PB16 recomputes λ_t by hand from the weights and compares.

torch is imported inside the checks; without it both return INCONCLUSIVE.
"""

from __future__ import annotations

import math

import numpy as np

from posflow.proofs_checks._common import save_figure, verdict
from posflow.proofs_checks.registry import INCONCLUSIVE, Context, LegacyEvidence, register

_NO_TORCH = LegacyEvidence(INCONCLUSIVE, summary="torch not installed")


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def _held_out(record: dict, n: int, count: int, seed: int) -> np.ndarray:
    from posflow.simulate.models.corpus import load_corpus, windows

    cfg = record["config"]
    corpus = load_corpus(max_bytes=cfg["max_bytes"], seed=cfg["seed"])
    return windows(corpus.split(cfg["valid_fraction"])[1], n, count, seed=seed)


@register(
    "PB15",
    "[A]",
    "predicted profiles match measured input-token influence better with residuals than "
    "without: W1(residual-aware, measured) < W1(attention-only, measured), Spearman higher",
    assumptions=("a causal LM trained locally (posflow's ALiBi LM on the standard library)",),
)
def pb15(ctx: Context) -> LegacyEvidence:
    if _torch() is None:
        return _NO_TORCH
    from posflow.simulate.models.measure import measure
    from posflow.simulate.models.predict import compare_profiles, predict_profiles
    from posflow.simulate.models.train import PRESETS, cached_model

    preset, n, count = ("default", 256, 64) if ctx.full else ("quick", 64, 32)
    model, record, path = cached_model(preset)
    ids = _held_out(record, n, count, ctx.seed)
    m = measure(model, ids)
    profiles = predict_profiles(m)
    cmp = compare_profiles(profiles, m.influence)
    a, b = cmp["attention_only"], cmp["residual"]
    ok = b["w1"] < a["w1"] and b["spearman"] > a["spearman"]

    def draw(p):
        from posflow.proofs_checks.figures import plot_profiles

        title = f"posflow {preset} ALiBi LM, n = {n}, N = {count}, L = {m.num_layers}"
        plot_profiles({**profiles, "measured": m.influence}, title, p, logy=True)

    figs = save_figure(ctx, "pb15_profiles.png", draw)
    measured = {
        "model": f"{preset}: {PRESETS[preset].note} ({path.name})",
        "train_seconds": record.get("seconds"),
        "valid_loss_nats_per_byte": record.get("valid_loss"),
        "n": n,
        "sequences": count,
        "lambdas": m.lambdas,
        "lambdas_std": m.lambdas_std,
        **{f"w1_{k}": v["w1"] for k, v in cmp.items()},
        **{f"spearman_{k}": v["spearman"] for k, v in cmp.items()},
    }
    summary = (
        f"{preset} model, n = {n}: W1 (a) {a['w1']:.3f} → (b) {b['w1']:.3f} "
        f"(c) {cmp['residual_content']['w1']:.3f}; Spearman (a) {a['spearman']:.2f} → "
        f"(b) {b['spearman']:.2f} (c) {cmp['residual_content']['spearman']:.2f}"
    )
    return LegacyEvidence(verdict(ok), measured, figs, summary)


# --------------------------------------------------------------------------------------------
# PB16: λ_t by hand


def _hand_posflow(model, ids):
    """λ_t of a posflow LM (ALiBi/NoPE) by explicit matrix algebra on the weights, float64."""
    torch = _torch()
    F = torch.nn.functional
    x = model.tok_emb.weight[ids].double()  # (B, n, D)
    B, n, D = x.shape
    lam = []
    for blk in model.blocks:
        at = blk.attn
        H, d = at.n_head, at.d_head
        h = F.layer_norm(x, (D,), blk.ln1.weight.double(), blk.ln1.bias.double(), blk.ln1.eps)
        q, k, v = (h @ at.qkv_proj.weight.double().T).split(D, dim=-1)
        q, k, v = (t.reshape(B, n, H, d).permute(0, 2, 1, 3) for t in (q, k, v))
        i = torch.arange(n, dtype=torch.float64)
        m = at.scheme.slopes()
        m = torch.zeros(H, dtype=torch.float64) if m is None else torch.from_numpy(m)
        logits = q @ k.transpose(-1, -2) / math.sqrt(d) - m[:, None, None] * (i[:, None] - i)
        logits = logits.masked_fill(i[None, :] > i[:, None], -math.inf)
        y = (torch.softmax(logits, -1) @ v).permute(0, 2, 1, 3).reshape(B, n, D)
        a = y @ at.out_proj.weight.double().T
        na, nx = a.norm(dim=-1), x.norm(dim=-1)
        lam.append((na / (na + nx)).mean(dim=1).mean().item())
        x = x + a
        x = x + blk.mlp.double()(
            F.layer_norm(x, (D,), blk.ln2.weight.double(), blk.ln2.bias.double(), blk.ln2.eps)
        )
    return np.array(lam)


def _hand_gpt2(model, ids):
    """λ_t of a Hugging Face GPT-2 by hand: block inputs from output_hidden_states, a_t from
    the weights (Conv1D: h W + b, causal softmax of q kᵀ/√d, c_proj)."""
    torch = _torch()
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


@register(
    "PB16",
    "[A]",
    "λ_t measurement: per-token ‖a_t‖/(‖x_t‖+‖a_t‖) averaged over positions then sequences "
    "lies in (0,1) and equals a hand computation",
    assumptions=("tiny models built from configs (posflow LM, Hugging Face GPT-2)",),
)
def pb16(ctx: Context) -> LegacyEvidence:
    torch = _torch()
    if torch is None:
        return _NO_TORCH
    import copy

    from posflow.simulate.models.lm import LM, LMConfig
    from posflow.simulate.models.measure import mixing_coefficients
    from posflow.simulate.models.train import cached_model

    rng = np.random.default_rng(ctx.seed + 16)
    n, count = (128, 8) if ctx.full else (32, 4)
    trained, _, _ = cached_model("default" if ctx.full else "quick")
    models = {
        "posflow trained ALiBi LM": copy.deepcopy(trained).double(),
        "posflow random NoPE LM": LM(
            LMConfig(n_layer=3, n_head=2, d_model=32, scheme="nope"), seed=ctx.seed
        ).double(),
    }
    try:
        import transformers

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
        models["Hugging Face GPT-2 (random)"] = gpt2.double().eval()
    except ImportError:
        pass
    ids = torch.from_numpy(rng.integers(0, 256, size=(count, n)))
    worst, inside, table = 0.0, True, {}
    for name, model in models.items():
        lam, std = mixing_coefficients(model, ids)
        hand = _hand_gpt2(model, ids) if "GPT-2" in name else _hand_posflow(model, ids)
        err = float(np.abs(lam - hand).max())
        worst = max(worst, err)
        inside &= bool(((lam > 0) & (lam < 1)).all())
        table[name] = {"lambdas": lam, "lambdas_std": std, "max_abs_error_vs_hand": err}
    ok = inside and worst <= 1e-10
    return LegacyEvidence(
        verdict(ok),
        {
            "n": n,
            "sequences": count,
            "tolerance": 1e-10,
            "all_in_open_unit_interval": inside,
            "max_abs_error": worst,
            "models": table,
        },
        summary=f"{len(models)} models, n = {n}: λ_t ∈ (0, 1): {inside}; "
        f"max |hook − hand| = {worst:.1e}",
    )
