"""The claims of [A] (PB1–PB18) and [B] (AT1–AT20): one module per claim family, named by its IDs.

Each module holds the checks of its claims (a function named after the ID, registered with
:func:`posflow.proofs_checks.kit.register`), the mutants each check must catch and the
relaxations of their assumptions, and nothing else. Claim modules import only
:mod:`posflow.proofs_checks.kit`, :mod:`posflow.theory` and :mod:`posflow.simulate`.

``MODULES`` is the one list of registrations: :func:`posflow.proofs_checks.kit.all_claims`
imports these modules (and only these) when the registry is first read.
"""

MODULES = (
    "pb01_03_diagonal",
    "pb04_07_depth",
    "pb08_10_13_shape",
    "pb11_12_profiles",
    "pb14_real_configs",
    "pb15_measured_lm",
    "pb16_lambda",
    "pb17_retrieval",
    "pb18_continuum",
    "_relaxations_pb",
    "at01_04_mixing",
    "at05_06_windows",
    "at07_09_tails",
    "at10_11_scores",
    "at12_13_far_mass",
    "at14_15_values",
    "at16_17_drift",
    "at18_identities",
    "at19_stylized",
    "at20_trained",
    "_relaxations_at",
)
