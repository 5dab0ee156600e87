"""A package's public face, loaded lazily (PEP 562; docs/project.md, "Public API"): the package names what it exports
and the module that defines each, and a name is imported on its first use, so that importing one module of the
package (a figure's torch-free document, say) does not load the rest."""

from __future__ import annotations

import importlib

__all__ = ["lazy_exports"]


def lazy_exports(package: str, where: dict) -> tuple:
    """(``__getattr__``, ``__dir__``) for ``package``'s ``__init__``: each name of ``where`` ({name: module}) read
    from its module when first asked for; any other name is an AttributeError (submodules import as ever)."""

    def __getattr__(name: str):
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(where[name]), name)

    def __dir__() -> list:
        return sorted(where)

    return __getattr__, __dir__
