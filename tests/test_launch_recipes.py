"""MaxText's benchmark recipes read statically (server/launch/recipes.py): the committed catalog against MaxText's
own files at the catalog's commit, a checkout on disk before the catalog, what stays symbolic, what a broken file
gives, and the config keys benchmark_runner adds for a recipe."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import posixpath
import re
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from server.launch import recipes as R

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "recipes_from_maxtext.py"
COMMITTED = ROOT / "server" / "launch" / "data" / "maxtext_recipes.json"
MIRROR = Path(os.environ.get("ASAP_MAXTEXT_GIT", "/work/.mirror/AI-Hypercomputer+maxtext/repo"))
MODEL_CONFIGS = (
    "benchmarks/maxtext_trillium_model_configs.py",
    "benchmarks/maxtext_v5e_model_configs.py",
    "benchmarks/maxtext_v5p_model_configs.py",
)

needs_mirror = pytest.mark.skipif(
    shutil.which("git") is None or not MIRROR.exists(),
    reason=f"needs git and MaxText's git directory at {MIRROR} (set ASAP_MAXTEXT_GIT)",
)


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("recipes_from_maxtext", SCRIPT)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def mirror_text(rel: str) -> str:
    commit = R.catalog().commit
    return subprocess.run(
        ["git", "--git-dir", str(MIRROR), "show", f"{commit}:{rel}"], capture_output=True, text=True, check=True
    ).stdout


@pytest.fixture(autouse=True)
def fresh_checkout_cache():
    R._checkout_cache.clear()
    yield
    R._checkout_cache.clear()


# -- a small hand-written MaxText tree --------------------------------------------------------------------------
XLA_FLAGS_LIBRARY = '''\
"""A few flags, as MaxText's library writes them."""
import os
REMOVE = "remove"
ADD_PROXY = "add_proxy"
_LIMIT = 98304
VMEM_FLAG = f" --xla_tpu_scoped_vmem_limit_kib={_LIMIT}"
CUSTOM_VMEM = "--xla_tpu_scoped_vmem_limit_kib={vmem_limit}".format
CF = (
    " --xla_tpu_enable_async_collective_fusion=true"
    " --xla_enable_async_all_gather=true"
)
BARRIER = " --xla_tpu_use_enhanced_launch_barrier=true"
DEBUG = False
if DEBUG:
    CF = ""
MAYBE = " --xla_maybe=1"
if os.environ.get("ASAP_TEST_NEVER_SET"):
    MAYBE = ""
'''

GLOBALS = """\
import os.path
MAXTEXT_ASSETS_ROOT = os.environ.get("MAXTEXT_ASSETS_ROOT", "src/maxtext/assets")
"""

TRILLIUM = '''\
"""Recipes of a tiny MaxText."""
import os.path
from tempfile import gettempdir
from benchmarks.benchmark_utils import MaxTextModel, _add_to_model_dictionary
from benchmarks import xla_flags_library
from benchmarks.xla_flags_library import BARRIER
import benchmarks.xla_flags_library as xfl
from benchmarks.globals import MAXTEXT_ASSETS_ROOT

BASE_PATHWAYS_TUNING_PARAMS = {
    "enable_single_controller": True,
    "metrics_file": "metrics.txt",
}
COMMON = {"dataset_type": "synthetic", "steps": 7}
FLAGS = xla_flags_library.VMEM_FLAG
FLAGS += BARRIER
trillium_model_dict = {}

llama3_1_70b_8192 = _add_to_model_dictionary(
    trillium_model_dict,
    MaxTextModel(
        model_name="llama3-1-70b-8192",
        model_type="llama3.1-70b",
        tuning_params={
            **COMMON,
            "per_device_batch_size": 3,
            "ici_fsdp_parallelism": -1,
            "learning_rate": 1e-4 * 2,
            "run_tag": f"bs{3 * 2}",
            "tokenizer_path": os.path.join(MAXTEXT_ASSETS_ROOT, "tokenizers", "tokenizer.llama3"),
            "grain_files": os.path.join(gettempdir(), "c4"),
            "data_dir": os.path.join("gs://bucket", "c4"),
        },
        xla_flags=FLAGS + xfl.CF + " ".join([" --a=1", "--b=2"]),
        pathways_tuning_params={"metrics_file": "pw.txt"},
        pathways_xla_flag_options={
            xla_flags_library.REMOVE: ["--xla_enable_async_all_gather=true"],
            xla_flags_library.ADD_PROXY: xla_flags_library.BARRIER,
        },
    ),
)

