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
    """The collector off for the block. On the way out, what was built
    meanwhile - all of it still in the youngest generation - is moved to the
    oldest without being walked (`gc.freeze` then `gc.unfreeze`, constant
    time): otherwise the next few young collections after the block walk
    every object of a program just loaded or differentiated, promote them
    and walk them again one generation up (~50 ms around the 3,000-layer
    MLP's load and pass), freeing nothing. Cyclic garbage among them is
    collected by the next full collection, as any old object's (`_promote`
    makes sure one runs)."""
    was_on = gc.isenabled()
    gc.disable()
    start = gc.get_count()[0] if was_on else 0
    try:
        yield
    finally:
        if was_on:
            _promote(start)
            gc.enable()


#: A full collection runs once the blocks have promoted this many objects more
#: than the heap held after the last one (and at least this many).
MIN_GROWTH = 1_000_000
_grown = 0              # objects promoted by the blocks since the last full collection
_heap_after_full = 0    # tracked objects right after it


def _promote(start: int) -> None:
    """Move what a block built to the oldest generation, unwalked (`gc.freeze`
    then `gc.unfreeze`: constant time). Objects promoted so do not count
    towards CPython's own trigger of a full collection, so a process that
    loads and drops programs in a loop would keep their cyclic garbage
    (blocks and op views refer to each other); a full collection runs here
    once the blocks have promoted more objects than the heap held after the
    last one (at least MIN_GROWTH: a single `append` on a 3,000-layer program
    promotes ~250,000 and never pays one). Geometric, so amortised O(1) per
    object, and garbage stays within about the live heap or MIN_GROWTH
    objects. `start`: the young generation's count when the block began (the
    collector off, it grows by every object made and shrinks by every one
    freed: the difference is what the block built, found in O(1))."""
    global _grown, _heap_after_full
    _grown += max(gc.get_count()[0] - start, 0)
    gc.freeze()
    gc.unfreeze()
    if _grown > max(MIN_GROWTH, _heap_after_full):
        _full_collection()
        _heap_after_full = len(gc.get_objects())     # (O(heap), as the collection was)
        _grown = 0


def _full_collection() -> None:
    gc.collect()
