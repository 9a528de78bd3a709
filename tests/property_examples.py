"""How many examples the property tests draw: each full count under ``make test``, fewer in the inner loop.

A plain ``pytest`` (``make test``) draws each test's full count: Hypothesis's default of 100, or the count
the test sets as ``settings(max_examples=examples(n))``. ``make test-fast`` sets ``HYPOTHESIS_PROFILE=fast``:
every property test then draws at most :data:`FAST_EXAMPLES`, which keeps the inner loop short while the
full counts stay in ``make test``. Loaded by ``tests/conftest.py`` before any test module is imported.
"""

from __future__ import annotations

import os

from hypothesis import settings

FAST_EXAMPLES = 20
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "default")

# No per-example deadline: the examples are pure and fast, but on a loaded 2-core machine one of them can
# take longer than Hypothesis's 200 ms default, which failed a passing test (test_decisions.py, 2026-11-26).
settings.register_profile("default", deadline=None)
settings.register_profile("fast", max_examples=FAST_EXAMPLES, deadline=None)
settings.load_profile(PROFILE)  # an unknown name fails here, naming the registered ones


def examples(full: int) -> int:
    """The ``max_examples`` of a test whose full count is ``full``: ``full``, or at most
    :data:`FAST_EXAMPLES` under the ``fast`` profile."""
    return min(full, FAST_EXAMPLES) if PROFILE == "fast" else full
