"""Pausing Python's cyclic garbage collector around bulk work.

Loading a program and running the pass create many small, acyclic objects
(views, name lists). Generational collections triggered meanwhile walk an
ever larger heap and make the work superlinear in program size; reference
counting frees these objects anyway.
"""
from __future__ import annotations

import contextlib
import gc
from typing import Iterator


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
