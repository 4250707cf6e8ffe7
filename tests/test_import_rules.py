"""The import rules of ARCHITECTURE.md, checked two ways.

Statically: every module's imports are read from its source (ast), so a rule
broken by an import in any function body fails here, whether or not a test
runs that function. At run time: a fresh interpreter imports the modules (and
runs the read-only commands) and reports whether TensorFlow, pandas or
matplotlib loaded.
"""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

from console import ENV, REPO

PACKAGES = ("bench", "methodology", "models")
HEAVY = ("tensorflow", "tf_keras", "official", "tensorflow_datasets", "pandas", "matplotlib", "numpy", "jax", "flax",
         "torch")


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for pkg in PACKAGES for p in sorted((REPO / pkg).rglob("*.py"))}


def imports_of(name: str, top_level_only: bool = False) -> set[str]:
    """Every module ``name`` imports anywhere in its source (or only at its top level)."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    found = set()
    for node in (tree.body if top_level_only else ast.walk(tree)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names
                      if f"{node.module}.{alias.name}" in MODULES}
    return found


def top(name: str) -> str:
    return name.split(".")[0]


def in_package(name: str, *prefixes: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


# The JAX engine's input and what it stands on, TensorFlow nowhere in their source. They import
# bench.data.records and bench.data.tfrecord, which name TensorFlow only inside the functions that
# read gs:// or write through TensorFlow's writer (none of which these call): both are checked to
# name none at top level, and the grain input to load none at run time.
GRAIN_INPUT = ("bench.data.example", "bench.data.record_problems", "bench.data.record_index", "bench.data.jpeg",
               "bench.data.grain_records", "bench.data.grain_input", "bench.data.synthetic_jpegs",
               "bench.data.synthetic_set")

# The torch engine with no JAX in it: every module of bench/train_torch/ but torchax_ops (PyTorch as JAX), each
# named (the package's own name would cover torchax_ops too; its __init__ imports nothing).
TORCH_ENGINE_WITHOUT_JAX = tuple(n for n in MODULES if in_package(n, "bench.train_torch")
                                 and n not in ("bench.train_torch", "bench.train_torch.torchax_ops"))
TENSORFLOW = ("tensorflow", "tf_keras", "official", "tensorflow_datasets")
JAX = ("jax", "flax", "optax", "orbax", "torchax")

# (modules the rule covers, modules they must never import, why)
RULES = [
    (("methodology",), ("bench", "models", "tensorflow", "tf_keras", "official", "matplotlib"),
     "methodology/ is pure arithmetic: no TensorFlow, no harness"),
    (("models",), ("bench", "methodology"), "models/ builds models and knows nothing of benchmarks"),
    (("models.resnet_flax", "models.xla_flops"), ("tensorflow", "tf_keras", "official", "models.resnet", "torch",
                                                  "models.resnet_torch"),
     "the JAX models run where TensorFlow is not installed"),
    (("models.resnet_torch",), (*TENSORFLOW, *JAX, "models.resnet", "models.resnet_flax", "models.xla_flops"),
     "the torch model runs where neither TensorFlow nor JAX is installed"),
    (("models.resnet_spec",), (*TENSORFLOW, *JAX, "torch", "numpy", "models.resnet", "models.resnet_flax",
                               "models.resnet_torch"), "the numbers every ResNet definition shares need no framework"),
    (("bench.results", "bench.report", "bench.cluster", "bench.cli", "bench.plan", "bench.errors", "bench.humanize",
      "bench.streams", "bench.data.spec",
      "bench.data.tfrecord", "bench.harness"),
     ("bench.train.run", "bench.train.resume", "bench.train.recipe", "bench.train.strategy", "bench.train.timer",
      "bench.train.callbacks", "bench.train.evaluation", "bench.train.progress", "bench.train.environment",
      "bench.train.peak", "bench.train.local_peaks", "bench.data.pipeline", "bench.data.records",
      "bench.data.record_checks", "bench.data.preprocess", "models.resnet"),
     "these never need a TensorFlow process's modules"),
    (("bench.results", "bench.cluster", "bench.plan",
      "bench.data.spec", "bench.harness", "bench.report.summary_text"),
     ("bench.cli",), "the command line sits on top; nothing below imports it"),
    (("bench.harness",), ("tensorflow", "tf_keras", "official", "jax", "flax", "optax", "orbax", "torch", "torchax",
                          "bench.train", "bench.train_jax", "bench.train_torch", "bench.data.pipeline", "models"),
     "the harness is every engine's and imports none"),
    (("bench.train",), ("bench.train_jax", "bench.train_torch", "jax", "flax", "optax", "orbax", "torch"),
     "the engines do not import each other"),
    (("bench.train_jax",), ("bench.train", "bench.train_torch", "torch"), "the engines do not import each other"),
    (("bench.train_torch",), ("bench.train", "bench.train_jax", *TENSORFLOW, "models.resnet", "models.resnet_flax"),
     "the engines do not import each other; the torch engine runs where TensorFlow is not installed"),
    (TORCH_ENGINE_WITHOUT_JAX, JAX, "the torch engine runs where JAX is not installed (but for torchax_ops)"),
    (GRAIN_INPUT, ("tensorflow", "tf_keras", "official", "tensorflow_datasets", "bench.data.pipeline",
                   "bench.data.preprocess", "bench.data.record_checks", "bench.data.tools", "models.resnet",
                   "bench.train", "bench.train_jax", "bench.cli"),
     "the JAX engine's input (grain) and the synthetic JPEGs read and write TFRecords without TensorFlow"),
]
# Where TensorFlow is not installed the JAX engine still runs: at import time it names no TensorFlow module
# (real data alone loads bench/data/pipeline.py, inside the functions that read it).
JAX_TOP_LEVEL_FORBIDDEN = ("tensorflow", "tf_keras", "official", "tensorflow_datasets", "bench.data.pipeline",
                           "bench.data.records", "bench.data.preprocess", "bench.data.record_checks",
                           "models.resnet")


@pytest.mark.parametrize("covered, forbidden, why", RULES, ids=[r[2][:40] for r in RULES])
def test_static_import_rules(covered, forbidden, why):
    broken = []
    for name in MODULES:
        if not in_package(name, *covered):
            continue
        # A command's handler may load the training modules, after its checks: for bench.cli
        # the rule is about import time, so only its top-level imports count.
        for imported in imports_of(name, top_level_only=in_package(name, "bench.cli")):
            if in_package(imported, *forbidden) and not in_package(imported, name):
                broken.append(f"{name} imports {imported}")
    assert not broken, f"{why}: " + "; ".join(broken)


def test_the_jax_engine_names_no_tensorflow_module_at_import_time():
    broken = [f"{name} imports {imported}" for name in MODULES if in_package(name, "bench.train_jax")
              for imported in imports_of(name, top_level_only=True) if in_package(imported, *JAX_TOP_LEVEL_FORBIDDEN)]
    assert not broken, "; ".join(broken)


def test_tensorflow_free_modules_name_no_tensorflow_at_top_level():
    """Modules that read-only commands load: TensorFlow may appear only inside a function, never at top level."""
    for name, path in MODULES.items():
        if not in_package(name, "bench.results", "bench.report", "bench.cluster", "bench.cli", "methodology",
                          "bench.plan", "bench.harness",
                          "bench.data.spec", "bench.data.records", "bench.data.tfrecord", *GRAIN_INPUT):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            assert not any(top(n) in ("tensorflow", "tf_keras", "official") for n in names), f"{name}: {names}"


LIGHT_MODULES = sorted(n for n in MODULES if in_package(
    n, "methodology", "bench.cli", "bench.results", "bench.cluster", "bench.plan", "bench.errors", "bench.humanize",
    "bench.streams", "bench.data.spec",
    "bench.data.tfrecord", "bench.harness", "bench.report.summary_text", "bench.data.records", "bench.data.example",
    "bench.data.record_problems", "bench.data.synthetic_set")
    and not n.endswith("__main__"))


def loaded_after(code: str) -> list[str]:
    probe = code + f"\nimport sys\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, env=ENV,
                          cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    return eval(done.stdout.strip().splitlines()[-1])  # noqa: S307 (our own probe's list of names)


def test_importing_the_light_modules_loads_nothing_heavy():
    assert loaded_after("\n".join(f"import {name}" for name in LIGHT_MODULES)) == []


def test_read_only_commands_load_nothing_heavy():
    code = ("import contextlib, io\nfrom bench.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    assert main(['reproduce']) == 0\n"
            "    assert main(['cost', '--images-per-sec', '1216', '--hardware', 'v100']) == 0\n"
            "    assert main(['project', '--validate']) == 0\n"
            "    assert main(['choose', 'a100x8', 'v4-32', 'v5e-16', 'v5e-16=30000']) == 0\n"
            "    assert main(['project', '--images-per-sec', '1270', '--per-device-batch', '256',"
            " '--interconnect', 'v100-nvlink', '--devices', '1,8']) == 0\n")
    assert loaded_after(code) == []


def test_compare_loads_nothing_heavy(tmp_path):
    """`podbench compare` reads run directories (here the runner's own files, tests/run_fixture.py)."""
    code = ("import contextlib, io, sys\n"
            f"sys.path.insert(0, {str(REPO / 'tests')!r})\n"
            "from run_fixture import write_run\nfrom bench.cli import main\n"
            f"a, b = write_run({str(tmp_path)!r}, 'a'), write_run({str(tmp_path)!r}, 'b', step_s=2.0)\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    assert main(['compare', str(a), str(b)]) == 1\n")
    assert loaded_after(code) == []


def test_peak_refuses_bad_arguments_before_tensorflow_loads():
    """`podbench peak` measures with TensorFlow, but a bad flag costs no TensorFlow start-up."""
    code = ("import contextlib, io\nfrom bench.cli import main\n"
            "with contextlib.redirect_stderr(io.StringIO()):\n"
            "    assert main(['peak', '--repetitions', '0']) == 2\n"
            "    assert main(['peak', '--tpu', ' ']) == 2\n")
    assert loaded_after(code) == []


def test_every_commands_help_loads_nothing_heavy():
    """`podbench X --help` builds the parser of every command; none may load TensorFlow,
    pandas or matplotlib just to register, or every help takes seconds."""
    code = ("import contextlib, io\nfrom bench import cli\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    for command in [c for c in cli.build_parser()._subparsers._group_actions[0].choices]:\n"
            "        try:\n            cli.main([command, '--help'])\n        except SystemExit:\n            pass\n")
    assert loaded_after(code) == []


def test_models_package_loads_no_framework():
    """`import models` (which bench and the tests import first) loads neither TensorFlow nor jax:
    each engine's builder loads its own framework."""
    assert loaded_after("import models") == []


def test_the_jax_engine_loads_no_tensorflow():
    pytest.importorskip("flax")
    loaded = loaded_after("import bench.train_jax.run, bench.train_jax.process, bench.train_jax.peak")
    assert "jax" in loaded and not {"tensorflow", "tf_keras", "official", "tensorflow_datasets"} & set(loaded)


def test_the_grain_input_loads_no_tensorflow():
    """(grain itself loads jax where it is installed, for its tree utilities: the JAX engine's own.)"""
    loaded = loaded_after("import bench.data.grain_input, bench.data.grain_records, bench.data.synthetic_jpegs")
    assert "numpy" in loaded and not {"tensorflow", "tf_keras", "official", "tensorflow_datasets"} & set(loaded)


def test_the_torch_model_and_recipe_load_neither_tensorflow_nor_jax():
    pytest.importorskip("torch")
    loaded = loaded_after("import models.resnet_torch, bench.train_torch.recipe")
    assert "torch" in loaded and not {"tensorflow", "tf_keras", "official", "jax", "flax"} & set(loaded)


def test_jax_models_load_no_tensorflow():
    pytest.importorskip("flax")
    loaded = loaded_after("import models.resnet_flax, models.xla_flops")
    assert "jax" in loaded and not {"tensorflow", "tf_keras", "official", "tensorflow_datasets"} & set(loaded)


def import_graph() -> dict[str, set[str]]:
    """Each module of the three packages -> the modules of theirs it imports anywhere in its source (an
    import inside a function included: deferring one hides a circle, it does not remove it). A module's
    own packages are left out: importing ``bench.cli`` from ``bench.cli.run`` is Python's layout, not a circle."""
    return {name: {i for i in imports_of(name) if i in MODULES and not in_package(name, i)} for name in MODULES}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_circles_are_found():
    """The finder itself, on a made-up graph: a -> b -> c -> a is one circle, d -> a none."""
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_imports_run_one_way_with_no_circles():
    assert circles(import_graph()) == []


def test_bench_keeps_its_flat_modules_few():
    """bench/'s top level holds only what every room shares; each concern has a room (ARCHITECTURE.md)."""
    flat = sorted(p.name for p in (REPO / "bench").glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert len(flat) <= 8, flat
