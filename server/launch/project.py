"""One run of a launch file analysed exactly as a YAML config is: the run is written as a YAML document (its
config as `base_config`, its `key=value` overrides as keys, its slice and XLA flags as ASAP's comments), that
document goes through the same loader, checks, estimate and agents, and everything they report is carried back to
the launch file, character by character (server/launch/located.py).

The document (`RunDocument`) is ASAP's own working copy, never shown or written. Its `key=value` keys resolve as
MaxText's command line (resolve.load's `command_keys`: over the model file, origin "command"). A fix is vetted on
the document as a YAML fix is (server/config/safe_edits.py); what it changes is then written back as launch-file
edits (`launch_edits`): a value replaced inside its token (the shell's quoting around it kept), a new key appended
to the command as ` key=value`, a removed key's token deleted. Edits that cannot be written where the value lives
(a value built from several expansions, a recipe's value in MaxText's Python) are refused.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from server.common.codes import DiagCode
from server.common.findings import Finding, Severity, Span, TextEdit
from server.config.models import DIM_KEYS
from server.config.resolve import RUN_DOCUMENT_MARKER
from server.config.source import YamlSyntaxError, parse
from server.launch.located import Located
from server.launch.runs import Override, Run, Setting

# The keys the checks and the estimate read: one of these known only at run time is worth a word; any other (run_name,
# base_output_directory, dataset_path) is expected to be filled in by the command and is not.
PRICED_KEYS = frozenset(
    {
        *DIM_KEYS,
        "model_name",
        "per_device_batch_size",
        "max_target_length",
        "remat_policy",
        "compile_topology",
        "compile_topology_num_slices",
        "num_slices",
        "gradient_accumulation_steps",
        "weight_dtype",
        "dtype",
        "quantization",
        "attention",
        "scan_layers",
        "decoder_layer_input",
        "override_model_config",
    }
)
_SAFE_WORD = re.compile(r"^[A-Za-z0-9_.,:/@%+=-]*$")  # a value written into a shell word needs no quoting


@dataclass
class _Line:
    """What one line of the run's document stands for in the launch file: the key and the value of an override,
    or a setting (slice, flags) by column range."""

    whole: Located  # the line as a whole (findings on the line but on no segment)
    segments: list[tuple[int, int, Located]] = field(default_factory=list)  # (first col, end col, where)
    override: Override | None = None


@dataclass
class RunDocument:
    run: Run
    text: str  # the YAML document
    lines: list[_Line]
    command_keys: frozenset[str]
    overrides: dict[str, Override]  # the keys written as lines (the last of a key given twice)
    findings: list[Finding]  # what the command line itself gets wrong, located in the launch file
    base: str | None  # the base_config written (None: MaxText's base.yml, ASAP's defaults)


class Positions:
    """Offsets of a launch file's text as (line, column) spans (lines as LSP clients count them)."""

    def __init__(self, text: str):
        self.text = text
        self.starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]

    def at(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self.starts, offset) - 1
        return line, offset - self.starts[line]

    def span(self, start: int, end: int) -> Span:
        a, b = self.at(start), self.at(max(start, end))
        return Span(a[0], a[1], b[0], b[1])

    def of(self, loc: Located) -> Span | None:
        ext = loc.extent()
        return self.span(*ext) if ext is not None else None


