"""Helpers for users who check programs against golden files from pytest
(registered as a pytest plugin through the `pytest11` entry point)."""
from __future__ import annotations
