"""The claim machinery of posflow, apart from the claims.

Everything a claim module needs, re-exported from small private modules:

==========================  ===================================================================
module                      what it holds
==========================  ===================================================================
``_registry``               :func:`register`, :class:`Context`, :class:`Claim`,
                            :class:`Relaxation`, :func:`add_relaxation`, :func:`all_claims`,
                            :func:`get_claim`, :func:`select`, :func:`run_claim`,
                            :func:`verify` and its :class:`Results` (the one registry of
                            claims and relaxations)
``_evidence``               :class:`Evidence`, :class:`Measurement`, :class:`Tolerance`,
                            :class:`Table`, figure specs (:class:`Figure`, :class:`Panel`,
                            :class:`Series`) and the comparison helpers (:func:`close`,
                            :func:`at_most`, :func:`at_least`, :func:`holds`, :func:`info`,
                            :func:`undecided`, the tolerance constructors)
``_mutants``                :func:`add_mutant`, :func:`mutated`, :func:`kill_table` (mutants
                            live in the same registry as the claims they must break);
                            :func:`counting`/:func:`cited_calls` (call counters on the routines
                            a claim cites, patched like mutants)
``_cites``                  :func:`cite` (the routines a check compares with an independent
                            reference, listed by ``posflow claims``)
``_controls``               :func:`rejects` (negative controls: a judge run on known-wrong
                            inputs must reject them, inside the verdict), :func:`biased`
``_lock``                   the verdict lock (``expected.toml``): :func:`expectation`,
                            :func:`lock_mismatches`
``_decide``                 the one decision rule: an interval against a bound → HOLDS /
                            FAILS / INCONCLUSIVE, family-wise levels, sensitivity tables
``_breaks``                 reusable mutant factories (:func:`scaled_argument`, …)
``_stats``                  family-wise z limits and levels (:func:`z_limit`,
                            :data:`FAMILY_LEVEL`, :func:`z_at_most`, :func:`z_se_tol`),
                            binomial exceedance counts as z scores, means with standard errors,
                            log-log fits, per-claim random streams
``_styles``                 one colour and label per attention scheme
``_quiet``                  :func:`quiet` checks and the scalar log / max that keep −inf and
                            NaN (a broken rollout fails a comparison instead of raising)
``_jackknife``              the jackknife judge of cross-fitted comparisons
                            (:func:`crossfit_decision`), its negative controls and the library
                            recomputation of a cross-fit (PB15, PB19)
``_regression``             every reported number against stored reference values
                            (:func:`regression_measurements`, ``claims/references/*.json``,
                            written by :func:`store_reference`)
``_plain_torch``            gradient influence by plain torch autograd (:func:`plain_influence`),
                            the reference of the measuring hooks
``_power``                  what N windows can see: the MDD against the judge's Monte Carlo,
                            the power rule of a break depth (:func:`powered_depth`)
``_scope``, ``_setting``    the scope of an empirical verdict (:class:`Scope`), a paper's
                            setting (:class:`Setting`); :func:`scoped` (a run outside it is
                            reported, not deciding), :func:`not_in_setting`
``_u_test``                  the U test of PB11 and PB14 (:func:`valley`, :func:`is_u`,
                            :data:`U_MIN_DEPTH`, :data:`U_END_MARGIN`)
``_inputs``, ``_examples``  random causal kernels for checks; Hypothesis example helpers
``_optional``               the INCONCLUSIVE evidence of a check whose optional extra is missing
``_counterexamples``        the counterexample search over a claim's relaxations
``_report``, ``_figures``   the report (Markdown, HTML, JSON) and the figures it draws;
                            ``_markup``: its mathematics as HTML sub-/superscripts, TeX of
                            figure titles as Unicode, seconds and dates to read
``_frames``                 :func:`results_frame`: verify results as pandas DataFrames
``_catalog``                the claim catalog (``CLAIMS.md``)
==========================  ===================================================================

Claims import this package, :mod:`posflow.theory` and :mod:`posflow.simulate` only; nothing here
imports a claim module (the registry reads the list ``posflow.proofs_checks.claims.MODULES``).
"""

