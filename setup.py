"""Package layout of posflow (metadata lives in pyproject.toml).

The repository keeps its topical folders at the root (``theory/``, ``simulate/``,
``proofs_checks/``), but they install under one namespace, ``posflow``, so that nothing claims a
generic top-level name such as ``simulate`` (an unrelated PyPI project) and a user's own
``simulate.py`` cannot shadow it. setuptools' ``package_dir`` maps each import name to its folder:

    posflow                -> src/posflow        (the small public API, ``python -m posflow``)
    posflow.theory         -> theory
    posflow.simulate       -> simulate
    posflow.proofs_checks  -> proofs_checks

The top-level ``posflow`` package sits in ``src/`` rather than in a root ``posflow/`` folder so
that running Python from the checkout cannot import a half package (a root ``posflow/`` would
shadow the installed one and hide its subpackages). Subpackages are found automatically with
``find_packages`` in each folder, so a new subpackage ships without editing this file; package
data (the measured configs, their licence notice, the committed extrapolation results) ship with
``posflow.simulate`` and are read with ``importlib.resources``.
"""

from setuptools import find_packages, setup

ROOTS = {"theory": "theory", "simulate": "simulate", "proofs_checks": "proofs_checks"}

package_dir = {"posflow": "src/posflow"}
packages = ["posflow"]
for name, folder in ROOTS.items():
    package_dir[f"posflow.{name}"] = folder
    packages.append(f"posflow.{name}")
    for sub in find_packages(folder):
        packages.append(f"posflow.{name}.{sub}")
        package_dir[f"posflow.{name}.{sub}"] = f"{folder}/{sub.replace('.', '/')}"

setup(
    package_dir=package_dir,
    packages=packages,
    package_data={
        "posflow.simulate": [
            "data/*.json.gz",
            "data/*.txt",
            "data/extrapolation_v2/*.json",
            "data/smollm2/*.json",
            "data/smollm2/context_x*/*.json",
            "data/synthetic_v1/*.json",
            "data/gemma3/*.json",
        ],
        "posflow.proofs_checks.kit": ["expected.toml", "templates/*.j2"],
        "posflow.proofs_checks.claims": ["references/*.json"],
    },
    include_package_data=False,
)
