"""MaxText's benchmark recipes: the `MaxTextModel`s that `python3 -m benchmarks.benchmark_runner xpk|on-device
--model_name=NAME` runs, read statically from MaxText's Python files with `ast` (never imported or executed).

A recipe (benchmarks/benchmark_utils.py:58-85@e591f30cb) is `MaxTextModel(model_name=..., model_type=...,
tuning_params={...}, xla_flags=...)`: `model_type` is MaxText's `model_name`, `tuning_params` are MaxText config
keys and `xla_flags` is a string built from `benchmarks/xla_flags_library.py`'s constants. A recipe file registers
each with `_add_to_model_dictionary(<dict>, MaxTextModel(...))`, under `model_name.replace("-", "_")`
(benchmark_utils.py:89-91); `--model_name` takes those keys (benchmark_runner.py:128-137) and the runner looks them
up in `trillium_model_dict`, `v5e_model_dict`, `v5p_model_dict`, `c4_pretrain_model_dict` in that order, the first
one holding the name winning (benchmark_runner.py:293-299). MaxText's recipe files before the dictionaries
(benchmark_runner.py:150-151@9e7d1a3a7) took the module-level variable's name instead; a file with no registration
is read that way.

What is evaluated: literals, dicts (with `**` merges and `|`), lists, tuples, unary minus, arithmetic on numbers,
string `+`, f-strings and `"...".format(...)` of known values, `" ".join([...])`, `os.path.join` of known strings,
subscripts and conditional expressions of known values, and names bound at module level to those, followed
through `import benchmarks.x as y` / `from benchmarks import x` / `from benchmarks.x import NAME` into the file
that defines them. Anything else (`os.environ.get(...)`, `gettempdir()`, a call into MaxText) is kept as
`Symbolic(<its source text>)`, never an error. A name is read as it is bound at the statement that uses it: the
last top-level assignment before it; one bound inside `if`/`for`/`try`/`with` is symbolic.

Two sources, looked up in this order: the user's MaxText checkout (`benchmarks/` at its root, found from the root,
the package directory or the configs directory a path names) and ASAP's catalog
`server/launch/data/maxtext_recipes.json`, written by `tools/recipes_from_maxtext.py` from MaxText e591f30cb with
this same reader. A checkout file that cannot be read (a syntax error) gives a located `RecipeProblem` and its
names fall back to the catalog.

`benchmark_settings` gives the config keys the runner adds for a recipe and the runner's own options, in the order
and with the precedence of its command (maxtext_xpk_runner.py:366-455): MaxText's `base.yml`, the recipe's
`tuning_params` (merged with the Pathways ones under `--use_pathways`), `steps`, `model_name=<model_type>`,
`base_output_directory`, ... ; `OmegaConf.from_cli` keeps the last of two equal keys (pyconfig.py:439).
"""

from __future__ import annotations

import ast
import difflib
import json
import math
import posixpath
import re
import string
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

CATALOG_RESOURCE = "data/maxtext_recipes.json"
BENCHMARKS_DIR = "benchmarks"
RUNNER_FILE = "benchmarks/benchmark_runner.py"

# The config MaxText's benchmark runner trains with, relative to MaxText's package directory:
# `os.path.join(MAXTEXT_PKG_DIR, "configs", "base.yml")` (maxtext_xpk_runner.py:444@e591f30cb).
BASE_CONFIG = "configs/base.yml"

# Where a recipe was read (Recipe.origin, RecipeLibrary.origin).
ORIGIN_CHECKOUT = "checkout"
ORIGIN_CATALOG = "catalog"

# The dictionaries benchmark_runner looks a name up in, in its order (benchmark_runner.py:28-31, 293-299
# @e591f30cb); used when a checkout's benchmark_runner.py cannot be read for its own list.
DEFAULT_RUNNER_DICTS: tuple[tuple[str, str], ...] = (
    ("benchmarks.maxtext_trillium_model_configs", "trillium_model_dict"),
    ("benchmarks.maxtext_v5e_model_configs", "v5e_model_dict"),
    ("benchmarks.maxtext_v5p_model_configs", "v5p_model_dict"),
    ("benchmarks.convergence.c4_exp", "c4_pretrain_model_dict"),
)
# The module holding BASE_PATHWAYS_TUNING_PARAMS, which the runner adds under --use_pathways
# (`import benchmarks.maxtext_trillium_model_configs as model_configs`, maxtext_xpk_runner.py:37, 246-273).
PATHWAYS_BASE_MODULE = "benchmarks.maxtext_trillium_model_configs"
PATHWAYS_BASE_NAME = "BASE_PATHWAYS_TUNING_PARAMS"

_MAX_FILE_BYTES = 4_000_000  # a recipe file is ~100 KB; anything far larger is not one
_MAX_DEPTH = 150  # expression nesting followed before a value is left symbolic
_MAX_STR = 1_000_000  # the longest string an evaluation may build


# -- values -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Symbolic:
    """A value ASAP cannot know without running MaxText's code: its source text, as written."""

    expr: str

    def __str__(self) -> str:
        return self.expr


Value = Any  # str | int | float | bool | None | list[Value] | dict[str, Value] | Symbolic


@dataclass(frozen=True)
class Origin:
    """Where a value is written: a file (a path on disk, or the catalog's repository path) and a 1-based line."""

    file: str
    line: int
    commit: str | None = None  # the MaxText commit of a catalog entry; None for a file on disk

    def __str__(self) -> str:
        at = f"{self.file}:{self.line}"
        return f"{at}@{self.commit[:9]}" if self.commit else at


@dataclass(frozen=True)
class RecipeProblem:
    """Something in MaxText's benchmark files ASAP could not read, located."""

    file: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}"


@dataclass(frozen=True)
class Recipe:
    """One `MaxTextModel` as benchmark_runner would run it."""

    name: str  # what --model_name takes: the dictionary key (model_name with "-" as "_"), else the variable
    model_type: str | Symbolic  # MaxText's model_name
    tuning_params: Mapping[str, Value]  # MaxText config keys, in the recipe's order
    xla_flags: str | Symbolic  # the whole string, as the runner exports it in LIBTPU_INIT_ARGS
    file: str  # the recipe file: a path on disk (checkout), or the repository path (catalog)
    line: int  # the line of `MaxTextModel(`
    commit: str | None  # the MaxText commit (catalog); None for a checkout
    tuning_lines: Mapping[str, Origin]  # where each tuning param key is written
    xla_flags_line: int = 0  # the line of `xla_flags=`'s value
    model_name: str | Symbolic = ""  # MaxTextModel.model_name as written ("llama3-1-70b-8192")
    variable: str | None = None  # the module-level variable the recipe is bound to
    dictionary: str | None = None  # the dictionary it is registered in
    runner_choice: bool = True  # benchmark_runner's --model_name accepts the name
    pathways_tuning_params: Mapping[str, Value] | None = None
    pathways_tuning_lines: Mapping[str, Origin] = field(default_factory=dict)
    pathways_xla_flag_options: Mapping[str, Value] | None = None
    # Something MaxText's code does to the recipe after it is written, which ASAP does not follow (located).
    caveats: tuple[str, ...] = ()
    origin: str = ORIGIN_CHECKOUT
    # BASE_PATHWAYS_TUNING_PARAMS of the recipe's MaxText (what --use_pathways adds); None when unknown.
    base_pathways_tuning_params: Mapping[str, Value] | None = None
    base_pathways_tuning_lines: Mapping[str, Origin] = field(default_factory=dict)

    def where(self) -> Origin:
        return Origin(self.file, self.line, self.commit)

    def param_origin(self, key: str) -> Origin | None:
        return self.tuning_lines.get(key)


