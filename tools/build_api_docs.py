"""Build the API reference (HTML) of pybackward with pdoc.

    pip install -e '.[docs]'            # pdoc (also in the `test` extra)
    python tools/build_api_docs.py [OUT_DIR]      # default: build/api-docs

Documents the package `pybackward` and every public submodule (found by
walking the package: names without a leading underscore, less `INTERNAL`),
from their docstrings and type hints; each module's `__all__`, where it has
one, decides what its page lists. Nothing is fetched at
build time or when the pages are read (pdoc's pages embed their CSS).
Exits non-zero if a module fails to import or a page is missing.
"""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Public-looking modules that are internal all the same (one op family each, CLI helpers, ...).
INTERNAL = ("pybackward.ops.", "pybackward.tensors.safe_pickle", "pybackward.legacy.validate", "pybackward.base.suffixes")


def modules() -> list[str]:
    """`pybackward` and its public submodules, sorted."""
    import pkgutil
    import pybackward
    names = ["pybackward"]
    for info in pkgutil.walk_packages(pybackward.__path__, "pybackward."):
        parts = info.name.split(".")
        if any(p.startswith("_") for p in parts) or info.name.startswith(INTERNAL):
            continue
        names.append(info.name)
    return sorted(names + ["pybackward.ops.registry", "pybackward.ops.custom"])


def build(out: Path) -> list[Path]:
    import pdoc
    import pdoc.render
    pdoc.render.configure(docformat="markdown", show_source=False, search=True,
                          footer_text="pybackward API reference")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")      # pdoc notes undocumented members; not errors here
        pdoc.pdoc(*modules(), output_directory=out)
    pages = sorted(out.rglob("*.html"))
    if not (out / "pybackward.html").exists():
        raise SystemExit(f"{out}: pybackward.html was not written")
    return pages


def main(argv: list[str]) -> None:
    out = Path(argv[0]) if argv else ROOT / "build" / "api-docs"
    pages = build(out)
    print(f"wrote {len(pages)} pages to {out} (open {out / 'index.html'})")


if __name__ == "__main__":
    main(sys.argv[1:])
