"""Shared test settings: Hypothesis profiles (CI runs the default 'ci' profile)."""

import os

# Two pytest-xdist workers on two cores: keep BLAS/OpenMP/torch to one thread each so the
# workers do not oversubscribe the machine (set before numpy or torch is imported).
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
# numba reads NUMBA_NUM_THREADS again at every compilation and raises once its threads run with
# another count: pin it to numba's own default before numba loads, so that a benchmark module a
# test imports (benchmarks/_bench.py sets it to 1 with setdefault) changes nothing in a worker
_cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
os.environ.setdefault("NUMBA_NUM_THREADS", str(max(1, _cpus or 1)))

from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=300, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def tiny_gqa_llama():
    """A seeded 2-layer float64 Llama with grouped-query attention (4 query heads sharing 2
    key/value heads, RoPE base 1e5, eager attention), no weights: shared by the sinks and study
    tests."""
    import torch
    import transformers

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=64,
                                   rope_theta=1e5, attn_implementation="eager")  # fmt: skip
    return transformers.LlamaForCausalLM(cfg).double().eval()