@dataclass(frozen=True)
class RecipeLibrary:
    """Every recipe of one MaxText tree, in benchmark_runner's lookup order."""

    recipes: Mapping[str, Recipe]
    problems: tuple[RecipeProblem, ...]
    origin: str  # ORIGIN_CHECKOUT or ORIGIN_CATALOG
    root: str  # the checkout root on disk; the repository ("AI-Hypercomputer/maxtext") for the catalog
    commit: str | None = None
    commit_date: str = ""
    default_name: str | None = None  # what --model_name defaults to (benchmark_runner.py:135)
    failed_files: frozenset[str] = frozenset()  # files whose recipes could not be read (relative paths)
    # False when a file benchmark_runner imports could not be read: Python would refuse to load the runner, so no
    # name is looked up in this tree (lookup_recipe goes to the catalog, with the problem)
    usable: bool = True


@dataclass(frozen=True)
class RecipeLookup:
    """`lookup_recipe`'s answer: the recipe (or None), what went wrong reading the checkout, and close names."""

    name: str
    recipe: Recipe | None
    problems: tuple[RecipeProblem, ...] = ()
    suggestions: tuple[str, ...] = ()
    searched: tuple[str, ...] = ()  # where it looked: the checkout's benchmarks/ and/or "catalog@<commit>"


# -- the files of a MaxText tree ----------------------------------------------------------------------------
class Tree(Protocol):
    """Read access to one MaxText tree: files by their path relative to the tree's root ("benchmarks/x.py")."""

    def read_text(self, rel: str) -> str: ...  # raises OSError / UnicodeDecodeError / ValueError

    def list_py(self, rel_dir: str) -> list[str]: ...  # the .py files directly in rel_dir, relative paths

    def display(self, rel: str) -> str: ...  # how a file is named in recipes and problems


class DiskTree:
    """A MaxText checkout on disk."""

    def __init__(self, root: Path):
        self.root = root

    def read_text(self, rel: str) -> str:
        p = self.root / rel
        if p.stat().st_size > _MAX_FILE_BYTES:
            raise ValueError(f"{p.stat().st_size} bytes: too large for a recipe file")
        return p.read_text(encoding="utf-8")

    def list_py(self, rel_dir: str) -> list[str]:
        d = self.root / rel_dir
        try:
            return sorted(f"{rel_dir}/{p.name}" for p in d.iterdir() if p.suffix == ".py" and p.is_file())
        except OSError:
            return []

    def display(self, rel: str) -> str:
        return str(self.root / rel)

    def stamp(self, rels: Iterable[str]) -> tuple[Any, ...]:
        """What a cached reading of these files depends on: their sizes and times, and the recipe files present."""
        out: list[Any] = []
        for rel in sorted(set(rels)):
            try:
                st = (self.root / rel).stat()
                out.append((rel, st.st_mtime_ns, st.st_size))
            except OSError:
                out.append((rel, None))
        out.append(tuple(self.list_py(BENCHMARKS_DIR)))
        return tuple(out)


def checkout_benchmarks_dir(path: Path) -> Path | None:
    """MaxText's `benchmarks/` for a path naming a checkout's root, its `benchmarks/`, or a directory inside the
    checkout (`src/maxtext`, `src/maxtext/configs`, the older `MaxText/`): benchmarks/ sits at the root."""
    try:
        path = path.expanduser()
        candidates = [path] if path.name == BENCHMARKS_DIR else []
        candidates += [a / BENCHMARKS_DIR for a in [path, *list(path.parents)[:3]]]
        for d in candidates:
            if (d / "benchmark_runner.py").is_file() or any(d.glob("*model_configs*.py")):
                return d
    except OSError:
        return None
    return None


# -- the evaluator ------------------------------------------------------------------------------------------
class _ODict(dict[str, Value]):
    """A dict evaluated from source, with where each key is written."""

    origins: dict[str, tuple[str, int]]

    def __init__(self) -> None:
        super().__init__()
        self.origins = {}


@dataclass(frozen=True)
class _ModuleRef:
    name: str  # dotted; a benchmarks.* module read from the tree, or an outside one (os, tempfile, ...)


@dataclass(frozen=True)
class _Func:
    kind: str  # "os.path.join", "str.join", "str.format"
    bound: str = ""


@dataclass
class _Binding:
    index: int  # the top-level statement's index in the module body
    stmt: ast.stmt
    kind: str  # "assign", "aug", "import", "if", "conditional", "other"
    value: ast.expr | None = None  # "if": the assigned value when a plain assignment, else None (unknown)
    target: str | None = None  # for "import": the module or "module:NAME" it binds
    test: ast.expr | None = None  # for "if": the `if` statement's test, and the branch the binding is in
    branch: bool = True


