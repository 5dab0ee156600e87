"""The one mechanism behind the project's registries (docs/extending.md): engines (``decoders.engines.registry``),
drafts (``decoders.drafts``) and audit tests (``decoders.audit.battery``) each keep their entries in a dict by name and
add one with ``register``."""

__all__ = ["register"]


def register(entries: dict, entry, what: str):
    """Adds ``entry`` to ``entries`` under ``entry.name`` (a name already there is a ValueError naming ``what`` it
    is); returns it."""
    if entry.name in entries:
        raise ValueError(f"{what} {entry.name!r} is already registered")
    entries[entry.name] = entry
    return entry
