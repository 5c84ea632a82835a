"""The claims of [A] (PB1–PB18) and [B] (AT1–AT20): one module per claim family, named by its IDs.

Each module holds the checks of its claims (a function named after the ID, registered with
:func:`posflow.proofs_checks.kit.register`), the mutants each check must catch and the
relaxations of their assumptions, and nothing else. Claim modules import only
:mod:`posflow.proofs_checks.kit`, :mod:`posflow.theory` and :mod:`posflow.simulate`.

``MODULES`` is the one list of registrations: :func:`posflow.proofs_checks.kit.all_claims`
imports these modules (and only these) when the registry is first read.
"""

MODULES = (
    "pb01_02_diagonal_identity",
    "pb01_02_diagonal_identity_refs",
    "pb03_diagonal_bound",
    "pb04_no_collapse",
    "pb05_07_collapse_rates",
    "pb05_07_collapse_rates_refs",
    "pb06_dichotomy",
    "pb06_dichotomy_refs",
    "pb08_09_monotone_drift",
    "pb08_09_monotone_drift_refs",
    "pb10_13_edges_w1",
    "pb11_u_shape",
    "pb11_u_shape_refs",
    "pb12_closed_form",
    "pb14_real_configs",
    "pb14_real_configs_refs",
    "pb15_measured_lm",
    "pb15_study",
    "pb16_lambda",
    "pb17_retrieval",
    "pb18_continuum",
    "at01_characteristic",
    "at02_product_mean",
    "at02_product_mean_refs",
    "at03_04_haar_householder",
    "at03_04_haar_householder_refs",
    "at05_mixing_window",
    "at05_mixing_window_refs",
    "at06_block_windows",
    "at07_levy",
    "at07_levy_refs",
    "at08_bessel_tail",
    "at08_bessel_tail_refs",
    "at09_score_gap",
    "at10_far_mass",
    "at11_logit_bound",
    "at12_far_mass",
    "at12_far_mass_refs",
    "at13_far_mass",
    "at14_value_incoherence",
    "at14_commuting_relaxation",
    "at14_value_refs",
    "at15_value_scaling",
    "at16_rope_no_gap",
    "at17_zero_mean_drift",
    "at17_zero_mean_drift_refs",
    "at18_identities",
    "at18_identities_refs",
    "at19_stylized",
    "at19_stylized_refs",
    "at19_stylized_figures",
    "at20_judge",
    "at20_figures",
    "at20_trained",
)
