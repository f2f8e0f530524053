"""activation ops: declared in the registry (see registry.py)."""
from __future__ import annotations