class _Module:
    def __init__(self, name: str, rel: str, tree: ast.Module, text: str):
        self.name = name
        self.rel = rel
        self.tree = tree
        self.text = text
        self.bindings: dict[str, list[_Binding]] = {}
        self._lines: list[str] | None = None
        for i, stmt in enumerate(tree.body):
            self._bind_stmt(i, stmt)

    def _add(self, name: str, b: _Binding) -> None:
        self.bindings.setdefault(name, []).append(b)

    def _bind_stmt(self, i: int, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                if isinstance(t, ast.Name):
                    self._add(t.id, _Binding(i, stmt, "assign", stmt.value))
                else:
                    for n in _stored_names(t):
                        self._add(n, _Binding(i, stmt, "other"))
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            self._add(stmt.target.id, _Binding(i, stmt, "assign" if stmt.value else "other", stmt.value))
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            self._add(stmt.target.id, _Binding(i, stmt, "aug", stmt.value))
        elif isinstance(stmt, ast.Import):
            for a in stmt.names:
                if a.asname:
                    self._add(a.asname, _Binding(i, stmt, "import", target=a.name))
                else:
                    top = a.name.split(".")[0]
                    self._add(top, _Binding(i, stmt, "import", target=top))
        elif isinstance(stmt, ast.ImportFrom):
            base = _absolute_module(self.name, stmt.module, stmt.level)
            for a in stmt.names:
                if a.name != "*":
                    self._add(a.asname or a.name, _Binding(i, stmt, "import", target=f"{base}:{a.name}"))
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self._add(stmt.name, _Binding(i, stmt, "other"))
        elif isinstance(stmt, ast.If):
            # `if ENABLE_SDC_CHECKER: ENABLE_DEBUG_LOGS = True` (xla_flags_library.py:188-189@e591f30cb): a test
            # known statically decides whether the branch binds
            for branch, body in ((True, stmt.body), (False, stmt.orelse)):
                for inner in body:
                    plain = isinstance(inner, ast.Assign) and all(isinstance(t, ast.Name) for t in inner.targets)
                    for n in _stored_names(inner):
                        value = inner.value if plain and isinstance(inner, ast.Assign) else None
                        self._add(n, _Binding(i, stmt, "if", value, test=stmt.test, branch=branch))
        else:
            for n in _stored_names(stmt):
                self._add(n, _Binding(i, stmt, "conditional"))

    def candidates(self, name: str, before: int) -> list[_Binding]:
        """The top-level bindings of `name` in statements before `before`, the latest first."""
        return [b for b in reversed(self.bindings.get(name, ())) if b.index < before]

    def segment(self, node: ast.AST) -> str:
        """The node's source text, whitespace runs as one space (ast.get_source_segment re-splits the file on
        every call; a recipe file asks for hundreds)."""
        if self._lines is None:
            self._lines = self.text.splitlines(keepends=True)
        text = None
        end_lineno, end_col = getattr(node, "end_lineno", None), getattr(node, "end_col_offset", None)
        lineno, col = getattr(node, "lineno", None), getattr(node, "col_offset", None)
        if None not in (lineno, col, end_lineno, end_col):
            assert lineno is not None and end_lineno is not None and col is not None and end_col is not None
            lines = self._lines[lineno - 1 : end_lineno]
            if lines:
                # col offsets are UTF-8 byte offsets
                if len(lines) == 1:
                    text = lines[0].encode()[col:end_col].decode(errors="replace")
                else:
                    first = lines[0].encode()[col:].decode(errors="replace")
                    last = lines[-1].encode()[:end_col].decode(errors="replace")
                    text = first + "".join(lines[1:-1]) + last
        return " ".join((text or ast.unparse(node)).split())


def _stored_names(node: ast.AST) -> list[str]:
    """Names a statement binds anywhere in it (not inside nested functions' bodies)."""
    out = []
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.append(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out.extend((a.asname or a.name).split(".")[0] for a in n.names)
    return out


def _absolute_module(current: str, module: str | None, level: int) -> str:
    if level == 0:
        return module or ""
    parts = current.split(".")[:-level]
    return ".".join([*parts, *([module] if module else [])])


class _Reader:
    """Reads and evaluates the modules of one tree; remembers what it read and what went wrong."""

    def __init__(self, tree: Tree):
        self.tree = tree
        self.modules: dict[str, _Module | None] = {}
        self.problems: list[RecipeProblem] = []
        self.failed: set[str] = set()
        self._memo: dict[tuple[str, int, str], Value] = {}
        self._active: set[tuple[str, int, str]] = set()
        self._listing: dict[str, frozenset[str]] = {}

    # modules
    def module_rel(self, dotted: str) -> str | None:
        if dotted != BENCHMARKS_DIR and not dotted.startswith(BENCHMARKS_DIR + "."):
            return None
        path = dotted.replace(".", "/")
        for rel in (f"{path}.py", f"{path}/__init__.py"):
            if self._exists(rel):
                return rel
        return None

    def _exists(self, rel: str) -> bool:
        d, _, _ = rel.rpartition("/")
        if d not in self._listing:
            self._listing[d] = frozenset(self.tree.list_py(d))
        return rel in self._listing[d]

    def module(self, dotted: str, report: bool = True) -> _Module | None:
        if dotted in self.modules:
            return self.modules[dotted]
        rel = self.module_rel(dotted)
        mod = self.parse(dotted, rel, report) if rel else None
        self.modules[dotted] = mod
        return mod

    def parse(self, dotted: str, rel: str, report: bool = True) -> _Module | None:
        shown = self.tree.display(rel)
        try:
            text = self.tree.read_text(rel)
        except (OSError, UnicodeDecodeError, ValueError) as e:
            if report:
                self.problems.append(RecipeProblem(shown, 1, f"cannot be read: {e}"))
            self.failed.add(rel)
            return None
        try:
            tree = ast.parse(text, filename=rel)
        except SyntaxError as e:
            if report:
                msg = f"not valid Python ({e.msg})"
                self.problems.append(RecipeProblem(shown, e.lineno or 1, msg))
            self.failed.add(rel)
            return None
        except (RecursionError, MemoryError, ValueError) as e:
            if report:
                self.problems.append(RecipeProblem(shown, 1, f"cannot be parsed ({type(e).__name__})"))
            self.failed.add(rel)
            return None
        return _Module(dotted, rel, tree, text)

    # names
    def lookup(self, mod: _Module, name: str, before: int, depth: int) -> Value:
        """`name`'s value at the top-level statement `before` of `mod` (len(body): once the module has run)."""
        cands = mod.candidates(name, before)
        if not cands:
            return _BUILTINS.get(name, Symbolic(name))
        key = (mod.name, cands[0].index, name)
        if key in self._memo:
            return self._memo[key]
        if key in self._active or depth > _MAX_DEPTH:
            return Symbolic(name)
        self._active.add(key)
        try:
            value = self._resolve(mod, name, cands, depth)
        finally:
            self._active.discard(key)
        self._memo[key] = value
        return value

    def _resolve(self, mod: _Module, name: str, cands: list[_Binding], depth: int) -> Value:
        for b in cands:
            if b.kind != "if":
                return self._binding_value(mod, name, b, depth)
            assert b.test is not None
            test = self.eval(b.test, mod, b.index, depth + 1)
            if not (_is_plain(test) or isinstance(test, (list, dict))):
                return Symbolic(name)  # a branch that may or may not run
            if bool(test) != b.branch:
                continue  # the branch does not run: the binding before it holds
            return self.eval(b.value, mod, b.index, depth + 1) if b.value is not None else Symbolic(name)
        return _BUILTINS.get(name, Symbolic(name))

    def _binding_value(self, mod: _Module, name: str, b: _Binding, depth: int) -> Value:
        if b.kind == "assign" and b.value is not None:
            return self.eval(b.value, mod, b.index, depth + 1)
        if b.kind == "aug" and isinstance(b.stmt, ast.AugAssign) and b.value is not None:
            left = self.lookup(mod, name, b.index, depth + 1)
            right = self.eval(b.value, mod, b.index, depth + 1)
            return _binop(b.stmt.op, left, right, Symbolic(name))
        if b.kind == "import" and b.target:
            return self._imported(b.target, name, depth)
        return Symbolic(name)

    def _imported(self, target: str, name: str, depth: int) -> Value:
        if ":" not in target:  # `import x.y as z` / `import x`
            return _ModuleRef(target)
        base, attr = target.split(":", 1)
        sub = f"{base}.{attr}" if base else attr
        if self.module_rel(sub):  # `from benchmarks import xla_flags_library`
            return _ModuleRef(sub)
        value = self.attribute(_ModuleRef(base), attr, depth)
        return Symbolic(name) if value is _UNKNOWN else value

    def attribute(self, base: Value, attr: str, depth: int) -> Value:
        """`base.attr`: a benchmarks module's name (read from its file), a submodule, or `os.path.join`,
        `"...".join`, `"...".format`; _UNKNOWN otherwise."""
        if isinstance(base, _ModuleRef):
            sub = f"{base.name}.{attr}"
            if self.module_rel(sub):
                return _ModuleRef(sub)
            if self.module_rel(base.name):
                mod = self.module(base.name)
                if mod is None:
                    return _UNKNOWN
                return self.lookup(mod, attr, len(mod.tree.body), depth + 1)
            if sub in ("os.path", "os.path.join", "posixpath.join"):
                return _Func("os.path.join") if sub.endswith("join") else _ModuleRef("os.path")
            return _UNKNOWN
        if isinstance(base, str) and attr in ("join", "format"):
            return _Func(f"str.{attr}", base)
        return _UNKNOWN

    # expressions
    def eval(self, node: ast.expr, mod: _Module, before: int, depth: int = 0) -> Value:
        if depth > _MAX_DEPTH:
            return Symbolic(mod.segment(node))
        try:
            value = self._eval(node, mod, before, depth)
        except (TypeError, ValueError, ArithmeticError, KeyError, IndexError, AttributeError, RecursionError):
            value = _UNKNOWN
        if (
            # an unknown value is shown as written where it is used (`MAXTEXT_ASSETS_ROOT`, not globals.py's text)
            isinstance(value, Symbolic)
            # a module or a function is only a step of a name or an attribute, never a value of its own
            or (isinstance(value, (_ModuleRef, _Func)) and not isinstance(node, (ast.Name, ast.Attribute)))
        ):
            return Symbolic(mod.segment(node))
        if isinstance(value, float) and not math.isfinite(value):
            return Symbolic(mod.segment(node))
        if isinstance(value, str) and len(value) > _MAX_STR:
            return Symbolic(mod.segment(node))
        return value

    def _eval(self, node: ast.expr, mod: _Module, before: int, depth: int) -> Value:
        d = depth + 1
        if isinstance(node, ast.Constant):
            v = node.value
            return v if v is None or isinstance(v, (str, int, float, bool)) else _UNKNOWN
        if isinstance(node, ast.Name):
            return self.lookup(mod, node.id, before, d)
        if isinstance(node, ast.Attribute):
            base = self.eval(node.value, mod, before, d)
            return self.attribute(base, node.attr, d)
        if isinstance(node, (ast.List, ast.Tuple)):
            items: list[Value] = []
            for elt in node.elts:
                if isinstance(elt, ast.Starred):
                    v = self.eval(elt.value, mod, before, d)
                    if not isinstance(v, list):
                        return _UNKNOWN
                    items.extend(v)
                else:
                    items.append(self.eval(elt, mod, before, d))
            return items
        if isinstance(node, ast.Dict):
            return self._dict(node, mod, before, d)
        if isinstance(node, ast.BinOp):
            left = self.eval(node.left, mod, before, d)
            right = self.eval(node.right, mod, before, d)
            return _binop(node.op, left, right, _UNKNOWN)
        if isinstance(node, ast.UnaryOp):
            v = self.eval(node.operand, mod, before, d)
            if isinstance(v, Symbolic):
                return _UNKNOWN
            if isinstance(node.op, ast.Not):
                return not v
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return -v if isinstance(node.op, ast.USub) else v if isinstance(node.op, ast.UAdd) else _UNKNOWN
            return _UNKNOWN
        if isinstance(node, ast.JoinedStr):
            return self._fstring(node, mod, before, d)
        if isinstance(node, ast.Call):
            return self._call(node, mod, before, d)
        if isinstance(node, ast.Subscript):
            base = self.eval(node.value, mod, before, d)
            key = self.eval(node.slice, mod, before, d)
            if isinstance(base, (dict, list, str)) and isinstance(key, (str, int)) and not isinstance(key, bool):
                return base[key]  # type: ignore[index]
            return _UNKNOWN
        if isinstance(node, ast.IfExp):
            test = self.eval(node.test, mod, before, d)
            if isinstance(test, (Symbolic, _ModuleRef, _Func)):
                return _UNKNOWN
            return self.eval(node.body if test else node.orelse, mod, before, d)
        return _UNKNOWN

    def _dict(self, node: ast.Dict, mod: _Module, before: int, depth: int) -> Value:
        out = _ODict()
        for k, v in zip(node.keys, node.values, strict=True):
            if k is None:  # {**other}
                other = self.eval(v, mod, before, depth)
                if not isinstance(other, dict):
                    return _UNKNOWN
                _merge(out, other)
                continue
            key = self.eval(k, mod, before, depth)
            if not isinstance(key, str):
                return _UNKNOWN
            out.pop(key, None)  # a repeated key keeps its first place in a Python dict, with the last value
            out[key] = self.eval(v, mod, before, depth)
            out.origins[key] = (mod.rel, k.lineno)
        return out

    def _fstring(self, node: ast.JoinedStr, mod: _Module, before: int, depth: int) -> Value:
        parts: list[str] = []
        for part in node.values:
            if isinstance(part, ast.Constant) and isinstance(part.value, str):
                parts.append(part.value)
                continue
            if not isinstance(part, ast.FormattedValue):
                return _UNKNOWN
            v = self.eval(part.value, mod, before, depth)
            if not _is_plain(v):
                return _UNKNOWN
            spec = ""
            if part.format_spec is not None:
                s = self.eval(part.format_spec, mod, before, depth)
                if not isinstance(s, str) or not _SAFE_SPEC.fullmatch(s):
                    return _UNKNOWN
                spec = s
            if part.conversion == ord("r"):
                v = repr(v)
            elif part.conversion == ord("a"):
                v = ascii(v)
            elif part.conversion == ord("s"):
                v = str(v)
            parts.append(format(v, spec))
        return "".join(parts)

    def _call(self, node: ast.Call, mod: _Module, before: int, depth: int) -> Value:
        func = self.eval(node.func, mod, before, depth)
        if not isinstance(func, _Func) or any(isinstance(a, ast.Starred) for a in node.args):
            return _UNKNOWN
        args = [self.eval(a, mod, before, depth) for a in node.args]
        kwargs: dict[str, Value] = {}
        for kw in node.keywords:
            if kw.arg is None:
                return _UNKNOWN
            kwargs[kw.arg] = self.eval(kw.value, mod, before, depth)
        if func.kind == "os.path.join" and args and not kwargs and all(isinstance(a, str) for a in args):
            return posixpath.join(*args)  # MaxText's runs are on Linux hosts
        if (
            func.kind == "str.join"
            and len(args) == 1
            and not kwargs
            and isinstance(args[0], list)
            and all(isinstance(a, str) for a in args[0])
        ):
            return func.bound.join(args[0])
        if (
            func.kind == "str.format"
            and _safe_format(func.bound)
            and all(_is_plain(a) for a in [*args, *kwargs.values()])
        ):
            return func.bound.format(*args, **kwargs)
        return _UNKNOWN


_UNKNOWN = Symbolic("")  # an internal "could not evaluate" marker, replaced by the expression's own text
_BUILTINS: dict[str, Value] = {"True": True, "False": False, "None": None}
_SAFE_SPEC = re.compile(r"[<>^=]?[+\- ]?#?0?\d{0,3}[,_]?(\.\d{1,3})?[bcdeEfFgGnosxX%]?")


def _is_plain(v: Value) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


def _safe_format(template: str) -> bool:
    """A `str.format` template with only plain fields (`{name}`, `{0}`) and small format specs."""
    try:
        for _, fname, spec, conv in string.Formatter().parse(template):
            if fname is None:
                continue
            if fname and not (fname.isidentifier() or fname.isdigit()):
                return False
            if spec and not _SAFE_SPEC.fullmatch(spec):
                return False
            if conv not in (None, "s", "r", "a"):
                return False
    except ValueError:
        return False
    return True


def _merge(out: _ODict, other: Mapping[str, Value]) -> None:
    origins = getattr(other, "origins", {})
    for k, v in other.items():
        out.pop(k, None)
        out[k] = v
        if k in origins:
            out.origins[k] = origins[k]
        else:
            out.origins.pop(k, None)


def _binop(op: ast.operator, left: Value, right: Value, unknown: Value) -> Value:
    if isinstance(left, (Symbolic, _ModuleRef, _Func)) or isinstance(right, (Symbolic, _ModuleRef, _Func)):
        return unknown
    if isinstance(op, ast.BitOr) and isinstance(left, dict) and isinstance(right, dict):
        out = _ODict()
        _merge(out, left)
        _merge(out, right)
        return out
    if isinstance(op, ast.Add):
        if isinstance(left, str) and isinstance(right, str):
            return left + right if len(left) + len(right) <= _MAX_STR else unknown
        if isinstance(left, list) and isinstance(right, list):
            return left + right
    nums = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (left, right))
    if not nums:
        return unknown
    if isinstance(op, ast.Pow) and (abs(right) > 64 or abs(left) > 2**64):
        return unknown
    ops: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
        ast.Add: lambda a, b: a + b,
        ast.Sub: lambda a, b: a - b,
        ast.Mult: lambda a, b: a * b,
        ast.Div: lambda a, b: a / b,
        ast.FloorDiv: lambda a, b: a // b,
        ast.Mod: lambda a, b: a % b,
        ast.Pow: lambda a, b: a**b,
    }
    fn = ops.get(type(op))
    return fn(left, right) if fn else unknown