from posflow.proofs_checks.kit import _examples as examples
from posflow.proofs_checks.kit._breaks import (
    CHAIN,
    DENSE_APPLY,
    RESIDUAL_STEP,
    STYLIZED,
    STYLIZED_INPUTS,
    SUMMABILITY_TEST,
    U_TEST,
    constant_result,
    leaky_residual_step,
    loose_is_u,
    negated_result,
    reversed_layer_order,
    scaled_argument,
    scaled_keyword,
    scaled_result,
    swapped_residual_weights,
    transposed_dense_apply,
)
from posflow.proofs_checks.kit._catalog import SOURCES, anchor, to_markdown
from posflow.proofs_checks.kit._catalog import records as catalog_records
from posflow.proofs_checks.kit._cites import Cite, cite
from posflow.proofs_checks.kit._code import code_changes, code_state
from posflow.proofs_checks.kit._controls import biased, rejects
from posflow.proofs_checks.kit._counterexamples import (
    SearchResult,
    describe,
    export_test,
    get_relaxation,
    load_record,
    relaxations_of,
    replay,
    save_record,
    search,
    write_test,
)
from posflow.proofs_checks.kit._decide import (
    OPS,
    Decision,
    combine,
    decide,
    family_level,
    sensitivity,
    sensitivity_grid,
)
from posflow.proofs_checks.kit._evidence import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    Evidence,
    Figure,
    Measurement,
    Panel,
    Series,
    Table,
    Tolerance,
    at_least,
    at_most,
    close,
    exact_tol,
    fp_tol,
    holds,
    info,
    param_tol,
    stat_tol,
    undecided,
)
from posflow.proofs_checks.kit._figures import (
    COLORS,
    figure_suffixes,
    plot_profile,
    plot_profiles,
    render,
    save,
)
from posflow.proofs_checks.kit._frames import results_frame
from posflow.proofs_checks.kit._inputs import random_alibi, random_causal, random_layers
from posflow.proofs_checks.kit._jackknife import (
    crossfit_decision,
    crossfit_library_reference,
    jackknife_controls,
)
from posflow.proofs_checks.kit._lock import (
    Expectation,
    expectation,
    expectations,
    lock_mismatches,
)
from posflow.proofs_checks.kit._mutants import (
    Kill,
    Mutant,
    add_mutant,
    all_mutants,
    cited_calls,
    clear_caches,
    counting,
    kill_table,
    mutants_of,
    mutated,
)
from posflow.proofs_checks.kit._optional import no_torch, optional_torch
from posflow.proofs_checks.kit._plain_torch import plain_influence
from posflow.proofs_checks.kit._power import mdd_vs_judge, power_controls, powered_depth
from posflow.proofs_checks.kit._quiet import nan_max, quiet, quiet_log
from posflow.proofs_checks.kit._registry import (
    ERROR,
    STATUSES,
    Claim,
    Context,
    Relaxation,
    Result,
    Results,
    add_relaxation,
    all_claims,
    claim_modules,
    get_claim,
    register,
    run_claim,
    select,
    timing_label,
    verify,
)
from posflow.proofs_checks.kit._regression import (
    deviation,
    flatten,
    load_reference,
    regression,
    regression_measurements,
    store_reference,
)
from posflow.proofs_checks.kit._report import (
    TIMING_NOTE,
    git_commit,
    jsonable,
    measurement_rows,
    provenance,
    records,
    write_report,
)
from posflow.proofs_checks.kit._scope import SCOPE_FIELDS, Scope, Setting, scope_line
from posflow.proofs_checks.kit._setting import not_in_setting, scoped
from posflow.proofs_checks.kit._stats import (
    FAMILY_LEVEL,
    FAMILY_Z,
    binomial_reason,
    binomial_z_above,
    binomial_z_below,
    binomial_z_two_sided,
    claim_rng,
    family_reason,
    loglog_slope,
    mean_se,
    plain,
    z_at_most,
    z_limit,
    z_se_tol,
)
from posflow.proofs_checks.kit._styles import PALETTE, SCHEME_COLORS, SCHEME_LABELS
from posflow.proofs_checks.kit._u_test import (
    U_DEPTHS,
    U_END_MARGIN,
    U_MARGINS,
    U_MIN_DEPTH,
    interior_depth,
    is_u,
    valley,
)

