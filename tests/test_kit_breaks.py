"""Mutant factories of kit._breaks."""

from posflow.proofs_checks.kit import scaled_keyword


def test_scaled_keyword_scales_the_default_and_a_given_value():
    def f(x, *, scale=2.0):
        return x * scale

    g = scaled_keyword("scale", 1.5, 2.0)(f)
    assert g(1.0) == 3.0 and g(1.0, scale=4.0) == 6.0 and g.__name__ == "f"


def test_swapped_residual_weights_reads_lambda_as_the_residual_weight():
    import numpy as np

    from posflow.proofs_checks.kit import swapped_residual_weights
    from posflow.simulate.kernels import dense_kernel

    A = np.array([[1.0, 0.0], [0.5, 0.5]])
    K = dense_kernel(A)
    step = swapped_residual_weights(type(K)._residual_step)
    p = np.array([[0.0, 1.0]])
    np.testing.assert_allclose(step(K, p, 0.25), 0.25 * p + 0.75 * (p @ A))


def test_negated_result_swaps_true_and_false_and_keeps_none():
    from posflow.proofs_checks.kit import negated_result

    g = negated_result(lambda v: v)
    assert g(True) is False and g(False) is True and g(None) is None