# -- reading a tree's recipes -------------------------------------------------------------------------------
def _call_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _is_call_to(node: ast.AST | None, name: str) -> bool:
    return isinstance(node, ast.Call) and _call_name(node.func) == name


@dataclass
class _Found:
    """A MaxTextModel call found in a recipe module, before it has a name."""

    call: ast.Call
    index: int
    variable: str | None
    dictionary: str | None = None


def _runner_dicts(reader: _Reader) -> tuple[list[tuple[str, str]], list[str]]:
    """The (module, dictionary) pairs benchmark_runner.py looks --model_name up in, in its order, and the benchmarks
    modules it imports. Read from its `<dict>.get(options.model_name)` calls and imports; MaxText e591f30cb's list
    when the file is absent or has neither."""
    mod = (
        reader.module("benchmarks.benchmark_runner", report=True)
        if reader.module_rel("benchmarks.benchmark_runner")
        else None
    )
    if mod is None:
        return list(DEFAULT_RUNNER_DICTS), []
    imported: dict[str, str] = {}
    modules: list[str] = []
    for stmt in mod.tree.body:
        if isinstance(stmt, ast.ImportFrom):
            base = _absolute_module(mod.name, stmt.module, stmt.level)
            for a in stmt.names:
                imported[a.asname or a.name] = base
                sub = f"{base}.{a.name}"
                modules.append(sub if reader.module_rel(sub) else base)
        elif isinstance(stmt, ast.Import):
            modules.extend(a.name for a in stmt.names)
    gets = []
    for n in ast.walk(mod.tree):
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "get"
            and isinstance(n.func.value, ast.Name)
            and n.args
            and isinstance(n.args[0], ast.Attribute)
            and n.args[0].attr == "model_name"
            and n.func.value.id in imported
        ):
            gets.append((n.lineno, n.col_offset, imported[n.func.value.id], n.func.value.id))
    pairs: list[tuple[str, str]] = []
    for _, _, module, dictionary in sorted(gets):
        if (module, dictionary) not in pairs:
            pairs.append((module, dictionary))
    wanted = [m for m in dict.fromkeys(modules) if m.startswith(BENCHMARKS_DIR + ".")]
    return (pairs or list(DEFAULT_RUNNER_DICTS)), wanted


