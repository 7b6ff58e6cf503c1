"""Findings: what ASAP reports about a config, located at a file, line and key.

Plain dataclasses shared by every producer (config loading, mesh rules, later the
estimate and profile analysis). The LSP adapter and the CLI convert them; nothing
here knows about either.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Any


class Severity(IntEnum):
    """Same numbering as LSP's DiagnosticSeverity, so conversion is a cast."""

    ERROR = 1
    WARNING = 2
    INFORMATION = 3
    HINT = 4

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True, order=True)
class Span:
    """A range in a file, 0-based lines and columns (columns in code points)."""

    line: int
    column: int
    end_line: int
    end_column: int

    @classmethod
    def point(cls, line: int, column: int = 0) -> Span:
        return cls(line, column, line, column)


@dataclass(frozen=True)
class TextEdit:
    """Replace `span` of `file` with `new_text`."""

    file: Path | None
    span: Span
    new_text: str


@dataclass(frozen=True)
class Fix:
    """A quick fix: minimal edits that repair the finding and touch nothing else."""

    title: str
    edits: tuple[TextEdit, ...]
    preferred: bool = False
    proposal: int | None = None  # the rank of the agents' proposal this fix applies (None: a rule's fix)


@dataclass(frozen=True)
class Related:
    """Another place that explains the finding (the other keys of a product, a parent file)."""

    file: Path | None
    span: Span
    message: str


@dataclass
class Finding:
    code: str
    severity: Severity
    message: str
    key: str | None
    file: Path | None
    span: Span
    fixes: list[Fix] = field(default_factory=list)
    related: list[Related] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The CLI's stable JSON shape: 1-based line and column, as editors and compilers print them."""
        return {
            "code": self.code,
            "severity": self.severity.label,
            "message": self.message,
            "key": self.key,
            "file": str(self.file) if self.file else None,
            "line": self.span.line + 1,
            "column": self.span.column + 1,
            "end_line": self.span.end_line + 1,
            "end_column": self.span.end_column + 1,
            "fixes": [f.title for f in self.fixes],
        }
