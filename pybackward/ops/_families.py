"""Importing this module registers every op family (the registry is derived
from these imports; nothing else lists op types)."""
from . import elementwise  # noqa: F401
