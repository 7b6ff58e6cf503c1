"""A string that remembers, character by character, where in the launch file it was written.

A launch file's runs are built by static expansion: `MAXTEXT_ARGS="model_name=... ici_fsdp_parallelism=4"` is
substituted into `--command="python3 -m MaxText.train base.yml ${MAXTEXT_ARGS}"`, which is parsed again as the
shell in the container would. Every character keeps the offset (code points from the start of the file) it was
written at, so a `key=value` found three expansions deep still points at its token for a diagnostic, a hover and a
quick fix. A character from a value ASAP cannot know statically (`${BASE_OUTPUT_DIR}` never assigned in the file,
`$(date)`) keeps its source text and is marked symbolic: such a value is shown as written and never checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

NOWHERE = -1  # a character written by no one in the file (a separator ASAP inserted)


@dataclass(frozen=True)
class Located:
    text: str
    offsets: tuple[int, ...]  # one per character of `text`: its offset in the file, NOWHERE when none
    symbolic: tuple[bool, ...]  # one per character: it stands for a value unknown until run time

    @staticmethod
    def of(text: str, start: int, symbolic: bool = False) -> Located:
        """`text` written contiguously at offset `start`."""
        return Located(text, tuple(range(start, start + len(text))), (symbolic,) * len(text))

    @staticmethod
    def synthetic(text: str) -> Located:
        return Located(text, (NOWHERE,) * len(text), (False,) * len(text))

    @staticmethod
    def join(parts: Iterable[Located]) -> Located:
        parts = list(parts)
        return Located(
            "".join(p.text for p in parts),
            tuple(o for p in parts for o in p.offsets),
            tuple(s for p in parts for s in p.symbolic),
        )

    def __len__(self) -> int:
        return len(self.text)

    def __getitem__(self, key: slice) -> Located:
        return Located(self.text[key], self.offsets[key], self.symbolic[key])

    @property
    def is_symbolic(self) -> bool:
        return any(self.symbolic)

    def source_range(self) -> tuple[int, int] | None:
        """(start, end) offsets of the file this string is written at, when it is written there as one contiguous
        run of characters (so that replacing that range replaces exactly this string); else None."""
        if not self.offsets:
            return None
        first = self.offsets[0]
        if first == NOWHERE or any(o != first + i for i, o in enumerate(self.offsets)):
            return None
        return first, first + len(self.offsets)

    def anchor(self) -> int | None:
        """The first offset in the file any of its characters was written at (None: none was)."""
        return next((o for o in self.offsets if o != NOWHERE), None)

    def extent(self) -> tuple[int, int] | None:
        """The smallest range of the file holding every character written there (None: none was)."""
        written = [o for o in self.offsets if o != NOWHERE]
        return (min(written), max(written) + 1) if written else None

    def split(self, sep: str = "=", maxsplit: int = 1) -> list[Located]:
        out: list[Located] = []
        rest = self
        while maxsplit and (i := rest.text.find(sep)) >= 0:
            out.append(rest[:i])
            rest = rest[i + len(sep) :]
            maxsplit -= 1
        return [*out, rest]

    def fields(self) -> Iterator[Located]:
        """The whitespace-separated fields (the shell's splitting of an unquoted expansion, IFS unset)."""
        i, n = 0, len(self.text)
        while i < n:
            while i < n and self.text[i] in " \t\n":
                i += 1
            j = i
            while j < n and self.text[j] not in " \t\n":
                j += 1
            if j > i:
                yield self[i:j]
            i = j
