"""The scripts, common/, the tests and scripts/ stay plain to read (shared style): the formatter's layout is the
layout, and one statement assigns one value. Unpacking one call's result (`obs, info = env.reset()`) is fine, as is
taking the one item of a list (`(path,) = [...]`, which fails unless there is exactly one); `a, b = x, y` is not.
The benchmarks keep the formatter's layout too."""

import ast
import glob
import os
import re

import pytest

from conftest import ROOT

FILES = ["a2c_cartpole.py", "ppo_tetris.py", "ppo_puffer_async.py"] + sorted(
    os.path.relpath(path, ROOT) for path in glob.glob(os.path.join(ROOT, "common", "*.py"))
)


def files_in(folder: str) -> list:
    return sorted(os.path.relpath(path, ROOT) for path in glob.glob(os.path.join(ROOT, folder, "*.py")))


PLAIN_FILES = FILES + files_in("tests") + files_in("scripts")
# a marker that keeps the formatter off a line; written in two parts so that this file does not hold one
MARKER = re.compile(r"#\s*fmt" + r":\s*(skip|off)")


def several_values(value: ast.expr) -> bool:
    """Whether `value` builds several values side by side: a tuple or list display, a generator or comprehension,
    or a conditional choosing between such (`a, b = (x, y) if c else (z, w)`)."""
    if isinstance(value, ast.IfExp):
        return several_values(value.body) or several_values(value.orelse)
    return isinstance(value, (ast.Tuple, ast.List, ast.GeneratorExp, ast.ListComp))


def packed_statements(source: str) -> list:
    """(line, what) of each marker that keeps the formatter off and each statement that assigns several values."""
    found = [(source[: match.start()].count("\n") + 1, match.group(0)) for match in MARKER.finditer(source)]
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Assign):
            continue
        if len(node.targets) > 1:
            found.append((node.lineno, "a = b = ... (chained)"))
        elif isinstance(node.targets[0], (ast.Tuple, ast.List)) and len(node.targets[0].elts) > 1:
            if several_values(node.value):
                found.append((node.lineno, "several values in one assignment"))
    return sorted(found)


def test_the_check_finds_each_kind_of_packed_line():
    source = "\n".join(
        [
            "obs, info = env.reset()",  # one call's result: fine
            "x = 1",
            "a, b = 1, 2",
            "c, d = (f(k) for k in ks)",
            "e, g = (1, 2) if flag else (3, 4)",
            "h = i = 0",
            "j = dict(a=1)  # fmt" + ": skip",
            "(path,) = [p for p in paths if p.endswith('.pt')]",  # the one item: fine
        ]
    )
    assert [line for line, _ in packed_statements(source)] == [3, 4, 5, 6, 7]


@pytest.mark.parametrize("path", PLAIN_FILES)
def test_no_packed_lines(path):
    with open(os.path.join(ROOT, path)) as f:
        found = packed_statements(f.read())
    assert not found, f"{path}: " + "; ".join(f"line {line}: {what}" for line, what in found)


@pytest.mark.parametrize("path", files_in("benchmarks"))
def test_the_benchmarks_keep_the_formatters_layout(path):
    with open(os.path.join(ROOT, path)) as f:
        found = [match.group(0) for match in MARKER.finditer(f.read())]
    assert not found, f"{path}: {found}"


@pytest.mark.parametrize("path", [f for f in FILES if f not in ("common/tetris.py", "common/vector.py")])
def test_at_most_six_positional_parameters(path):
    # The env engines common/tetris.py and common/vector.py are exempt: their constructors mirror PufferLib's
    # (pufferlib-core 3.0.5's pufferlib/vector.py, PufferLib 3.0.0's pufferlib/ocean/tetris/tetris.py).
    with open(os.path.join(ROOT, path)) as f:
        tree = ast.parse(f.read())
    long = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names = [a.arg for a in node.args.posonlyargs + node.args.args if a.arg not in ("self", "cls")]
            if len(names) > 6:
                long.append(f"{node.name} ({len(names)})")
    assert not long, f"{path}: " + ", ".join(long)
