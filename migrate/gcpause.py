"""Pause Python's cyclic garbage collector around bulk object construction."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused(*, promote: bool = False) -> Iterator[None]:
    """No cyclic GC inside: millions of new acyclic objects would trigger full passes costing more than the work.

    `promote`: on leaving, hand every object still alive to the oldest generation (unless something else keeps
    objects frozen), so the next young passes do not walk what was built either.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if promote and gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        if was_enabled:
            gc.enable()
