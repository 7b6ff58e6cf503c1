"""Where a run's XLA flags come from, and what ASAP read from them: the `LIBTPU_INIT_ARGS` / `XLA_FLAGS` string the
estimate is priced under (server/config/xla_flags.py parses it into MaxText's flag groups).

A run states its flags in its launch command, which ASAP does not see; so they are read, in this order of
precedence (the first source that states flags is used, the others are not merged in):

1. the command line's `--xla-flags "<string>"` (`asap estimate`, `asap analyze`, `asap check`): what this one run is
   asked about;
2. a comment in the config itself, for users who keep only the YAML, e.g.
   `# LIBTPU_INIT_ARGS="--xla_tpu_enable_data_parallel_all_reduce_opt=true ..."` or `# export XLA_FLAGS=...`
   (quotes optional; several such lines, of either variable, are concatenated in file order);
3. the editor setting `asap.xlaFlags`: the flags of every run of the workspace;
4. none stated: libtpu's defaults are assumed, and every surface says so.

Launch commands (shell scripts, Kubernetes manifests, XPK, benchmark recipes) are a source of their own, kind
"launch" (server/launch/analysis.py): LIBTPU_INIT_ARGS as the command's environment holds it, or the recipe's
xla_flags; below the command line's `--xla-flags`, above the rest.

Bad input never raises: a token that is not a flag, a value of the wrong kind or a flag given twice is kept as
`problems` (server/config/xla_flags.py) and, for the config's comment, becomes a warning (ASAP011) on the comment
line and column where it is written. Flags of no known group are kept and listed, not reported.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from server.common.codes import DiagCode
from server.common.findings import Finding, Severity, Span
from server.config.xla_flags import FlagValue, XlaFlags, parse_xla_flags

# The sources, most specific first.
PRECEDENCE: tuple[str, ...] = ("cli", "launch", "comment", "setting")

# Flags strings longer than this are cut there (a flags string of a real run is a few KB): the hover, the JSON
# and the diagnostics stay bounded whatever is pasted into a setting or a command line.
MAX_FLAGS_CHARS = 100_000
# At most this many ASAP011 warnings per document, and problems listed per JSON document; the last says how many
# more there are.
MAX_REPORTED = 20

# `# LIBTPU_INIT_ARGS=...`, `#export XLA_FLAGS = ...`: a whole-line YAML comment naming one of the two variables.
FLAGS_COMMENT = re.compile(r"^\s*#\s*(?:export\s+)?(?P<var>LIBTPU_INIT_ARGS|XLA_FLAGS)\s*=(?P<value>.*)$")
# A shell reference to the variable being extended (`LIBTPU_INIT_ARGS="${LIBTPU_INIT_ARGS} --x=1"`): the lines are
# concatenated anyway, so it stands for nothing.
_SELF_REFERENCE = re.compile(r"^\$\{?(LIBTPU_INIT_ARGS|XLA_FLAGS)\}?$")
# YAML ends a comment at these (server/config/source.py), though Python's str.splitlines does not split there.
_COMMENT_ENDS = re.compile("[\x85\u2028\u2029]")

EDITOR_HOW = 'state yours in a `# LIBTPU_INIT_ARGS="..."` comment in the config or the `asap.xlaFlags` setting'
CLI_HOW = 'state yours with --xla-flags or a `# LIBTPU_INIT_ARGS="..."` comment in the config'


def _clean(text: str) -> str:
    """`text` as valid Unicode, at most MAX_FLAGS_CHARS: a command line's undecodable bytes arrive as lone
    surrogates (Python's surrogateescape), and JSON may carry them too; either would fail when printed or hashed."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    return text[:MAX_FLAGS_CHARS]


@dataclass(frozen=True)
class TokenAt:
    """Where one token of a comment source is written: its 0-based line and columns (code points)."""

    line: int
    column: int
    end_column: int


@dataclass(frozen=True)
class FlagSource:
    """One place that states the run's flags: its kind (PRECEDENCE), the flags string as read (quotes and comment
    markers stripped, lines concatenated), and for a comment where each of its tokens is written."""

    kind: str
    text: str
    variables: tuple[str, ...] = ()  # the comment's variable names, in order (LIBTPU_INIT_ARGS, XLA_FLAGS)
    tokens: tuple[TokenAt, ...] = ()  # one per token of `text`, for a comment
    truncated: bool = False
    comment_lines: tuple[int, ...] = ()  # the 0-based lines of a comment source (with or without tokens)
    label: str = ""  # how a launch source is named ("LIBTPU_INIT_ARGS at line 12")

    @classmethod
    def given(cls, kind: str, text: str | None) -> FlagSource | None:
        """A string from the command line or a setting; None when there is none. A blank setting states nothing
        (the setting's default is blank); a blank `--xla-flags ""` states "no flags": libtpu's defaults, over a
        comment's."""
        if not isinstance(text, str) or (kind != "cli" and not text.strip()):
            return None
        clean = _clean(text)
        return cls(kind, clean, truncated=len(clean) < len(text))

    @property
    def lines(self) -> tuple[int, ...]:
        """The 0-based lines of a comment source, in order."""
        return self.comment_lines

    def describe(self) -> str:
        """Where the flags were read, in words: 'the comment on line 3', '--xla-flags', 'the asap.xlaFlags setting'."""
        if self.label:
            return self.label
        if self.kind == "comment":
            lines = [n + 1 for n in self.lines] or [0]
            return f"the comment on line {lines[0]}" if len(lines) == 1 else f"the comments on lines {_ranges(lines)}"
        return {"cli": "--xla-flags", "setting": "the asap.xlaFlags setting"}.get(self.kind, self.kind)

    def at(self, position: int) -> TokenAt | None:
        """Where token `position` (the parser's index) is written, for a comment source."""
        return self.tokens[position] if 0 <= position < len(self.tokens) else None


def _ranges(lines: list[int]) -> str:
    """'3-5, 9' for [3, 4, 5, 9]."""
    out: list[str] = []
    start = prev = lines[0]
    for n in [*lines[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(out)


def _value(rest: str) -> tuple[str, int]:
    """The flags string of a comment's value (what follows `=`) and its offset in `rest`: inside the quotes when
    quoted (up to the closing quote, or the end when it is missing), else up to a ` #` shell comment."""
    stripped = rest.lstrip()
    start = len(rest) - len(stripped)
    if stripped[:1] in ("'", '"'):
        quote = stripped[0]
        end = stripped.find(quote, 1)
        return (stripped[1:end] if end > 0 else stripped[1:]), start + 1
    cut = re.search(r"\s#", stripped)
    return (stripped[: cut.start()] if cut else stripped), start


def read_comment(lines: list[str]) -> FlagSource | None:
    """The flags the config's comments state (module docstring), with where each token is; None when no line of
    `lines` (the document's, as split_lines gives them) is such a comment."""
    texts: list[str] = []
    tokens: list[TokenAt] = []
    variables: list[str] = []
    found: list[int] = []
    total = 0
    truncated = False
    for i, line in enumerate(lines):
        m = FLAGS_COMMENT.match(line)
        if m is None:
            continue
        variables.append(m["var"])
        found.append(i)
        rest = m["value"]
        end = _COMMENT_ENDS.search(rest)
        rest = rest[: end.start()] if end else rest
        value, offset = _value(rest)
        base = m.start("value") + offset
        cursor = 0
        kept: list[str] = []
        for tok in value.split():  # the parser splits the same way (str.split), so token i is tokens[i]
            at = value.find(tok, cursor)
            cursor = at + len(tok)
            if _SELF_REFERENCE.match(tok):
                continue
            if total + len(tok) + 1 > MAX_FLAGS_CHARS:
                truncated = True
                break
            total += len(tok) + 1
            kept.append(tok)
            tokens.append(TokenAt(i, base + at, base + cursor))
        texts.append(" ".join(kept))
        if truncated:
            break
    if not variables:
        return None
    text = _clean(" ".join(t for t in texts if t))
    return FlagSource("comment", text, tuple(dict.fromkeys(variables)), tuple(tokens), truncated, tuple(found))


@dataclass(frozen=True)
class RunFlags:
    """The flags a config is priced under: the source used (None: none stated, libtpu's defaults assumed) and
    what the parser read from it."""

    source: FlagSource | None = None
    flags: XlaFlags | None = None

    @property
    def stated(self) -> bool:
        return self.source is not None

    def describe(self) -> str:
        """Inputs.flags_source: where the flags were read, or that libtpu's defaults are assumed."""
        return "libtpu defaults assumed" if self.source is None else self.source.describe()

    def key(self) -> str:
        """What an analysis cache key needs of the flags: the source's kind and its text."""
        return "defaults" if self.source is None else f"{self.source.kind}\0{self.source.text}"

    def groups_named(self) -> list[str]:
        """The groups the flags turn on or off, as the hover names them (name_groups)."""
        if self.flags is None:
            return []
        return name_groups((name, g.key, g.key_value) for name, g in self.flags.groups().items() if g.is_set)

    def problem_count(self) -> int:
        if self.flags is None:
            return 0
        return len(self.flags.problems) + len(self.flags.repeated) + (1 if self.source and self.source.truncated else 0)

    def hover_line(self, how: str = EDITOR_HOW) -> str:
        """One line: which flags the estimate assumed and where to state yours (`how`), e.g. 'XLA flags: from the
        comment on line 3: cf_for_all_gather, data_parallel_overlap (1 unknown kept: xla_foo)'."""
        if self.source is None or self.flags is None:
            return summary_line(None, [], [], 0, how)
        unknown = [s.name for s in self.flags.unknown]
        return summary_line(self.source.describe(), self.groups_named(), unknown, self.problem_count(), how)

    def to_json(self) -> dict[str, Any]:
        """The `xla_flags` object of `asap estimate --json` and `asap analyze --json`: where the flags were read
        (`source`: cli, launch, comment, setting, or libtpu_defaults; `lines`, 1-based, for a comment or launch),
        the groups set with their key flag's value and every flag of theirs, the unknown flags (kept), the flags
        given more than once and the problems (at most MAX_REPORTED listed; `problems_total` counts them all)."""
        src, fl = self.source, self.flags
        problems = located_problems(self)
        return {
            "source": "libtpu_defaults" if src is None else src.kind,
            "described": self.describe(),
            "lines": [n + 1 for n in src.lines] if src is not None and src.kind in ("comment", "launch") else [],
            "variables": list(src.variables) if src is not None else [],
            "text": src.text if src is not None else None,
            "groups": {}
            if fl is None
            else {
                name: {
                    "library_constant": g.library_constant,
                    "key": g.key,
                    "key_value": g.key_value,
                    "flags": dict(g.values),
                }
                for name, g in fl.groups().items()
                if g.is_set
            },
            "unknown": [] if fl is None else [{"name": s.name, "value": s.value} for s in fl.unknown],
            "repeated": [] if fl is None else list(fl.repeated),
            "problems": [p.to_json() for p in problems[:MAX_REPORTED]],
            "problems_total": len(problems),
        }


def name_groups(groups: Iterable[tuple[str, str | None, FlagValue | None]]) -> list[str]:
    """The set groups (name, key flag, its value) as a summary names them: 'data_parallel_overlap',
    'cf_for_all_gather off', 'scoped_vmem_limit=65536'. A group of which only helper flags it shares with another
    are set (the all-reduce fusion's, when only the all-gather one is asked for) is not named."""
    out: list[str] = []
    for name, key, value in groups:
        if key is None or value is True:
            out.append(name)
        elif value is False:
            out.append(f"{name} off")
        elif value is not None:
            out.append(f"{name}={value}")
    return out


def summary_line(described: str | None, named: list[str], unknown: list[str], problems: int, how: str) -> str:
    """The one line the hover and the command line show (RunFlags.hover_line); `described` None: none stated."""
    if described is None:
        return f"XLA flags: libtpu defaults assumed — {how}"
    if not named and not unknown and not problems:
        return f"XLA flags: {described} sets none: libtpu defaults assumed"
    what = ", ".join(named) if named else "none of MaxText's flag groups (libtpu defaults for the rest)"
    extra: list[str] = []
    if unknown:
        shown = ", ".join(unknown[:3]) + (f" and {len(unknown) - 3} more" if len(unknown) > 3 else "")
        extra.append(f"{len(unknown)} unknown kept: {shown}")
    if problems:
        extra.append(f"{problems} problem{'s' if problems != 1 else ''}")
    return f"XLA flags: from {described}: {what}" + (f" ({'; '.join(extra)})" if extra else "")


@dataclass(frozen=True)
class LocatedProblem:
    """A problem of the flags, with the token and, for a comment, where it is written."""

    message: str
    token: str | None = None
    at: TokenAt | None = None

    def to_json(self) -> dict[str, Any]:
        where = {} if self.at is None else {"line": self.at.line + 1, "column": self.at.column + 1}
        token = self.token if self.token is None or len(self.token) <= 200 else self.token[:200] + "..."
        return {"message": self.message, "token": token, **where}


def located_problems(rf: RunFlags) -> list[LocatedProblem]:
    """Every problem of the flags in reading order: tokens not read as intended, flags given more than once (at
    their last appearance: absl keeps the last value) and a string cut at MAX_FLAGS_CHARS."""
    src, fl = rf.source, rf.flags
    if src is None or fl is None:
        return []
    out = [LocatedProblem(p.message, p.token, src.at(p.position)) for p in fl.problems]
    for name in fl.repeated:
        setting = next(s for s in fl.settings if s.name == name)
        value = setting.text if setting.text is not None else ("true" if setting.value is True else "false")
        out.append(
            LocatedProblem(
                f"--{name} is given more than once; the last value, {value!r}, is used (absl's rule)",
                f"--{name}",
                src.at(setting.position),
            )
        )
    out.sort(key=lambda p: (p.at.line, p.at.column) if p.at is not None else (0, 0))
    if src.truncated:
        out.append(LocatedProblem(f"longer than {MAX_FLAGS_CHARS:,} characters: the rest is not read"))
    return out


def comment_findings(source: FlagSource | None, path: Path | None) -> list[Finding]:
    """The config comment's problems as ASAP011 warnings at the token they are about (the comment line for the
    rest); at most MAX_REPORTED, the last saying how many more there are. The comment is read whether or not
    another source wins: what is written in the file is wrong either way."""
    if source is None or source.kind not in ("comment", "launch"):
        return []
    problems = located_problems(RunFlags(source, parse_xla_flags(source.text)))
    first = source.lines[0] if source.lines else 0
    out: list[Finding] = []
    for i, p in enumerate(problems[:MAX_REPORTED]):
        span = Span(p.at.line, p.at.column, p.at.line, p.at.end_column) if p.at else Span.point(first)
        more = len(problems) - MAX_REPORTED
        tail = f" ({more} more problem{'s' if more != 1 else ''} not listed)" if i == MAX_REPORTED - 1 and more else ""
        msg = f"XLA flags: {p.message}{tail}"
        out.append(Finding(DiagCode.XLA_FLAGS_PROBLEM, Severity.WARNING, msg, None, path, span))
    return out


def resolve_flags(*sources: FlagSource | None) -> RunFlags:
    """The flags of the most specific source that states any (PRECEDENCE), parsed; libtpu's defaults when none
    does. Sources of a kind not in PRECEDENCE are ignored."""
    stated = [s for s in sources if s is not None and s.kind in PRECEDENCE]
    if not stated:
        return RunFlags()
    best = min(stated, key=lambda s: PRECEDENCE.index(s.kind))
    return RunFlags(best, parse_xla_flags(best.text))