FLAGS = " --later=1"  # rebound after the recipe above: not what it used

tiny_custom = _add_to_model_dictionary(
    trillium_model_dict,
    MaxTextModel(
        model_name="tiny-custom",
        model_type="default",
        tuning_params=COMMON | {"remat_policy": "full", "when": make_schedule()},
        xla_flags=xla_flags_library.CUSTOM_VMEM(vmem_limit=65536) + FLAGS,
    ),
)

not_registered = MaxTextModel(model_name="nr", model_type="default", tuning_params={}, xla_flags="")

conditional = _add_to_model_dictionary(
    trillium_model_dict,
    MaxTextModel(model_name="conditional", model_type="default", tuning_params={}, xla_flags=xla_flags_library.MAYBE),
)
'''

V5P = """\
from benchmarks.benchmark_utils import MaxTextModel, _add_to_model_dictionary
v5p_model_dict = {}
shared = _add_to_model_dictionary(
    v5p_model_dict,
    MaxTextModel(model_name="shared", model_type="llama2-7b", tuning_params={"per_device_batch_size": 1}, xla_flags=""),
)
llama3_1_70b_8192_v5p = _add_to_model_dictionary(
    v5p_model_dict,
    MaxTextModel(
        model_name="llama3-1-70b-8192",
        model_type="llama3.1-70b",
        tuning_params={"per_device_batch_size": 9},
        xla_flags="",
    ),
)
"""

V5E = """\
from benchmarks.benchmark_utils import MaxTextModel, _add_to_model_dictionary
v5e_model_dict = {}
shared = _add_to_model_dictionary(
    v5e_model_dict,
    MaxTextModel(model_name="shared", model_type="gpt3-175b", tuning_params={"per_device_batch_size": 2}, xla_flags=""),
)
"""

C4 = """\
from benchmarks.benchmark_utils import _add_to_model_dictionary
from benchmarks.maxtext_v5p_model_configs import shared
from benchmarks.convergence.convergence_utils import _setup_model_convergence_
c4_pretrain_model_dict = {}
c4_shared = _add_to_model_dictionary(c4_pretrain_model_dict, _setup_model_convergence_(shared, 1024))
shared.tuning_params["steps"] = 5
"""

# benchmark_runner.py as MaxText writes it: the dictionaries' order is read from its `.get(options.model_name)`s.
RUNNER = """\
from benchmarks.maxtext_trillium_model_configs import trillium_model_dict
from benchmarks.maxtext_v5p_model_configs import v5p_model_dict
from benchmarks.maxtext_v5e_model_configs import v5e_model_dict
from benchmarks.convergence.c4_exp import c4_pretrain_model_dict

def main():
  model = (
      trillium_model_dict.get(options.model_name)
      or {first}.get(options.model_name)
      or {second}.get(options.model_name)
      or c4_pretrain_model_dict.get(options.model_name)
  )
"""


def tiny_checkout(root: Path, runner_order: tuple[str, str] = ("v5e_model_dict", "v5p_model_dict")) -> Path:
    files = {
        "benchmarks/__init__.py": "",
        "benchmarks/xla_flags_library.py": XLA_FLAGS_LIBRARY,
        "benchmarks/globals.py": GLOBALS,
        "benchmarks/benchmark_utils.py": "class MaxTextModel: ...\n",
        "benchmarks/maxtext_trillium_model_configs.py": TRILLIUM,
        "benchmarks/maxtext_v5p_model_configs.py": V5P,
        "benchmarks/maxtext_v5e_model_configs.py": V5E,
        "benchmarks/convergence/__init__.py": "",
        "benchmarks/convergence/c4_exp.py": C4,
        "benchmarks/convergence/convergence_utils.py": "def _setup_model_convergence_(m, n): ...\n",
        "benchmarks/benchmark_runner.py": RUNNER.format(first=runner_order[0], second=runner_order[1]),
        "src/maxtext/configs/base.yml": "steps: 10\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def line_of(text: str, needle: str) -> int:
    """The 1-based line of the first line containing `needle`."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


# -- the committed catalog -------------------------------------------------------------------------------------
def test_committed_catalog_is_maxtext_at_the_issue_commit_in_stable_format():
    text = COMMITTED.read_text(encoding="utf-8")
    assert R.dumps(json.loads(text)) == text
    cat = R.catalog()
    assert cat.origin == R.ORIGIN_CATALOG and cat.commit and cat.commit.startswith("e591f30cb")
    assert len(cat.recipes) == 66 and cat.default_name == "default_basic_1"  # benchmark_runner.py:135
    for name, r in cat.recipes.items():
        assert r.name == name and r.commit == cat.commit and r.origin == R.ORIGIN_CATALOG
        assert r.file in MODEL_CONFIGS and r.line > 0 and r.runner_choice
        assert isinstance(r.model_name, str) and name == r.model_name.replace("-", "_")
        assert set(r.tuning_lines) == set(r.tuning_params)
        assert isinstance(r.xla_flags, str)
    assert R.recipe_names(None) == list(cat.recipes)
    # the convergence recipe is built by running MaxText's code: reported, not guessed
    (problem,) = cat.problems
    assert problem.file == "benchmarks/convergence/c4_exp.py" and "_setup_model_convergence_" in problem.message
    caveat = cat.recipes["deepseek_v3_ep_256_v5p_512"].caveats
    assert len(caveat) == 1 and caveat[0].startswith("benchmarks/convergence/c4_exp.py:")


@needs_mirror
def test_catalog_regenerates_from_maxtext_byte_for_byte(tmp_path):
    out = tmp_path / "recipes.json"
    commit = R.catalog().commit
    assert commit is not None
    assert load_script().main(["--maxtext", str(MIRROR), "--commit", commit, "--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == COMMITTED.read_text(encoding="utf-8")


@needs_mirror
def test_a_checkout_of_the_catalog_commit_reads_as_the_catalog(tmp_path):
    """The same reader for both: MaxText's benchmarks/ exported to disk gives the catalog's recipes."""
    commit = R.catalog().commit
    assert commit is not None
    archive = subprocess.run(
        ["git", "--git-dir", str(MIRROR), "archive", commit, "benchmarks"], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "x", "-C", str(tmp_path)], input=archive, check=True)
    lib = R.read_checkout(tmp_path / "src")  # a path inside the checkout finds benchmarks/ at its root
    assert lib is not None and lib.origin == R.ORIGIN_CHECKOUT
    cat = R.catalog()
    assert list(lib.recipes) == list(cat.recipes)
    for name, r in lib.recipes.items():
        c = cat.recipes[name]
        assert r.file == str(tmp_path / c.file) and r.commit is None and r.line == c.line
        assert (r.model_type, r.tuning_params, r.xla_flags) == (c.model_type, c.tuning_params, c.xla_flags)
        assert {k: o.line for k, o in r.tuning_lines.items()} == {k: o.line for k, o in c.tuning_lines.items()}
        assert r.pathways_tuning_params == c.pathways_tuning_params
        assert r.pathways_xla_flag_options == c.pathways_xla_flag_options


@needs_mirror
@pytest.mark.parametrize("rel", MODEL_CONFIGS)
def test_every_recipe_of_each_model_configs_file_matches_its_source_text(rel):
    """Each file's recipes, against its text read line by line: a `"key": <literal>,` line of a recipe's
    tuning_params is that key's value and line; `MaxTextModel(` lines are the recipes."""
    text = mirror_text(rel)
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines, 1) if "MaxTextModel(" in line and "import" not in line]
    recipes = [r for r in R.catalog().recipes.values() if r.file == rel]
    assert sorted(r.line for r in recipes) == starts
    literal = re.compile(r'^\s*"(?P<key>\w+)":\s*(?P<value>.*?),?\s*(#.*)?$')
    checked = 0
    for r in recipes:
        name_line = next(i for i in range(r.line, r.line + 5) if "model_name=" in lines[i - 1])
        assert re.search(r'model_name="([^"]+)"', lines[name_line - 1])[1] == r.model_name  # type: ignore[index]
        type_line = next(i for i in range(r.line, r.line + 6) if "model_type=" in lines[i - 1])
        assert re.search(r'model_type="([^"]+)"', lines[type_line - 1])[1] == r.model_type  # type: ignore[index]
        for key, origin in r.tuning_lines.items():
            assert origin.file == rel
            m = literal.match(lines[origin.line - 1])
            assert m is not None and m["key"] == key, (r.name, key, lines[origin.line - 1])
            try:
                value = ast.literal_eval(m["value"])
            except (ValueError, SyntaxError):
                join = re.fullmatch(r"os\.path\.join\((.*)\)", m["value"])
                try:
                    value = posixpath.join(*ast.literal_eval(f"[{join[1]}]")) if join else None
                except (ValueError, SyntaxError):
                    value = None
                if value is None:  # os.path.join(MAXTEXT_ASSETS_ROOT, ...), a value spread over lines
                    assert isinstance(r.tuning_params[key], R.Symbolic), (r.name, key)
                    continue
            assert r.tuning_params[key] == value and type(r.tuning_params[key]) is type(value), (r.name, key)
            checked += 1
    assert checked > 100


@needs_mirror
def test_xla_flags_resolve_to_the_library_constants_flags():
    """Every `xla_flags_library.NAME` a recipe names contributes the `--flag=value`s written in NAME's definition;
    `CUSTOM_VMEM_LIMIT_FLAG(vmem_limit=N)` gives the scoped VMEM limit N."""
    library = mirror_text("benchmarks/xla_flags_library.py")
    blocks: dict[str, list[str]] = {}
    for m in re.finditer(r"^([A-Z_]+) = (.*?)(?=^\S|\Z)", library, re.M | re.S):
        blocks[m[1]] = re.findall(r"--[\w.]+=\w+", m[2])
    literal_numbers = {m[1]: m[2] for m in re.finditer(r"^(_[A-Z_]+) = (\d+)$", library, re.M)}
    cat = R.catalog()
    seen = 0
    for rel in MODEL_CONFIGS:
        lines = mirror_text(rel).splitlines()
        for r in (r for r in cat.recipes.values() if r.file == rel):
            assert isinstance(r.xla_flags, str)
            flags = r.xla_flags.split()
            block = "\n".join(lines[r.xla_flags_line - 1 : r.xla_flags_line + 12]).split("),\n")[0]
            for name in re.findall(r"xla_flags_library\.([A-Z_]+)\b(?!\()", block):
                for flag in blocks[name]:
                    assert flag in flags, (r.name, name, flag)
                    seen += 1
            for n in re.findall(r"CUSTOM_VMEM_LIMIT_FLAG\(vmem_limit=(\d+)\)", block):
                assert f"--xla_tpu_scoped_vmem_limit_kib={n}" in flags
                seen += 1
            if "DENSE_VMEM_LIMIT_FLAG" in block:
                assert f"--xla_tpu_scoped_vmem_limit_kib={literal_numbers['_DENSE_VMEM_LIMIT']}" in flags
    assert seen > 500


# -- a checkout on disk ------------------------------------------------------------------------------------------
def test_a_checkout_recipe_wins_over_the_catalog_and_keeps_its_lines(tmp_path):
    root = tiny_checkout(tmp_path / "maxtext")
    r = R.find_recipe("llama3_1_70b_8192", root)
    assert r is not None and r.origin == R.ORIGIN_CHECKOUT and r.commit is None
    trillium = root / "benchmarks/maxtext_trillium_model_configs.py"
    text = trillium.read_text(encoding="utf-8")
    assert r.file == str(trillium) and r.line == line_of(text, "MaxTextModel(")
    assert r.model_type == "llama3.1-70b" and r.dictionary == "trillium_model_dict" and r.runner_choice
    catalog_one = R.catalog().recipes["llama3_1_70b_8192"]
    assert r.tuning_params != catalog_one.tuning_params
    # the written values, `**COMMON` first (its keys where COMMON is written), then the literal's own keys
    assert list(r.tuning_params)[:2] == ["dataset_type", "steps"]
    assert r.tuning_params["per_device_batch_size"] == 3 and r.tuning_params["ici_fsdp_parallelism"] == -1
    assert r.tuning_params["learning_rate"] == pytest.approx(2e-4) and r.tuning_params["run_tag"] == "bs6"
    assert r.tuning_params["data_dir"] == "gs://bucket/c4"
    assert r.tuning_lines["per_device_batch_size"].line == line_of(text, '"per_device_batch_size": 3')
    assert r.tuning_lines["steps"].line == line_of(text, "COMMON = {") and r.tuning_lines["steps"].file == str(trillium)
    # xla_flags: a name as bound where the recipe is written (FLAGS += BARRIER, not the later FLAGS), a library
    # constant through `import ... as xfl`, " ".join
    assert r.xla_flags == (
        " --xla_tpu_scoped_vmem_limit_kib=98304 --xla_tpu_use_enhanced_launch_barrier=true"
        " --xla_tpu_enable_async_collective_fusion=true --xla_enable_async_all_gather=true --a=1 --b=2"
    )
    assert r.xla_flags_line == line_of(text, "xla_flags=FLAGS")
    # the catalog still answers the names the checkout does not have
    assert R.find_recipe("gpt_3_175b", root) is R.catalog().recipes["gpt_3_175b"]
    names = R.recipe_names(root)
    assert names[:3] == ["llama3_1_70b_8192", "tiny_custom", "conditional"] and "gpt_3_175b" in names


def test_values_that_need_maxtexts_code_stay_symbolic(tmp_path):
    root = tiny_checkout(tmp_path / "maxtext")
    r = R.find_recipe("llama3_1_70b_8192", root)
    assert r is not None
    # MAXTEXT_ASSETS_ROOT is read from the environment in globals.py; gettempdir() is the host's
    assert r.tuning_params["tokenizer_path"] == R.Symbolic(
        'os.path.join(MAXTEXT_ASSETS_ROOT, "tokenizers", "tokenizer.llama3")'
    )
    assert r.tuning_params["grain_files"] == R.Symbolic('os.path.join(gettempdir(), "c4")')
    tiny = R.find_recipe("tiny_custom", root)
    assert tiny is not None
    assert tiny.tuning_params["when"] == R.Symbolic("make_schedule()")
    assert tiny.tuning_params["remat_policy"] == "full" and tiny.tuning_params["steps"] == 7  # a `|` merge
    assert tiny.xla_flags == "--xla_tpu_scoped_vmem_limit_kib=65536 --later=1"  # "...".format(...), rebound FLAGS
    # a name bound under an `if` whose test is not known statically (CF's `if DEBUG:` with DEBUG = False is)
    cond = R.find_recipe("conditional", root)
    assert cond is not None and cond.xla_flags == R.Symbolic("xla_flags_library.MAYBE")
    # symbolic values survive the catalog's JSON
    lib = R.read_checkout(root)
    assert lib is not None
    back = R.library_from_json(json.loads(R.dumps(R.library_to_json(lib, "x/y"))))
    assert back.recipes["llama3_1_70b_8192"].tuning_params == r.tuning_params
    assert back.recipes["conditional"].xla_flags == cond.xla_flags


def test_a_syntax_error_in_a_checkout_gives_the_catalog_and_a_located_reason(tmp_path):
    root = tiny_checkout(tmp_path / "maxtext")
    broken = root / "benchmarks/maxtext_trillium_model_configs.py"
    broken.write_text(TRILLIUM.replace('"per_device_batch_size": 3,', '"per_device_batch_size": 3,,'), "utf-8")
    found = R.lookup_recipe("llama3_1_70b_8192", root)
    assert found.recipe is R.catalog().recipes["llama3_1_70b_8192"]
    (problem,) = [p for p in found.problems if p.file == str(broken)]
    assert problem.line == line_of(broken.read_text(encoding="utf-8"), ",,") and "not valid Python" in problem.message
    assert len(found.searched) == 1 and found.searched[0].startswith("catalog@")
    assert "benchmark_runner cannot import it" in problem.message
    # Python would not load the runner at all: no name comes from this checkout, not even another file's
    assert found.recipe.tuning_params["per_device_batch_size"] != 9  # v5p's llama3_1_70b_8192 in this checkout
    gone = R.lookup_recipe("shared", root)
    assert gone.recipe is None and any(p.file == str(broken) for p in gone.problems)
    assert "shared" not in R.recipe_names(root)
    # a recipe file benchmark_runner does not import only loses its own recipes
    broken.write_text(TRILLIUM, "utf-8")
    (root / "benchmarks/more_model_configs.py").write_text("x = (\n", "utf-8")
    ok = R.lookup_recipe("shared", root)
    assert ok.recipe is not None and ok.recipe.origin == R.ORIGIN_CHECKOUT
    (extra,) = [p for p in ok.problems if p.file.endswith("more_model_configs.py")]
    assert extra.line == 1 and extra.message.endswith("its recipes are not read")


def test_a_checkout_file_that_is_not_text_or_too_deep_is_a_problem_not_an_exception(tmp_path):
    root = tiny_checkout(tmp_path / "maxtext")
    (root / "benchmarks/maxtext_v5e_model_configs.py").write_bytes(b"\xff\xfe\x00junk")
    (root / "benchmarks/maxtext_v5p_model_configs.py").write_text("X = " + "(" * 5000 + ")" * 5000 + "\n", "utf-8")
    lib = R.read_checkout(root)
    assert lib is not None and "llama3_1_70b_8192" in lib.recipes
    files = {Path(p.file).name for p in lib.problems}
    assert {"maxtext_v5e_model_configs.py", "maxtext_v5p_model_configs.py"} <= files


def test_the_runners_dictionary_order_decides_a_name_two_files_define(tmp_path):
    """`shared` is in v5e's and v5p's dictionaries: benchmark_runner's `or` chain takes the first it names."""
    a = R.read_checkout(tiny_checkout(tmp_path / "a", ("v5e_model_dict", "v5p_model_dict")))
    b = R.read_checkout(tiny_checkout(tmp_path / "b", ("v5p_model_dict", "v5e_model_dict")))
    assert a is not None and b is not None
    assert a.recipes["shared"].model_type == "gpt3-175b" and b.recipes["shared"].model_type == "llama2-7b"
    assert any("shared is also a recipe" in p.message for p in a.problems)
    # a name in trillium's and v5p's dictionaries: trillium is first
    assert a.recipes["llama3_1_70b_8192"].file.endswith("maxtext_trillium_model_configs.py")
    # a recipe bound to a variable but in no dictionary is not a runner choice; the c4 one is built by code
    assert a.recipes["not_registered"].runner_choice is False
    assert any(p.file.endswith("c4_exp.py") and "_setup_model_convergence_" in p.message for p in a.problems)
    assert a.default_name == "llama3_1_70b_8192"


def test_code_that_changes_a_recipe_after_it_is_written_is_a_caveat(tmp_path):
    lib = R.read_checkout(tiny_checkout(tmp_path / "maxtext", ("v5p_model_dict", "v5e_model_dict")))
    assert lib is not None
    caveats = lib.recipes["shared"].caveats
    c4 = str(tmp_path / "maxtext/benchmarks/convergence/c4_exp.py")
    assert any(
        c.startswith(f"{c4}:{line_of(C4, 'c4_shared =')} passes shared to `_setup_model_convergence_`") for c in caveats
    )
    assert any(c.startswith(f"{c4}:{line_of(C4, 'shared.tuning_params')} changes shared") for c in caveats)
    assert lib.recipes["shared"].tuning_params == {"per_device_batch_size": 1}  # as written


def test_a_recipe_file_before_the_dictionaries_is_read_by_variable_name(tmp_path):
    """MaxText before the dictionaries (benchmark_runner.py:150-151@9e7d1a3a7): `--model_name` is the variable."""
    root = tmp_path / "old"
    (root / "benchmarks").mkdir(parents=True)
    (root / "benchmarks/maxtext_trillium_model_configs.py").write_text(
        'llama2_7b_4096 = MaxTextModel(\n    model_name="llama2-7b-4096",\n    model_type="llama2-7b",\n'
        '    tuning_params={"per_device_batch_size": 4},\n    xla_flags="",\n)\n',
        encoding="utf-8",
    )
    r = R.find_recipe("llama2_7b_4096", root / "benchmarks")
    assert r is not None and r.origin == R.ORIGIN_CHECKOUT and r.runner_choice and r.line == 1
    assert r.tuning_params == {"per_device_batch_size": 4} and r.dictionary is None


def test_the_checkout_is_read_again_when_a_file_changes(tmp_path):
    root = tiny_checkout(tmp_path / "maxtext")
    first = R.read_checkout(root)
    assert R.read_checkout(root) is first  # unchanged files: the cached reading
    lib_file = root / "benchmarks/xla_flags_library.py"
    lib_file.write_text(XLA_FLAGS_LIBRARY.replace("_LIMIT = 98304", "_LIMIT = 131072"), encoding="utf-8")
    again = R.read_checkout(root)
    assert again is not first and again is not None
    flags = again.recipes["llama3_1_70b_8192"].xla_flags
    assert isinstance(flags, str) and "--xla_tpu_scoped_vmem_limit_kib=131072" in flags.split()


def test_checkout_benchmarks_dir_from_the_paths_a_user_names(tmp_path):
    root = tiny_checkout(tmp_path / "maxtext")
    for p in (root, root / "benchmarks", root / "src/maxtext", root / "src/maxtext/configs"):
        assert R.checkout_benchmarks_dir(p) == root / "benchmarks"
    assert R.checkout_benchmarks_dir(tmp_path / "nowhere") is None
    assert R.read_checkout(tmp_path / "nowhere") is None
    assert R.find_recipe("gpt_3_175b", tmp_path / "nowhere") is R.catalog().recipes["gpt_3_175b"]


def test_an_unknown_name_gets_the_names_argparse_would_take():
    found = R.lookup_recipe("llama3-1-70b-8192", None)  # MaxTextModel.model_name, not the dictionary key
    assert found.recipe is None and found.suggestions[0] == "llama3_1_70b_8192"
    assert R.lookup_recipe("lama3_1_70b_8192").suggestions[0] == "llama3_1_70b_8192"
    assert R.lookup_recipe("zzzz").suggestions == ()


# -- what benchmark_runner passes ----------------------------------------------------------------------------
def test_benchmark_overrides_follow_the_runners_command(tmp_path):
    r = R.find_recipe("llama3_1_70b_8192", tiny_checkout(tmp_path / "maxtext"))
    assert r is not None
    args = {"--num_steps": "30", "--base_output_directory": "gs://out", "--device_type": "v6e-256"}
    got = R.benchmark_overrides(r, args)
    keys = list(got)
    # the tuning params first, in the recipe's order; `steps` keeps its place with the runner's later value
    assert keys[: len(r.tuning_params)] == list(r.tuning_params)
    assert got["steps"] == 30 and r.tuning_params["steps"] == 7
    assert got["model_name"] == r.model_type and got["base_output_directory"] == "gs://out"
    assert got["use_vertex_tensorboard"] is False and isinstance(got["run_name"], R.Symbolic)
    assert "enable_single_controller" not in got and "gcs_metrics" not in got
    tokens = R.benchmark_command_args(r, args)
    assert "steps=30" in tokens and "per_device_batch_size=3" in tokens and 'vertex_tensorboard_project=""' in tokens
    settings_ = {s.key: s for s in R.benchmark_settings(r, args)}
    assert settings_["per_device_batch_size"].origin == r.tuning_lines["per_device_batch_size"]
    assert settings_["steps"].source == "runner" and "--num_steps" in settings_["steps"].note
    # defaults: 20 steps; a missing required option stays symbolic
    plain = R.benchmark_overrides(r, {})
    assert plain["steps"] == 20 and isinstance(plain["base_output_directory"], R.Symbolic)
    assert R.benchmark_overrides(r, {"num_steps": "${STEPS}"})["steps"] == R.Symbolic("${STEPS}")
    on_device = R.benchmark_overrides(r, {"runner": "on-device", "run_name": "mine"})
    assert on_device["run_name"] == "mine"


def test_pathways_merges_the_recipes_pathways_params_and_proxy_flags(tmp_path):
    r = R.find_recipe("llama3_1_70b_8192", tiny_checkout(tmp_path / "maxtext"))
    assert r is not None and r.pathways_tuning_params == {"metrics_file": "pw.txt"}
    got = R.benchmark_overrides(r, {"--use_pathways": "true"})
    # the recipe's own pathways params, then BASE_PATHWAYS_TUNING_PARAMS' keys it lacks (maxtext_xpk_runner.py:258)
    assert got["metrics_file"] == "pw.txt" and got["enable_single_controller"] is True
    assert "use_vertex_tensorboard" not in got
    flags = R.benchmark_xla_flags(r, {"--use_pathways": "True"})
    assert isinstance(flags, str) and isinstance(r.xla_flags, str)
    assert "--xla_enable_async_all_gather=true" in r.xla_flags.split()
    assert "--xla_enable_async_all_gather=true" not in flags.split()  # the recipe's "remove"
    assert flags.split()[-1] == "--xla_tpu_use_enhanced_launch_barrier=true"  # its "add_proxy"
    assert R.benchmark_xla_flags(r, {}) == r.xla_flags
    tiny = R.find_recipe("tiny_custom", tmp_path / "maxtext")
    assert tiny is not None and tiny.pathways_tuning_params is None
    pw = R.benchmark_overrides(tiny, {"use_pathways": "yes"})  # none of its own: BASE_PATHWAYS_TUNING_PARAMS
    assert pw["metrics_file"] == "metrics.txt" and pw["enable_single_controller"] is True


def test_catalog_recipe_overrides_name_maxtexts_model_and_steps():
    r = R.catalog().recipes["llama3_1_70b_8192"]
    got = R.benchmark_overrides(r, {"--num_steps": "15", "--base_output_directory": "gs://b"})
    assert got["model_name"] == "llama3.1-70b" and got["steps"] == 15
    assert all(got[k] == v for k, v in r.tuning_params.items() if k != "steps")
    pw = R.benchmark_overrides(r, {"--use_pathways": "true"})
    base = r.base_pathways_tuning_params
    assert base is not None and all(pw[k] == v for k, v in base.items() if k not in (r.pathways_tuning_params or {}))


# -- hostile files ---------------------------------------------------------------------------------------------
class MemTree:
    def __init__(self, files: dict[str, str]):
        self.files = files

    def read_text(self, rel: str) -> str:
        if rel not in self.files:
            raise OSError(rel)
        return self.files[rel]

    def list_py(self, rel_dir: str) -> list[str]:
        return sorted(f for f in self.files if f.rsplit("/", 1)[0] == rel_dir and f.endswith(".py"))

    def display(self, rel: str) -> str:
        return rel


_FRAGMENTS = [
    "x = ", "MaxTextModel(", "_add_to_model_dictionary(d, ", "model_name=", '"a-b"', "tuning_params=", "{", "}",
    "**", "X", " + ", "xla_flags=", "f'{X}'", '"{v}".format', "(v=1)", ")", ",", "\n", "    ", "import benchmarks.x",
    "from benchmarks import x", "x.Y", "[", "]", "-1", "1e999", "'s' * 10**9", "if X:\n    X = 1\n", "d = {}\n",
    "X += 'a'\n", "lambda: 0", "' '.join(", "os.path.join(", "x.tuning_params['k'] = 1\n", ":", "=",
]  # fmt: skip


@settings(derandomize=True, max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_FRAGMENTS), max_size=40), st.lists(st.sampled_from(_FRAGMENTS), max_size=20))
def test_any_recipe_file_text_reads_without_an_exception(parts, other):
    files = {
        "benchmarks/maxtext_trillium_model_configs.py": "".join(parts),
        "benchmarks/x.py": "".join(other),
        "benchmarks/benchmark_runner.py": "".join(reversed(parts)),
    }
    lib = R.read_library(MemTree(files), R.ORIGIN_CHECKOUT, "mem")
    for r in lib.recipes.values():
        json.dumps(R.library_to_json(lib, "mem"), allow_nan=False)
        for s in R.benchmark_settings(r, {"use_pathways": "true"}):
            assert isinstance(s.token, str)
