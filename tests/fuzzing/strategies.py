"""Hypothesis strategies for the bounded fuzz tests: a hostile config (`cases`) drawn from the seeds and the
mutations, shrinking towards fewer mutations; and `every_mutation`, explicit examples that send each mutation at
least once whatever the generation draws."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, TypeVar

from hypothesis import example
from hypothesis import strategies as st

from .mutations import ENDINGS, MUTATIONS, Case, build, seeds

POOL = seeds(random.Random(17))  # the examples and 12 model configs, the same every run
NAMES = sorted(MUTATIONS)

F = TypeVar("F", bound=Callable[..., Any])


@st.composite
def cases(draw: st.DrawFn, max_mutations: int = 4) -> Case:
    seed = draw(st.sampled_from(POOL))
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=max_mutations))
    salt = draw(st.integers(0, 2**32 - 1))
    return build(
        random.Random(salt),
        seed,
        names,
        ending=draw(st.sampled_from(ENDINGS)),
        final_newline=draw(st.booleans()),
        non_utf8=draw(st.booleans()),
    )


def explicit_cases() -> list[Case]:
    """One case per mutation, on seeds, line endings and encodings that vary with it."""
    return [
        build(random.Random(i), POOL[i % len(POOL)], [name], ENDINGS[i % len(ENDINGS)], i % 3 != 0, i % 6 == 5)
        for i, name in enumerate(NAMES)
    ]


def every_mutation(test: F) -> F:
    """`test` (given a `case`) also runs on `explicit_cases`."""
    for case in explicit_cases():
        test = example(case=case)(test)
    return test