def _found_in(mod: _Module) -> list[_Found]:
    """The module's MaxTextModel calls at top level: registered (`_add_to_model_dictionary(D, MaxTextModel(...))`,
    alone or assigned) or bound to a variable (`x = MaxTextModel(...)`, registered later as `(D, x)` or not)."""
    out: list[_Found] = []
    by_var: dict[str, _Found] = {}
    for i, stmt in enumerate(mod.tree.body):
        target = None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            target, value = stmt.targets[0].id, stmt.value
        elif isinstance(stmt, ast.Expr):
            value = stmt.value
        else:
            continue
        if _is_call_to(value, "MaxTextModel"):
            assert isinstance(value, ast.Call)
            f = _Found(value, i, target)
            out.append(f)
            if target:
                by_var[target] = f
        elif _is_call_to(value, "_add_to_model_dictionary"):
            assert isinstance(value, ast.Call)
            if len(value.args) != 2 or not isinstance(value.args[0], ast.Name):
                continue
            dictionary, model = value.args[0].id, value.args[1]
            if _is_call_to(model, "MaxTextModel"):
                assert isinstance(model, ast.Call)
                f = _Found(model, i, target, dictionary)
                out.append(f)
                if target:
                    by_var[target] = f
            elif isinstance(model, ast.Name) and model.id in by_var:
                by_var[model.id].dictionary = dictionary  # evaluated where it is written, registered here
            else:
                out.append(_Found(value, i, target, dictionary))  # a registration ASAP cannot follow
    return out


def _kwargs(call: ast.Call) -> dict[str, ast.expr]:
    fields = ("model_name", "model_type", "tuning_params", "xla_flags")
    out = {fields[i]: a for i, a in enumerate(call.args[: len(fields)])}
    out.update({kw.arg: kw.value for kw in call.keywords if kw.arg})
    return out


def _params(value: Value, rel_display: Callable[[str], str], commit: str | None) -> tuple[dict, dict]:
    if not isinstance(value, dict):
        return {}, {}
    origins = getattr(value, "origins", {})
    params = {k: _plain(v) for k, v in value.items()}
    lines = {k: Origin(rel_display(origins[k][0]), origins[k][1], commit) for k in value if k in origins}
    return params, lines