def run_document(run: Run, path: Path | None, positions: Positions, base: str | None) -> RunDocument:
    """The run written as a YAML document. `base`: the base_config to write (a path on disk or a key of MaxText's
    configs), None for MaxText's base.yml (ASAP's defaults hold its values)."""
    lines: list[str] = []
    maps: list[_Line] = []
    findings: list[Finding] = []

    def add(text: str, m: _Line) -> None:
        lines.append(text)
        maps.append(m)

    whole = run.source
    add(RUN_DOCUMENT_MARKER, _Line(whole))
    if base is not None:
        at = run.config if run.config is not None else whole
        add(f"base_config: {json.dumps(base)}", _Line(at, [(0, 11, at)]))
    last: dict[str, Override] = {}
    for o in run.overrides:
        if o.key in last:
            p = positions.of(last[o.key].token)
            findings.append(
                Finding(
                    DiagCode.LAUNCH_COMMAND,
                    Severity.WARNING,
                    f"{o.key} is given again later on the command line ({o.key}={o.value}); MaxText uses the last",
                    o.key,
                    path,
                    p or Span.point(0),
                )
            )
        last[o.key] = o
    command_keys: set[str] = set()
    for o in last.values():
        if o.symbolic:
            if o.key in PRICED_KEYS or o.key.endswith("_parallelism"):
                span = positions.of(o.value_loc) or positions.of(o.token) or Span.point(0)
                findings.append(
                    Finding(
                        DiagCode.LAUNCH_COMMAND,
                        Severity.INFORMATION,
                        f"{o.key}={o.value} is known only when the command runs; ASAP reads the value the config "
                        "and MaxText's defaults give",
                        o.key,
                        path,
                        span,
                    )
                )
            continue
        written = _yaml_value(o.key, o.value)
        head = f"{o.key}: "
        segs = [(0, len(o.key), o.key_loc)]
        if written == o.value:
            segs.append((len(head), len(head) + len(o.value), o.value_loc))
        else:
            segs.append((len(head), len(head) + len(written), o.value_loc if len(o.value_loc) else o.token))
        add(head + written, _Line(o.token, segs, o))
        command_keys.add(o.key)
    if run.device is not None and not run.device.loc.is_symbolic:
        text, segs = "# asap: ", []
        segs.append((len(text) + 6, len(text) + 6 + len(run.device.value), run.device.loc))
        text += f"slice={run.device.value}"
        n = run.num_slices
        if n is not None and not n.loc.is_symbolic:
            text += " slices="
            segs.append((len(text), len(text) + len(n.value), n.loc))
            text += n.value
        add(text, _Line(run.device.loc, segs))
    flags = _flags(run.flags)
    if flags is not None:
        head = "# LIBTPU_INIT_ARGS="
        add(head + flags.text, _Line(flags, [(len(head), len(head) + len(flags), flags)]))
    text = "\n".join(lines) + "\n"
    return RunDocument(run, text, maps, frozenset(command_keys), last, findings, base)


def _flags(s: Setting | None) -> Located | None:
    """The flags as one line: symbolic fields dropped, line breaks as spaces."""
    if s is None:
        return None
    kept = [f for f in s.loc.fields() if not f.is_symbolic]
    if not kept:
        return None
    parts: list[Located] = []
    for f in kept:
        if parts:
            parts.append(Located.synthetic(" "))
        parts.append(f)
    return Located.join(parts)


def _yaml_value(key: str, value: str) -> str:
    """`value` as the document writes it: as given when YAML reads it back as one scalar of `key` (what MaxText's
    OmegaConf.from_cli does with it), else as a quoted string."""
    if "\n" not in value and "\r" not in value and "#" not in value:
        try:
            src = parse(f"{key}: {value}\n")
            if list(src.entries) == [key] and not isinstance(src.entries[key].value, (dict, list)):
                return value
        except YamlSyntaxError:
            pass
    return json.dumps(value)


# -- back to the launch file ------------------------------------------------------------------------------------
def map_span(doc: RunDocument, span: Span, positions: Positions) -> Span:
    """A span of the run's document as a span of the launch file."""
    line = doc.lines[span.line] if 0 <= span.line < len(doc.lines) else doc.lines[0]
    if 0 <= span.line < len(doc.lines):
        for a, b, loc in line.segments:
            if a <= span.column < max(b, a + 1) and span.end_line == span.line:
                i = span.column - a
                j = min(span.end_column, b) - a
                piece = loc[i:j] if j > i and len(loc) == b - a else loc
                got = positions.of(piece) if len(piece) else None
                if got is None and len(piece) == 0 and len(loc) == 0:
                    got = positions.of(line.whole)
                if got is not None:
                    return got
        for a, b, loc in line.segments:
            if a <= span.column <= b:
                got = positions.of(loc)
                if got is not None:
                    return got
    got = positions.of(line.whole) if line.whole is not None else None
    if got is not None:
        return got
    anchor = positions.of(doc.run.source)
    return Span.point(anchor.line) if anchor is not None else Span.point(0)


