"""PB17's figure panels, tables and setup text (claim PB17; split from pb17_retrieval for size)."""

from __future__ import annotations

from posflow.proofs_checks.kit import Panel, Series, Table

__all__ = ["k_panels", "setup_pb17", "tables_pb17"]

def k_panels(K, r, best, profiles):
    """The three panels of one K: measured log-prob, exact match, predicted profiles."""
    from posflow.proofs_checks.claims.pb17_refs import CONFIDENCE
    from posflow.simulate.models.profiles import color

    lp, acc = r["logprob"], r["accuracy"]
    C = r["task"].num_contexts
    x = list(range(K))
    prof = r["profile"] / r["profile"].sum()
    return [
        Panel(f"measured, K = {K} ({C} prompts per position)", "key position k",
              "log p(value) [nats]",
              [Series(f"{CONFIDENCE:.0%} bootstrap band", x, lp.mean, kind="band",
                      lo=lp.lo, hi=lp.hi, color="measured"),
               Series("mean log-prob", x, lp.mean, kind="line", color="measured")]),
        Panel(f"exact match, K = {K}", "key position k", "accuracy",
              [Series(f"{CONFIDENCE:.0%} bootstrap band", x, acc.mean, kind="band",
                      lo=acc.lo, hi=acc.hi, color="measured"),
               Series("accuracy", x, acc.mean, kind="markers", color="measured")],
              ylim=(0, 1)),
        Panel(f"predicted ({best}), K = {K}, ρ = {r['rho']:.2f}", "key position k",
              r"$\sum_{j \in \mathrm{line}\ k}\, p(j)$, normalised",
              [Series(profiles[best], x, prof, color=color(best))]
              + [Series(profiles[k], x, v[0] / v[0].sum(), style="--", color=color(k))
                 for k, v in r["rhos"].items() if k != best]),
    ]  # fmt: skip


def tables_pb17(sens, rho_rows, curve_rows):
    from posflow.proofs_checks.claims.pb17_refs import CONFIDENCE

    return [
        Table("dip_depth_sensitivity", "dip verdict at other depth thresholds δ",
              ["model", "delta_nats", "K", "depth_nats", "depth_passes", "dip_passes"], sens,
              note="dip_passes: interior minimum, depth ≥ δ and the bootstrap separation ≥ 0"),
        Table("spearman_by_profile",
              f"Spearman ρ of the mean log-prob curve with each predicted per-line profile "
              f"({CONFIDENCE:.0%} bootstrap over contexts)",
              ["model", "K", "profile", "what", "rho", "lo", "hi", "judged"], rho_rows),
        Table("position_curves", "per-position curves",
              ["model", "K", "k", "logprob_mean", "logprob_lo", "logprob_hi", "accuracy",
               "accuracy_lo", "accuracy_hi", "predicted_line_mass"], curve_rows),
    ]  # fmt: skip


def setup_pb17(cfg, task0, best, best_label, why_best, name, bos=False):
    from posflow.proofs_checks.claims.pb17_refs import CONFIDENCE, RESAMPLES

    bos = "<bos> first (its tokenizer's convention), then " if bos else ""
    return (
        f"{name} (float32, eager attention); K ∈ {cfg['Ks']}, {cfg['contexts']} random contexts "
        f"(seeded), each queried at every position, so {cfg['contexts']} prompts per position; "
        f"keys one-token words, values 3-digit numbers (3 tokens); a line is "
        f"{task0.line_length} tokens after a {task0.preamble_length}-token preamble ({bos}the "
        "preamble's text). Log-prob "
        "summed over the value's 3 tokens under teacher forcing; exact match = every value "
        "token the teacher-forced argmax (≡ greedy decoding). Intervals: percentile bootstrap "
        f"over contexts, {RESAMPLES} resamples, {CONFIDENCE:.0%}. Prediction: λ_t and mean "
        f"attention measured on {cfg['measured_prompts']} prompts per K (queries spread over "
        f"the positions), profile {best} ({best_label}; chosen beforehand: {why_best}) from the "
        "query's last token, summed over each key line (newline included); the profile is held "
        "fixed in the bootstrap of ρ. The other profiles' ρ are reported in table "
        "spearman_by_profile, not judged."
    )
