"""Where a launch file keeps its shell: the commands of a shell script, a Makefile's recipes, a Markdown file's
shell code blocks, and a Kubernetes manifest's containers (`command`/`args`, `bash -c` scripts included), each
with what the file says around them: a container's environment, its pod's TPU node selector, its JobSet's replica
count. Every string keeps its characters' offsets in the file (server/launch/located.py).

`commands_in(path, text, language_id)` is the one entry point; the kind of file is told by the editor's language
id when there is one, else by the file name and its first line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from markdown_it import MarkdownIt
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from server.launch.located import NOWHERE, Located
from server.launch.shell import MAX_NESTING, Command, Env, commands

# GKE's TPU node labels (cloud.google.com/kubernetes-engine/docs/concepts/plan-tpus, "TPU selection"): the
# accelerator label names the generation; the topology label its chips per axis.
ACCELERATOR_LABEL = "cloud.google.com/gke-tpu-accelerator"
TOPOLOGY_LABEL = "cloud.google.com/gke-tpu-topology"
# A pod template's annotation naming the slice its pods form, where the node selector names only the accelerator
# (tpu-recipes' Ironwood Gemma 4 manifests, c8cfe2f): the topology when no node selector label gives one.
SLICE_TOPOLOGY_ANNOTATION = "cloud.google.com/gke-tpu-slice-topology"
GKE_ACCELERATORS = {
    "tpu-v4-podslice": "v4",
    "tpu-v5-lite-podslice": "v5e",
    "tpu-v5-lite-device": "v5e",
    "tpu-v5p-slice": "v5p",
    "tpu-v6e-slice": "v6e",
    "tpu7x": "tpu7x",
}

SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh"})
_SHEBANG = re.compile(r"^#!.*\b(?:ba|z|da|k)?sh\b")
_FENCE_LANGS = frozenset({"", "bash", "sh", "shell", "console", "zsh", "shellscript", "shell-session"})
_PROMPT = re.compile(r"^\s*\$ ")
_MAKE_ASSIGN = re.compile(r"^(?:export\s+|override\s+)?(?P<name>[A-Za-z_][\w.]*)\s*(?:[:?+!]|::)?=[ \t]*(?P<value>.*)$")
_MAKE_REF = re.compile(r"\$(?:\((?P<a>[A-Za-z_][\w.]*)\)|\{(?P<b>[A-Za-z_][\w.]*)\})")


@dataclass
class Context:
    """What a file says about the commands it holds beyond their words (a Kubernetes pod's TPU selection)."""

    accelerator: Located | None = None  # the node selector's accelerator label value
    topology: Located | None = None  # the node selector's topology label value
    replicas: Located | None = None  # the JobSet's replicated job count: its slices
    flags: Located | None = None  # a container's LIBTPU_INIT_ARGS env entry


@dataclass
class Found:
    """A command and the context it runs in."""

    command: Command
    context: Context = field(default_factory=Context)
    nesting: int = 0
    argv_only: bool = False  # a container's argv run without a shell: a new argument is a new list item


def file_kind(path: Path | None, text: str, language_id: str | None = None) -> str | None:
    """ "shell", "make", "markdown", "yaml" or None (not a launch file ASAP reads)."""
    lid = (language_id or "").lower()
    if lid in ("shellscript", "sh", "bash", "zsh"):
        return "shell"
    if lid == "makefile":
        return "make"
    if lid == "markdown":
        return "markdown"
    if lid == "yaml":
        return "yaml"
    name = path.name.lower() if path is not None else ""
    suffix = path.suffix.lower() if path is not None else ""
    if suffix in (".sh", ".bash", ".zsh") or _SHEBANG.match(text[:200]):
        return "shell"
    if name in ("makefile", "gnumakefile") or suffix == ".mk":
        return "make"
    if suffix in (".md", ".markdown"):
        return "markdown"
    if suffix in (".yml", ".yaml"):
        return "yaml"
    return None


def commands_in(path: Path | None, text: str, language_id: str | None = None) -> list[Found]:
    """Every simple command of the file, with its context, in file order."""
    kind = file_kind(path, text, language_id)
    if kind == "shell":
        return [Found(c) for c in commands(Located.of(text, 0))]
    if kind == "make":
        return _make(text)
    if kind == "markdown":
        return _markdown(text)
    if kind == "yaml":
        return _kubernetes(text)
    return []


# -- Markdown -------------------------------------------------------------------------------------------------
def _line_starts(text: str) -> list[int]:
    starts = [0]
    for m in re.finditer(r"\r\n|\r|\n", text):
        starts.append(m.end())
    return starts


def _markdown(text: str) -> list[Found]:
    """The shell code blocks (fenced with bash/sh/shell/console or no language) of a Markdown file; a console
    block's `$ ` prompts are dropped."""
    starts = _line_starts(text)
    lines = text.splitlines()
    out: list[Found] = []
    for tok in MarkdownIt("commonmark").parse(text):
        if tok.type != "fence" or tok.map is None:
            continue
        lang = (tok.info or "").strip().split(" ")[0].lower()
        if lang not in _FENCE_LANGS:
            continue
        parts: list[Located] = []
        for i, content in enumerate(tok.content.splitlines()):
            n = tok.map[0] + 1 + i
            if n >= len(lines) or n >= len(starts):
                break
            col = max(lines[n].find(content), 0) if content else 0
            piece = Located.of(content, starts[n] + col)
            if lang in ("console", "shell-session") and (m := _PROMPT.match(piece.text)):
                piece = piece[m.end() :]
            parts += [piece, Located.synthetic("\n")]
        out += [Found(c) for c in commands(Located.join(parts))]
    return out


# -- Makefile -------------------------------------------------------------------------------------------------
def _make(text: str) -> list[Found]:
    """A Makefile's recipe lines (tab-indented), one rule's lines as one script: `$$` is the shell's `$`, a make
    variable assigned in the file (`X = ...`, `X := ...`) is expanded, any other `$(...)` stays symbolic."""
    starts = _line_starts(text)
    variables: dict[str, Located] = {}
    out: list[Found] = []
    recipe: list[Located] = []

    def flush() -> None:
        if recipe:
            out.extend(Found(c) for c in commands(Located.join(recipe)))
            recipe.clear()

    for n, line in enumerate(text.splitlines()):
        at = starts[n] if n < len(starts) else 0
        if line.startswith("\t"):
            body = Located.of(line, at)[1:]
            while body.text[:1] in ("@", "-", "+"):
                body = body[1:]
            recipe += [_make_expand(body, variables), Located.synthetic("\n")]
            continue
        flush()
        m = _MAKE_ASSIGN.match(line)
        if m and not line.lstrip().startswith("#"):
            variables[m["name"]] = _make_expand(Located.of(m["value"], at + m.start("value")), variables)
    flush()
    return out


def _make_expand(loc: Located, variables: dict[str, Located]) -> Located:
    parts: list[Located] = []
    i, t = 0, loc.text
    while i < len(t):
        if t.startswith("$$", i):
            parts.append(loc[i + 1 : i + 2])
            i += 2
            continue
        m = _MAKE_REF.match(t, i)
        if m:
            name = m["a"] or m["b"]
            value = variables.get(name)
            ref = loc[m.start() : m.end()]
            parts.append(value if value is not None else Located(ref.text, ref.offsets, (True,) * len(ref)))
            i = m.end()
            continue
        parts.append(loc[i : i + 1])
        i += 1
    return Located.join(parts)


# -- Kubernetes -----------------------------------------------------------------------------------------------
def _kubernetes(text: str) -> list[Found]:
    """The containers of every document of a Kubernetes manifest: argv from `command` + `args`; a `bash -c SCRIPT`
    argv is the script's commands. Their context: the nearest pod spec's TPU node selector, the nearest enclosing
    replicated job's `replicas`, the container's LIBTPU_INIT_ARGS env entry."""
    try:
        docs = list(YAML(typ="rt").compose_all(text))
    except (YAMLError, ValueError, RecursionError):  # not YAML, or nested past the parser's recursion
        return []
    out: list[Found] = []
    seen: set[int] = set()
    for doc in docs:
        if doc is not None:
            _visit(doc, text, Context(), out, seen, 0)
    return out


def _get(node: MappingNode, key: str) -> Node | None:
    for k, v in node.value:
        if isinstance(k, ScalarNode) and k.value == key:
            return v
    return None


# A manifest is a few levels deep; past this a document is not one (and a recursive alias, `a: &a [*a]`, ends here).
MAX_DEPTH = 64


def _visit(node: Node, text: str, ctx: Context, out: list[Found], seen: set[int], depth: int) -> None:
    """Each node once (an alias shares its anchor's node: a document of aliases of aliases is not walked again and
    again), at most MAX_DEPTH deep."""
    if id(node) in seen or depth > MAX_DEPTH:
        return
    seen.add(id(node))
    if isinstance(node, SequenceNode):
        for item in node.value:
            _visit(item, text, ctx, out, seen, depth + 1)
        return
    if not isinstance(node, MappingNode):
        return
    ctx = Context(ctx.accelerator, ctx.topology, ctx.replicas, ctx.flags)
    meta = _get(node, "metadata")
    annotations = _get(meta, "annotations") if isinstance(meta, MappingNode) else None
    if isinstance(annotations, MappingNode):
        topo = _get(annotations, SLICE_TOPOLOGY_ANNOTATION)
        if isinstance(topo, ScalarNode):
            ctx.topology = _scalar(topo, text)  # a node selector's topology label below it still wins
    selector = _get(node, "nodeSelector")
    if isinstance(selector, MappingNode):
        acc, topo = _get(selector, ACCELERATOR_LABEL), _get(selector, TOPOLOGY_LABEL)
        if isinstance(acc, ScalarNode):
            ctx.accelerator = _scalar(acc, text)
        if isinstance(topo, ScalarNode):
            ctx.topology = _scalar(topo, text)
    replicas = _get(node, "replicas")
    if isinstance(replicas, ScalarNode) and _get(node, "template") is not None:
        ctx.replicas = _scalar(replicas, text)
    for key in ("containers", "initContainers"):
        containers = _get(node, key)
        if isinstance(containers, SequenceNode):
            for c in containers.value:
                if isinstance(c, MappingNode):
                    _container(c, text, ctx, out)
    for k, v in node.value:
        if isinstance(k, ScalarNode) and k.value in ("containers", "initContainers", "nodeSelector"):
            continue
        _visit(v, text, ctx, out, seen, depth + 1)


def _container(node: MappingNode, text: str, ctx: Context, out: list[Found]) -> None:
    argv: list[Located] = []
    for key in ("command", "args"):
        v = _get(node, key)
        if isinstance(v, SequenceNode):
            argv += [_scalar(i, text) for i in v.value if isinstance(i, ScalarNode)]
        elif isinstance(v, ScalarNode):  # a single string: the shell's words
            argv += list(_scalar(v, text).fields())
    env: Env = {}
    envs = _get(node, "env")
    if isinstance(envs, SequenceNode):
        for e in envs.value:
            if isinstance(e, MappingNode):
                name, value = _get(e, "name"), _get(e, "value")
                if isinstance(name, ScalarNode) and isinstance(value, ScalarNode):
                    env[str(name.value)] = _scalar(value, text)
    here = Context(ctx.accelerator, ctx.topology, ctx.replicas, env.get("LIBTPU_INIT_ARGS", ctx.flags))
    if not argv:
        return
    script = shell_script(argv)
    if script is not None:
        out.extend(Found(c, here, 1) for c in commands(script, env))
    else:
        out.append(Found(Command(argv, env, Located.join(argv)), here, argv_only=True))


def shell_script(argv: list[Located]) -> Located | None:
    """The script of `bash -c SCRIPT ...` (options before -c allowed: `-ec`, `-x -c`), None for any other argv."""
    if not argv or Path(argv[0].text).name not in SHELLS:
        return None
    for i, w in enumerate(argv[1:], 1):
        if not w.text.startswith("-"):
            return None
        if "c" in w.text[1:] and not w.text.startswith("--"):
            return argv[i + 1] if i + 1 < len(argv) else None
    return None


def _scalar(node: ScalarNode, text: str) -> Located:
    """A YAML scalar's value with each character placed at the source character it was read from: the value is
    aligned with the token (indentation, quotes, escapes and folded line breaks skipped)."""
    value = str(node.value)
    start, end = node.start_mark.index, node.end_mark.index
    offsets: list[int] = []
    j = start
    for ch in value:
        k = j
        while k < end and text[k] != ch:
            if ch in " \n" and text[k] in "\r\n":  # a line break folded to a space (or kept as one)
                break
            k += 1
        if k < end:
            offsets.append(k)
            j = k + 1
        else:
            offsets.append(NOWHERE)
    return Located(value, tuple(offsets), (False,) * len(value))


def nested(found: Found, script: Located) -> list[Found]:
    """The commands of a script a command carries (`--command="..."`, `bash -c "..."`), in its environment."""
    if found.nesting >= MAX_NESTING:
        return []
    return [Found(c, found.context, found.nesting + 1) for c in commands(script, found.command.env)]