__all__ = [
    "CHAIN",
    "COLORS",
    "DENSE_APPLY",
    "ERROR",
    "FAILS",
    "FAMILY_LEVEL",
    "FAMILY_Z",
    "HOLDS",
    "INCONCLUSIVE",
    "OPS",
    "PALETTE",
    "RESIDUAL_STEP",
    "SCHEME_COLORS",
    "SCHEME_LABELS",
    "SCOPE_FIELDS",
    "SOURCES",
    "STATUSES",
    "STYLIZED",
    "STYLIZED_INPUTS",
    "SUMMABILITY_TEST",
    "TIMING_NOTE",
    "U_DEPTHS",
    "U_END_MARGIN",
    "U_MARGINS",
    "U_MIN_DEPTH",
    "U_TEST",
    "Cite",
    "Claim",
    "Context",
    "Decision",
    "Evidence",
    "Expectation",
    "Figure",
    "Kill",
    "Measurement",
    "Mutant",
    "Panel",
    "Relaxation",
    "Result",
    "Results",
    "Scope",
    "SearchResult",
    "Series",
    "Setting",
    "Table",
    "Tolerance",
    "add_mutant",
    "add_relaxation",
    "all_claims",
    "all_mutants",
    "anchor",
    "at_least",
    "at_most",
    "biased",
    "binomial_reason",
    "binomial_z_above",
    "binomial_z_below",
    "binomial_z_two_sided",
    "catalog_records",
    "cite",
    "cited_calls",
    "claim_modules",
    "claim_rng",
    "clear_caches",
    "close",
    "code_changes",
    "code_state",
    "combine",
    "constant_result",
    "counting",
    "crossfit_decision",
    "crossfit_library_reference",
    "decide",
    "describe",
    "deviation",
    "exact_tol",
    "examples",
    "expectation",
    "expectations",
    "export_test",
    "family_level",
    "family_reason",
    "figure_suffixes",
    "flatten",
    "fp_tol",
    "get_claim",
    "get_relaxation",
    "git_commit",
    "holds",
    "info",
    "interior_depth",
    "is_u",
    "jackknife_controls",
    "jsonable",
    "kill_table",
    "leaky_residual_step",
    "load_record",
    "load_reference",
    "lock_mismatches",
    "loglog_slope",
    "loose_is_u",
    "mdd_vs_judge",
    "mean_se",
    "measurement_rows",
    "mutants_of",
    "mutated",
    "nan_max",
    "negated_result",
    "no_torch",
    "not_in_setting",
    "optional_torch",
    "param_tol",
    "plain",
    "plain_influence",
    "plot_profile",
    "plot_profiles",
    "power_controls",
    "powered_depth",
    "provenance",
    "quiet",
    "quiet_log",
    "random_alibi",
    "random_causal",
    "random_layers",
    "records",
    "register",
    "regression",
    "regression_measurements",
    "rejects",
    "relaxations_of",
    "render",
    "replay",
    "results_frame",
    "reversed_layer_order",
    "run_claim",
    "save",
    "save_record",
    "scaled_argument",
    "scaled_keyword",
    "scaled_result",
    "scope_line",
    "scoped",
    "search",
    "select",
    "sensitivity",
    "sensitivity_grid",
    "stat_tol",
    "store_reference",
    "swapped_residual_weights",
    "timing_label",
    "to_markdown",
    "transposed_dense_apply",
    "undecided",
    "valley",
    "verify",
    "write_report",
    "write_test",
    "z_at_most",
    "z_limit",
    "z_se_tol",
]