def _plain(v: Value) -> Value:
    """Plain JSON-like data: _ODict to dict, tuples to lists (the catalog and a checkout read alike)."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    if isinstance(v, (_ModuleRef, _Func)):
        return Symbolic(getattr(v, "name", "") or v.__class__.__name__)
    return v


def read_library(tree: Tree, origin: str, root: str, commit: str | None = None, commit_date: str = "") -> RecipeLibrary:
    """Every recipe of a MaxText tree, read statically (see the module docstring). Never raises for bad input:
    what cannot be read is a RecipeProblem."""
    reader = _Reader(tree)
    runner_dicts, runner_modules = _runner_dicts(reader)
    runner_files = [m for m, _ in runner_dicts]
    others = [
        rel[:-3].replace("/", ".")
        for rel in tree.list_py(BENCHMARKS_DIR)
        if "model_configs" in rel.rsplit("/", 1)[1] and rel[:-3].replace("/", ".") not in runner_files
    ]
    show = tree.display
    recipes: dict[str, Recipe] = {}
    problems = reader.problems
    where_first: dict[str, Recipe] = {}
    runner_dict_names = {(m, d) for m, d in runner_dicts}
    var_recipes: dict[tuple[str, str], list[Recipe]] = {}
    default_name: str | None = None

    base_params: dict | None = None
    base_lines: dict = {}
    base_mod = reader.module(PATHWAYS_BASE_MODULE)
    if base_mod is not None and PATHWAYS_BASE_NAME in base_mod.bindings:
        v = reader.lookup(base_mod, PATHWAYS_BASE_NAME, len(base_mod.tree.body), 0)
        if isinstance(v, dict):
            base_params, base_lines = _params(v, show, commit)

    for dotted in dict.fromkeys([*runner_files, *others]):
        mod = reader.module(dotted)
        if mod is None:
            continue
        found = _found_in(mod)
        registered = any(f.dictionary for f in found)
        in_runner = dotted in runner_files
        module_recipes: dict[str, Recipe] = {}
        for f in found:
            if f.dictionary is not None and not _is_call_to(f.call, "MaxTextModel"):
                text = mod.segment(f.call.args[1]) if len(f.call.args) > 1 else mod.segment(f.call)
                short = text if len(text) <= 90 else text[:87] + "..."
                problems.append(
                    RecipeProblem(
                        show(mod.rel),
                        f.call.lineno,
                        f"a recipe registered in {f.dictionary} from `{short}`, built by running MaxText's code: "
                        "ASAP reads recipes without running it, so this one's name and values are not known",
                    )
                )
                continue
            recipe = _recipe(reader, mod, f, show, commit, origin)
            if recipe is None:
                continue
            if f.dictionary is None and registered:
                recipe = replace(recipe, runner_choice=False)  # a variable, not a key of the runner's dictionary
            else:
                recipe = replace(
                    recipe,
                    runner_choice=in_runner and (f.dictionary is None or (dotted, f.dictionary) in runner_dict_names),
                )
            recipe = replace(recipe, base_pathways_tuning_params=base_params, base_pathways_tuning_lines=base_lines)
            if recipe.name in module_recipes and f.dictionary is not None:
                prior = module_recipes[recipe.name]
                problems.append(
                    RecipeProblem(
                        show(mod.rel),
                        recipe.line,
                        f"{recipe.name} is registered again (first at line {prior.line}): the later one is the one "
                        "the dictionary keeps",
                    )
                )
                module_recipes.pop(recipe.name)
            elif recipe.name in module_recipes:
                continue  # an unregistered variable named like a key: the key wins
            module_recipes[recipe.name] = recipe
            if recipe.variable:
                var_recipes.setdefault((dotted, recipe.variable), []).append(recipe)
        for name, recipe in module_recipes.items():
            if (
                default_name is None
                and recipe.runner_choice
                and (dotted, recipe.dictionary) == (runner_dicts[0] if runner_dicts else (None, None))
            ):
                default_name = name
            if name in where_first:
                first = where_first[name]
                problems.append(
                    RecipeProblem(
                        recipe.file,
                        recipe.line,
                        f"{name} is also a recipe in {first.file}:{first.line}, which benchmark_runner looks in first",
                    )
                )
                continue
            where_first[name] = recipe
            recipes[name] = recipe

    caveats = _caveats(reader, [*runner_modules, *runner_files, *others], var_recipes)
    if caveats:
        recipes = {
            n: replace(r, caveats=(*r.caveats, *caveats[(r.file, r.line)])) if (r.file, r.line) in caveats else r
            for n, r in recipes.items()
        }
    other_files = {reader.module_rel(m) for m in others}
    blocking = sorted(reader.failed - other_files)
    blocked = {show(rel) for rel in blocking}
    skipped = {show(rel) for rel in reader.failed} - blocked
    problems = [
        replace(p, message=f"{p.message}: benchmark_runner cannot import it, so ASAP reads no recipe from this tree")
        if p.file in blocked
        else replace(p, message=f"{p.message}: its recipes are not read")
        if p.file in skipped
        else p
        for p in problems
    ]
    return RecipeLibrary(
        recipes=recipes,
        problems=tuple(problems),
        origin=origin,
        root=root,
        commit=commit,
        commit_date=commit_date,
        default_name=default_name,
        failed_files=frozenset(reader.failed),
        usable=not blocking,
    )


def _recipe(
    reader: _Reader, mod: _Module, f: _Found, show: Callable[[str], str], commit: str | None, origin: str
) -> Recipe | None:
    kw = _kwargs(f.call)

    def ev(key: str) -> Value:
        node = kw.get(key)
        return None if node is None else reader.eval(node, mod, f.index)

    model_name = ev("model_name")
    if f.dictionary is not None:
        if not isinstance(model_name, str):
            reader.problems.append(
                RecipeProblem(
                    show(mod.rel),
                    f.call.lineno,
                    f"a recipe whose model_name ASAP cannot read (`{model_name}`): benchmark_runner's name for it "
                    "is not known",
                )
            )
            return None
        name = model_name.replace("-", "_")  # benchmark_utils.py:90@e591f30cb
    elif f.variable:
        name = f.variable
    else:
        return None
    model_type = ev("model_type")
    tuning_value = ev("tuning_params")
    tuning, lines = _params(tuning_value, show, commit)
    notes: tuple[str, ...] = ()
    if not isinstance(tuning_value, dict):
        node = kw.get("tuning_params")
        at = f"{show(mod.rel)}:{node.lineno if node is not None else f.call.lineno}"
        notes = (f"{at} tuning_params is `{tuning_value}`, which ASAP cannot read without running MaxText's code",)
    pw = ev("pathways_tuning_params")
    pw_params, pw_lines = _params(pw, show, commit) if isinstance(pw, dict) else ({}, {})
    options = ev("pathways_xla_flag_options")
    flags = ev("xla_flags")
    flags_node = kw.get("xla_flags")
    return Recipe(
        name=name,
        model_type=model_type if isinstance(model_type, (str, Symbolic)) else Symbolic(repr(model_type)),
        tuning_params=tuning,
        xla_flags=flags if isinstance(flags, (str, Symbolic)) else ("" if flags is None else Symbolic(str(flags))),
        file=show(mod.rel),
        line=f.call.lineno,
        commit=commit,
        tuning_lines=lines,
        xla_flags_line=flags_node.lineno if flags_node is not None else 0,
        model_name=model_name if isinstance(model_name, (str, Symbolic)) else Symbolic(repr(model_name)),
        variable=f.variable,
        dictionary=f.dictionary,
        pathways_tuning_params=pw_params if isinstance(pw, dict) else None,
        pathways_tuning_lines=pw_lines,
        pathways_xla_flag_options=_plain(options) if isinstance(options, dict) else None,
        caveats=notes,
        origin=origin,
    )


def _caveats(
    reader: _Reader, modules: list[str], var_recipes: dict[tuple[str, str], list[Recipe]]
) -> dict[tuple[str, int], list[str]]:
    """Top-level statements, in the recipe modules and the modules benchmark_runner imports, that hand a recipe to
    a function or change it after it is written: MaxText's code runs them when the runner loads, and ASAP does not
    follow them (benchmarks/convergence/c4_exp.py:89-98@e591f30cb gives deepseek_v3_ep_256_v5p_512 to
    `_setup_model_convergence_`, whose shallow `dataclasses.replace` shares the recipe's tuning_params dict and
    rewrites it in place)."""
    out: dict[tuple[str, int], list[str]] = {}
    if not var_recipes:
        return out
    for dotted in dict.fromkeys(modules):
        mod = reader.module(dotted, report=False)
        if mod is None:
            continue
        local: dict[str, tuple[str, str]] = {}
        for m, var in var_recipes:
            if m == dotted:
                local[var] = (m, var)
        for stmt in mod.tree.body:
            if isinstance(stmt, ast.ImportFrom):
                base = _absolute_module(mod.name, stmt.module, stmt.level)
                for a in stmt.names:
                    if (base, a.name) in var_recipes:
                        local[a.asname or a.name] = (base, a.name)
        if not local:
            continue
        for stmt in mod.tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)):
                continue
            for var, how in _recipe_uses(stmt, local):
                text = f"{reader.tree.display(mod.rel)}:{stmt.lineno} {how}; ASAP shows the values as written"
                for r in var_recipes[local[var]]:
                    out.setdefault((r.file, r.line), [])
                    if text not in out[(r.file, r.line)]:
                        out[(r.file, r.line)].append(text)
    return out


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _recipe_uses(stmt: ast.stmt, local: Mapping[str, Any]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for n in ast.walk(stmt):
        if isinstance(n, ast.Call):
            fname = _call_name(n.func) or "a function"
            if fname in ("_add_to_model_dictionary", "MaxTextModel"):
                continue
            for a in [*n.args, *(k.value for k in n.keywords)]:
                if isinstance(a, ast.Name) and a.id in local:
                    out.append((a.id, f"passes {a.id} to `{fname}`, which may change its tuning_params"))
            if isinstance(n.func, ast.Attribute):
                root = _root_name(n.func.value)
                if root is not None and root in local and isinstance(n.func.value, (ast.Attribute, ast.Subscript)):
                    out.append((root, f"calls `{ast.unparse(n.func)}` on {root}"))
        elif isinstance(n, (ast.Attribute, ast.Subscript)) and isinstance(n.ctx, (ast.Store, ast.Del)):
            root = _root_name(n)
            if root is not None and root in local:
                out.append((root, f"changes {root} (`{ast.unparse(n)}`)"))
    return out


# -- the catalog --------------------------------------------------------------------------------------------
SYMBOLIC_KEY = "$symbolic"


def _encode(v: Value) -> Any:
    if isinstance(v, Symbolic):
        return {SYMBOLIC_KEY: v.expr}
    if isinstance(v, dict):
        return {k: _encode(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_encode(x) for x in v]
    return v


def _decode(v: Any) -> Value:
    if isinstance(v, dict):
        if set(v) == {SYMBOLIC_KEY}:
            return Symbolic(str(v[SYMBOLIC_KEY]))
        return {k: _decode(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_decode(x) for x in v]
    return v


def _encode_params(params: Mapping[str, Value] | None, lines: Mapping[str, Origin], file: str) -> Any:
    """Params in their order (a list: the catalog's JSON is written with sorted keys), each with its line, and
    its file when not the recipe's."""
    if params is None:
        return None
    out = []
    for k, v in params.items():
        entry: dict[str, Any] = {"key": k, "value": _encode(v)}
        o = lines.get(k)
        if o is not None:
            entry["line"] = o.line
            if o.file != file:
                entry["file"] = o.file
        out.append(entry)
    return out


def _decode_params(data: Any, file: str, commit: str | None) -> tuple[dict[str, Value], dict[str, Origin]]:
    params: dict[str, Value] = {}
    lines: dict[str, Origin] = {}
    for e in data or []:
        params[e["key"]] = _decode(e["value"])
        if "line" in e:
            lines[e["key"]] = Origin(e.get("file", file), int(e["line"]), commit)
    return params, lines


def library_to_json(lib: RecipeLibrary, repository: str) -> dict[str, Any]:
    """The catalog's data for a library read from a repository tree (files as repository paths)."""
    base = next((r for r in lib.recipes.values() if r.base_pathways_tuning_params is not None), None)
    return {
        "repository": repository,
        "commit": lib.commit or "",
        "commit_date": lib.commit_date,
        "default_name": lib.default_name,
        "base_pathways_tuning_params": (
            _encode_params(base.base_pathways_tuning_params, base.base_pathways_tuning_lines, "")
            if base is not None
            else None
        ),
        "problems": [{"file": p.file, "line": p.line, "message": p.message} for p in lib.problems],
        "recipes": [
            {
                "name": r.name,
                "model_name": _encode(r.model_name),
                "model_type": _encode(r.model_type),
                "file": r.file,
                "line": r.line,
                "variable": r.variable,
                "dictionary": r.dictionary,
                "runner_choice": r.runner_choice,
                "tuning_params": _encode_params(r.tuning_params, r.tuning_lines, r.file),
                "xla_flags": _encode(r.xla_flags),
                "xla_flags_line": r.xla_flags_line,
                "pathways_tuning_params": _encode_params(r.pathways_tuning_params, r.pathways_tuning_lines, r.file),
                "pathways_xla_flag_options": _encode(r.pathways_xla_flag_options),
                "caveats": list(r.caveats),
            }
            for r in lib.recipes.values()
        ],
    }


def library_from_json(data: Mapping[str, Any]) -> RecipeLibrary:
    commit = str(data["commit"]) or None
    base_params, base_lines = _decode_params(data.get("base_pathways_tuning_params"), "", commit)
    has_base = data.get("base_pathways_tuning_params") is not None
    recipes: dict[str, Recipe] = {}
    for r in data["recipes"]:
        file = str(r["file"])
        tuning, lines = _decode_params(r["tuning_params"], file, commit)
        pw = r.get("pathways_tuning_params")
        pw_params, pw_lines = _decode_params(pw, file, commit)
        recipes[str(r["name"])] = Recipe(
            name=str(r["name"]),
            model_type=_decode(r["model_type"]),
            tuning_params=tuning,
            xla_flags=_decode(r["xla_flags"]),
            file=file,
            line=int(r["line"]),
            commit=commit,
            tuning_lines=lines,
            xla_flags_line=int(r.get("xla_flags_line", 0)),
            model_name=_decode(r.get("model_name", "")),
            variable=r.get("variable"),
            dictionary=r.get("dictionary"),
            runner_choice=bool(r.get("runner_choice", True)),
            pathways_tuning_params=pw_params if pw is not None else None,
            pathways_tuning_lines=pw_lines,
            pathways_xla_flag_options=_decode(r.get("pathways_xla_flag_options")),
            caveats=tuple(r.get("caveats", ())),
            origin=ORIGIN_CATALOG,
            base_pathways_tuning_params=base_params if has_base else None,
            base_pathways_tuning_lines=base_lines,
        )
    return RecipeLibrary(
        recipes=recipes,
        problems=tuple(RecipeProblem(p["file"], int(p["line"]), p["message"]) for p in data.get("problems", ())),
        origin=ORIGIN_CATALOG,
        root=str(data["repository"]),
        commit=commit,
        commit_date=str(data.get("commit_date", "")),
        default_name=data.get("default_name"),
    )


def dumps(data: Mapping[str, Any]) -> str:
    """The catalog's stable formatting: sorted keys, two-space indent, one trailing newline."""
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"


@lru_cache(maxsize=1)
def catalog() -> RecipeLibrary:
    """ASAP's committed catalog of MaxText's recipes (read once)."""
    text = (resources.files("server.launch") / CATALOG_RESOURCE).read_text(encoding="utf-8")
    return library_from_json(json.loads(text))


# -- a checkout ---------------------------------------------------------------------------------------------
_checkout_cache: dict[str, tuple[tuple[Any, ...], RecipeLibrary]] = {}


def read_checkout(maxtext_path: Path | str) -> RecipeLibrary | None:
    """The recipes of the MaxText checkout at `maxtext_path` (its root, or a folder inside it); None when it has
    no benchmarks/. Read again only when one of the files it read, or the set of recipe files, changed."""
    bench = checkout_benchmarks_dir(Path(maxtext_path))
    if bench is None:
        return None
    root = bench.parent
    tree = DiskTree(root)
    key = str(root.resolve())
    cached = _checkout_cache.get(key)
    if cached is not None:
        stamp, lib = cached
        if tree.stamp(r for r, *_ in stamp[:-1]) == stamp:
            return lib
    reader_files: set[str] = set()

    class _Recording(DiskTree):
        def read_text(self, rel: str) -> str:
            reader_files.add(rel)
            return super().read_text(rel)

    lib = read_library(_Recording(root), ORIGIN_CHECKOUT, str(root))
    _checkout_cache[key] = (tree.stamp(reader_files), lib)
    return lib


# -- lookups ------------------------------------------------------------------------------------------------
def lookup_recipe(name: str, maxtext_path: Path | str | None = None) -> RecipeLookup:
    """The recipe `--model_name=name` runs: from the checkout at `maxtext_path` first, then ASAP's catalog; with
    the checkout's reading problems and, when not found, the closest names (did-you-mean)."""
    problems: tuple[RecipeProblem, ...] = ()
    searched: list[str] = []
    found: Recipe | None = None
    lib = read_checkout(maxtext_path) if maxtext_path is not None else None
    if lib is not None:
        problems = lib.problems
        if lib.usable:
            searched.append(str(Path(lib.root) / BENCHMARKS_DIR))
            found = lib.recipes.get(name)
    cat = catalog()
    if found is None:
        searched.append(f"catalog@{(cat.commit or '')[:9]}")
        found = cat.recipes.get(name)
    suggestions: tuple[str, ...] = ()
    if found is None:
        suggestions = tuple(suggest(name, recipe_names(maxtext_path)))
    return RecipeLookup(name, found, problems, suggestions, tuple(searched))


def find_recipe(name: str, maxtext_path: Path | str | None = None) -> Recipe | None:
    """The recipe benchmark_runner's `--model_name=name` runs (checkout first, then the catalog); None if none."""
    return lookup_recipe(name, maxtext_path).recipe


def recipe_names(maxtext_path: Path | str | None = None) -> list[str]:
    """Every name benchmark_runner's --model_name takes: the checkout's in the runner's order, then the catalog's
    the checkout lacks (a recipe bound to a variable but in no dictionary of the runner's is left out)."""
    names: dict[str, None] = {}
    lib = read_checkout(maxtext_path) if maxtext_path is not None else None
    for source in (lib, catalog()):
        if source is not None and source.usable:
            names.update(dict.fromkeys(n for n, r in source.recipes.items() if r.runner_choice))
    return list(names)


def suggest(name: str, names: Iterable[str], n: int = 3) -> list[str]:
    """Close names for a misspelt recipe: the underscore spelling argparse wants first, then difflib's."""
    pool = list(names)
    out = []
    alt = name.replace("-", "_").replace(".", "_")
    if alt != name and alt in pool:
        out.append(alt)
    for m in difflib.get_close_matches(alt, pool, n=n, cutoff=0.6):
        if m not in out:
            out.append(m)
    return out[:n]


# -- what the runner passes ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class BenchmarkSetting:
    """One config key benchmark_runner puts on MaxText's command line for a recipe."""

    key: str
    value: Value
    origin: Origin | None  # the recipe's line for a tuning param; None for one the runner writes itself
    source: str  # "recipe", "pathways" (the recipe's or BASE_PATHWAYS_TUNING_PARAMS) or "runner"
    note: str = ""  # for a runner key: which option or line of MaxText gives it
    token: str = ""  # the `key=value` text as the runner formats it (f"{key}={value}")


_RUNNERS = ("xpk", "on-device")
_TRUE = ("y", "yes", "t", "true", "1")
_FALSE = ("n", "no", "f", "false", "0")


def _arg(runner_args: Mapping[str, str], name: str) -> str | None:
    for k, v in runner_args.items():
        if k.lstrip("-") == name:
            return v
    return None


def _str2bool(v: str) -> bool | None:
    """benchmark_utils.py:33-55@e591f30cb (None where MaxText raises)."""
    low = v.lower()
    return True if low in _TRUE else False if low in _FALSE else None


def benchmark_settings(recipe: Recipe, runner_args: Mapping[str, str]) -> list[BenchmarkSetting]:
    """The config keys `benchmark_runner <runner> --model_name=<recipe> ...` writes after MaxText's base.yml, in
    its order (maxtext_xpk_runner.py:435-454@e591f30cb), with a key written twice kept once, at its first place and
    with its last value, as `OmegaConf.from_cli` reads them (pyconfig.py:439). `runner_args` are the runner's
    options by name (`num_steps` or `--num_steps`) as written; `runner` picks "xpk" (default) or "on-device".

    - the recipe's tuning_params (`_get_config_tuning_params`, maxtext_xpk_runner.py:229-280); under
      `--use_pathways=true` the recipe's pathways_tuning_params (else BASE_PATHWAYS_TUNING_PARAMS) are merged over
      them, with BASE_PATHWAYS_TUNING_PARAMS' keys they lack added (lines 246-273);
    - `steps` from `--num_steps` (default 20: benchmark_runner.py:169-174, 232-236; line 446);
    - `model_name` = the recipe's model_type (line 447);
    - `base_output_directory` from `--base_output_directory` (line 448);
    - without Pathways, `use_vertex_tensorboard=false vertex_tensorboard_project="" vertex_tensorboard_region=""`
      (lines 409-410, 449);
    - `run_name`: XPK's generated workload name (lines 608-624), or on-device `--run_name` (benchmark_runner.py:
      343-351; line 450);
    - `gcs_metrics=true` never: benchmark_runner turns metrics upload off (benchmark_runner.py:337, 364; line 451).
    A value the runner's options leave unknown is Symbolic."""
    runner = (_arg(runner_args, "runner") or "xpk").strip()
    pathways_arg = _arg(runner_args, "use_pathways")
    pathways = _str2bool(pathways_arg) if pathways_arg is not None else False
    out: list[BenchmarkSetting] = []

    def add(
        key: str, value: Value, origin: Origin | None, source: str, note: str = "", token: str | None = None
    ) -> None:
        out.append(BenchmarkSetting(key, value, origin, source, note, token if token is not None else f"{key}={value}"))

    for k, v in recipe.tuning_params.items():
        add(k, v, recipe.tuning_lines.get(k), "recipe")
    if pathways is None:
        add("use_pathways", Symbolic(f"--use_pathways={pathways_arg}"), None, "runner", "not a boolean to str2bool")
    elif pathways:
        # `if wl_config.model.pathways_tuning_params is None` (maxtext_xpk_runner.py:247): BASE_PATHWAYS_... itself
        own = recipe.pathways_tuning_params
        pw = dict(own if own is not None else recipe.base_pathways_tuning_params or {})
        lines = dict(recipe.pathways_tuning_lines if own is not None else recipe.base_pathways_tuning_lines)
        for k, v in (recipe.base_pathways_tuning_params or {}).items():
            if k not in pw:
                pw[k] = v
                if k in recipe.base_pathways_tuning_lines:
                    lines[k] = recipe.base_pathways_tuning_lines[k]
        for k, v in pw.items():
            add(k, v, lines.get(k), "pathways")
    steps_arg = _arg(runner_args, "num_steps")
    steps: Value = 20
    if steps_arg is not None:
        try:
            steps = int(steps_arg)  # argparse's type=int
        except ValueError:
            steps = Symbolic(steps_arg)
    add("steps", steps, None, "runner", "--num_steps (default 20), maxtext_xpk_runner.py:446")
    add("model_name", recipe.model_type, None, "runner", "the recipe's model_type, maxtext_xpk_runner.py:447")
    out_dir = _arg(runner_args, "base_output_directory")
    add(
        "base_output_directory",
        out_dir if out_dir is not None else Symbolic("<--base_output_directory, which the runner requires>"),
        None,
        "runner",
        "--base_output_directory, maxtext_xpk_runner.py:448",
    )
    if not pathways:
        note = "without Pathways, maxtext_xpk_runner.py:410"
        add("use_vertex_tensorboard", False, None, "runner", note, "use_vertex_tensorboard=false")
        add("vertex_tensorboard_project", "", None, "runner", note, 'vertex_tensorboard_project=""')
        add("vertex_tensorboard_region", "", None, "runner", note, 'vertex_tensorboard_region=""')
    run_name = _arg(runner_args, "run_name")
    if runner == "on-device" and run_name:
        add("run_name", run_name, None, "runner", "--run_name, maxtext_xpk_runner.py:450")
    elif runner == "on-device":
        name = Symbolic(f"{recipe.name}-<date> (or none when $M_RUN_NAME is set)")
        add("run_name", name, None, "runner", "benchmark_runner.py:343-351")
    elif runner in _RUNNERS:
        add("run_name", Symbolic("<the XPK workload name>"), None, "runner", "maxtext_xpk_runner.py:608-624")
    final: dict[str, BenchmarkSetting] = {}
    for s in out:
        final[s.key] = s  # a repeated key: its last value, at its first place (as a dict update keeps it)
    return list(final.values())


def benchmark_overrides(recipe: Recipe, runner_args: Mapping[str, str]) -> dict[str, Value]:
    """The config keys benchmark_runner passes for this recipe and these runner options, in command order (see
    benchmark_settings): the values as the runner holds them, Symbolic where its options leave them unknown."""
    return {s.key: s.value for s in benchmark_settings(recipe, runner_args)}


def benchmark_command_args(recipe: Recipe, runner_args: Mapping[str, str]) -> list[str]:
    """The `key=value` words the runner writes after `python3 -m maxtext.trainers.pre_train.train <base.yml>`, as
    it formats them (f"{key}={value}", maxtext_xpk_runner.py:277-278, 445-451), a repeated key once."""
    return [s.token for s in benchmark_settings(recipe, runner_args)]


def benchmark_xla_flags(recipe: Recipe, runner_args: Mapping[str, str]) -> str | Symbolic:
    """The XLA flags the run gets: the recipe's xla_flags as LIBTPU_INIT_ARGS (maxtext_xpk_runner.py:414, 439);
    under `--use_pathways=true`, the Pathways proxy's flags: the recipe's, less its options' "remove", plus its
    "add_proxy" (`_get_pathways_proxy_flags`, lines 458-494; the proxy's own --pathways_proxy flags aside)."""
    pathways_arg = _arg(runner_args, "use_pathways")
    if pathways_arg is None or not _str2bool(pathways_arg):
        return recipe.xla_flags
    if isinstance(recipe.xla_flags, Symbolic):
        return recipe.xla_flags
    flags = recipe.xla_flags.split()
    options = recipe.pathways_xla_flag_options or {}
    remove = options.get("remove")
    if isinstance(remove, list):
        flags = [f for f in flags if f not in remove]
    add = options.get("add_proxy")
    if isinstance(add, str):
        flags += add.split()
    elif add is not None:
        return Symbolic(f"{recipe.xla_flags} + {add}")
    return " ".join(flags)