def map_finding(doc: RunDocument, f: Finding, path: Path | None, positions: Positions) -> Finding:
    """`f` (of the run's document) in the launch file: its span and its related spans there; its fixes written as
    launch-file edits (dropped when they cannot be)."""
    if f.file is not None and path is not None and Path(f.file) != path:
        return f  # about another file (a parent config): as it is
    related = [
        replace(r, span=map_span(doc, r.span, positions)) if r.file is None or r.file == path else r for r in f.related
    ]
    msg = f.message.replace("asap slice comment", doc.run.device.label if doc.run.device else "slice")
    return replace(f, file=path, span=map_span(doc, f.span, positions), related=related, message=msg, fixes=[])


def launch_edits(doc: RunDocument, new_document: str, path: Path | None, positions: Positions) -> list[TextEdit]:
    """The launch-file edits that make the run say what `new_document` (the run's document after a fix) says.
    Raises ValueError when a change cannot be written where the value lives."""
    try:
        after = parse(new_document)
    except YamlSyntaxError as e:
        raise ValueError(f"the fixed run does not read back: {e.message}") from e
    before = parse(doc.text)
    edits: list[TextEdit] = []
    appended: list[str] = []
    for key in after.entries:
        new_value = _written(after, key)
        if key in before.entries:
            if _written(before, key) == new_value:
                continue
            o = doc.overrides.get(key)
            if o is None:
                raise ValueError(f"{key} is not written on the command line")
            edits.append(_replace_value(o, new_value, path, positions))
        else:
            if key == "base_config":
                raise ValueError("the config argument cannot be changed by a fix")
            appended.append(f"{key}={_shell_word(new_value)}")
    for key in before.entries:
        if key not in after.entries:
            o = doc.overrides.get(key)
            if o is None:
                raise ValueError(f"{key} is not written on the command line")
            edits.append(_delete(o, path, positions))
    if appended:
        edits.append(_append(doc, " ".join(appended), path, positions))
    return edits


def _written(src: Any, key: str) -> str:
    """The text a key's value is written as in a document (YAML quotes removed from a string)."""
    ent = src.entries[key]
    line = src.lines[ent.value_span.line]
    token = line[ent.value_span.column : ent.value_span.end_column].strip()
    if token[:1] in ("'", '"') and isinstance(ent.value, str):
        return ent.value
    return token


def _shell_word(value: str) -> str:
    if _SAFE_WORD.match(value):
        return value
    raise ValueError(f"{value!r} would need shell quoting")


def _replace_value(o: Override, value: str, path: Path | None, positions: Positions) -> TextEdit:
    if not o.written:
        raise ValueError(f"{o.key} comes from the benchmark recipe, in MaxText's Python; override it there")
    rng = o.value_loc.source_range()
    if rng is None and len(o.value_loc) == 0:
        key_rng = o.key_loc.source_range()
        if key_rng is not None:  # `key=` with an empty value: write after the `=`
            rng = (key_rng[1] + 1, key_rng[1] + 1)
    if rng is None or o.value_loc.is_symbolic:
        raise ValueError(f"{o.key}'s value is built from several places in the file; edit it there")
    return TextEdit(path, positions.span(*rng), _shell_word(value))


def _delete(o: Override, path: Path | None, positions: Positions) -> TextEdit:
    if not o.written:
        raise ValueError(f"{o.key} comes from the benchmark recipe, in MaxText's Python")
    rng = o.token.source_range()
    if rng is None:
        raise ValueError(f"{o.key}=... is built from several places in the file; edit it there")
    start, end = rng
    text = positions.text
    while start > 0 and text[start - 1] in " \t":
        start -= 1
    return TextEdit(path, positions.span(start, end), "")


def _append(doc: RunDocument, words: str, path: Path | None, positions: Positions) -> TextEdit:
    """` key=value` after the run's last override written contiguously (else after its config argument)."""
    if not doc.run.shell:
        raise ValueError("the command is a list of arguments; add the key as an item of its own")
    candidates = [o.token for o in doc.run.overrides if o.written] + (
        [doc.run.config] if doc.run.config is not None else []
    )
    ends = [r[1] for loc in candidates if (r := loc.source_range()) is not None and not loc.is_symbolic]
    if not ends:
        raise ValueError("no argument of the command is written where a key could follow it")
    at = max(ends)
    return TextEdit(path, positions.span(at, at), " " + words)
