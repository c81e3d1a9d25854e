"""Where a benchmark's figures go: `benchmarks/results/<name>.json`, stamped with what they measured (the commit, and
whether the code differed from it), when, on what machine and versions, and by which command. benchmarks/report.py
renders the tables of the README and docs/ from these files."""

import ast
import datetime
import hashlib
import json
import os
import platform
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
SCRIPTS = ("a2c_cartpole", "ppo_tetris", "ppo_puffer_async")
# Writing and rendering results, and launching a suite's runs, measure nothing: a change to these files leaves every
# figure as it was.
NOT_ON_A_PATH = ("benchmarks/results.py", "benchmarks/report.py", "benchmarks/launch.py")


def read_file(relpath: str):
    """A file of the working tree, or None."""
    path = ROOT / relpath
    return path.read_text() if path.exists() else None


def code_tree(text: str) -> ast.Module:
    """A Python file's syntax tree without its docstrings and other bare strings (comments are not in it)."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list):
                kept = [
                    statement
                    for statement in body
                    if not (
                        isinstance(statement, ast.Expr)
                        and isinstance(statement.value, ast.Constant)
                        and isinstance(statement.value.value, str)
                    )
                ]
                setattr(node, field, kept or [ast.Pass()])
    return tree


def content_hash(text, python: bool = True, tree=None) -> str:
    """A file's hash, a Python file's blind to comments and docstrings ("missing": no file); `tree`, the syntax tree
    to hash in its place (a file seen in part: `seen_code`)."""
    if text is None:
        return "missing"
    if tree is not None:
        text = ast.dump(tree)
    elif python:
        text = ast.dump(code_tree(text))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# The file of per-env presets: a result's runs took some of its entries, and a change to another leaves its figures.
PRESETS = "common/presets.py"


def table_nodes(tree: ast.Module):
    """common/presets.py's tables as (script, the table's ast.Dict): a script's table is its name in capitals
    (PPO_PUFFER_ASYNC for ppo_puffer_async.py)."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict) and len(node.targets) == 1:
            name = getattr(node.targets[0], "id", "")
            if name.lower() in SCRIPTS:
                yield f"{name.lower()}.py", node.value


def preset_tables(tree: ast.Module) -> dict:
    """common/presets.py's tables, {script: {entry: its dict(...) node}}."""
    tables = {}
    for script, table in table_nodes(tree):
        tables[script] = {key.value: value for key, value in zip(table.keys, table.values)}
    return tables


def seen_code(relpath: str, text: str, presets: dict, read=read_file):
    """The syntax tree of the part of a file that a result's runs ran, or None for the whole file. `presets`,
    {script: [the entries of its table in common/presets.py the runs took; "": the script's own Args]}. Of
    common/presets.py: its code without the entries no run took. Of a script none of whose runs took its own Args:
    its code without the defaults of the Args fields that every entry taken sets (the preset replaces them)."""
    if not presets or not (relpath == PRESETS or relpath in presets):
        return None
    tree = code_tree(text)
    if relpath == PRESETS:
        for script, table in table_nodes(tree):
            taken = presets.get(script, [])
            kept = [(key, value) for key, value in zip(table.keys, table.values) if key.value in taken]
            table.keys = [key for key, _ in kept]
            table.values = [value for _, value in kept]
        return tree
    if "" in presets[relpath]:
        return None
    presets_text = read(PRESETS)
    if presets_text is None:
        return None
    table = preset_tables(code_tree(presets_text)).get(relpath, {})
    named = [{keyword.arg for keyword in table[entry].keywords} for entry in presets[relpath] if entry in table]
    if len(named) < len(presets[relpath]):  # an entry no longer there: the whole file
        return None
    replaced = set.intersection(*named)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Args":
            for field in node.body:
                if isinstance(field, ast.AnnAssign) and getattr(field.target, "id", "") in replaced:
                    field.value = None
    return tree


def presets_taken(commands: list) -> dict:
    """{script: [entries]} of common/presets.py that these command lines' runs of the scripts take ("": the script's
    own Args), as the script's preset function chooses them (`seen_code`'s argument)."""
    from common import presets as presets_module

    taken = {}
    for command in commands:
        words = shlex.split(command)
        scripts = [name for name in SCRIPTS if any(word.endswith(f"{name}.py") for word in words)]
        if not scripts:  # an anchor's command
            continue
        flags = dict(zip(words, words[1:]))
        values = {}
        table = getattr(presets_module, scripts[0].upper(), {})  # ppo_tetris.py has no presets: its Args
        if table and "--env-id" in flags:  # else the script's default env: its Args
            chosen = getattr(presets_module, scripts[0])(flags["--env-id"], flags.get("--env-kwargs", ""))
            values = {key: value for key, value in chosen.items() if key not in ("env_id", "env_kwargs")}
        entries = [name for name, entry in table.items() if entry == values] if values else [""]
        found = taken.setdefault(f"{scripts[0]}.py", [])
        found += [entry for entry in entries if entry not in found]
    return {script: sorted(entries) for script, entries in taken.items()}


def imported_files(relpath: str, text: str) -> set:
    """The files of this repository that a Python file imports: common/ modules, the scripts, and (for a file in
    benchmarks/) the benchmark modules beside it."""
    found = set()
    here = os.path.dirname(relpath)
    for node in ast.walk(ast.parse(text)):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "common":
                found.add("common/__init__.py")
                if len(parts) > 1:
                    found.add(f"common/{parts[1]}.py")
            elif parts[0] in SCRIPTS:
                found.add(f"{parts[0]}.py")
            elif here == "benchmarks" and len(parts) == 1:
                found.add(f"benchmarks/{parts[0]}.py")
    return found


def mentioned_scripts(text: str) -> set:
    """The scripts a benchmark names in its code (its docstrings and comments left out), or a command line names."""
    try:
        code = ast.unparse(code_tree(text))
    except SyntaxError:  # a command line
        code = text
    return {f"{name}.py" for name in SCRIPTS if re.search(rf"\b{name}\b", code)}


def dependencies(benchmark: str, command: str = "", read=read_file, depends_on=(), presets=None) -> dict:
    """{file: content_hash} of the files a benchmark's figures depend on: the benchmark, the benchmark modules it
    imports, the scripts it or its command line names, `depends_on` (files it runs otherwise), and every common/
    module those import, transitively; of common/presets.py and the scripts, the part its runs took (`presets`:
    `seen_code`). `read(relpath)` gives a file's text (the working tree's, or a commit's)."""
    pending = {benchmark, *depends_on} | mentioned_scripts(read(benchmark) or "") | mentioned_scripts(command)
    seen = {}
    while pending:
        relpath = pending.pop()
        if relpath in seen:
            continue
        text = read(relpath)
        part = seen_code(relpath, text, presets, read) if text is not None else None
        seen[relpath] = content_hash(text, relpath.endswith(".py"), part)
        if text is not None and relpath.endswith(".py"):
            pending |= imported_files(relpath, text) - set(seen)
    return {
        relpath: seen[relpath]
        for relpath in sorted(seen)
        if relpath not in NOT_ON_A_PATH and seen[relpath] != "missing"
    }


def changed_dependencies(result: dict, read=read_file) -> list:
    """The files on a result's path whose code differs from what it measured (its "dependencies"; of the presets and
    the scripts, the part its runs took: its "presets")."""
    changed = []
    for relpath, digest in result.get("dependencies", {}).items():
        text = read(relpath)
        part = seen_code(relpath, text, result.get("presets"), read) if text is not None else None
        if content_hash(text, relpath.endswith(".py"), part) != digest:
            changed.append(relpath)
    return changed


def git(*command) -> str:
    try:
        out = subprocess.run(["git", *command], cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return ""
    return out.stdout.strip()


def cpu_model() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        return next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


# Flags whose value is a folder on the measuring machine: the command shows what the reader supplies instead.
LOCAL_PATHS = {
    "--ocean": "OCEAN_DIR",
    "--cleanrl": "CLEANRL_CLONE",
    "--baseline": "BEFORE_CHECKOUT",
    "--envpool-python": "ENVPOOL_PYTHON",
}


def placeholders(argv: list) -> list:
    """argv with each local folder (the value of a LOCAL_PATHS flag) replaced by its placeholder."""
    return [LOCAL_PATHS.get(argv[i - 1], arg) if i else arg for i, arg in enumerate(argv)]


def stamp(minutes: float, depends_on=(), presets=None) -> dict:
    """What a result was measured on: the commit ("+changes" when the code differed from it), the date, the machine,
    the versions, the command as typed, and about how many minutes it took (report.py prints it beside the row)."""
    import gymnasium
    import torch

    changed = git("status", "--porcelain", "--", "*.py", "pyproject.toml")
    benchmark = os.path.relpath(sys.argv[0], ROOT)
    command = shlex.join(sys.argv[1:])
    return {
        "commit": (git("rev-parse", "--short", "HEAD") or "unknown") + ("+changes" if changed else ""),
        "date": datetime.date.today().isoformat(),
        "machine": f"{cpu_model()}, {os.cpu_count()} cores, {platform.system()} {platform.machine()}",
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "gymnasium": gymnasium.__version__,
        },
        "command": "python " + shlex.join([os.path.relpath(sys.argv[0], ROOT), *placeholders(sys.argv[1:])]),
        "minutes": round(minutes, 1),
        "dependencies": dependencies(benchmark, command, depends_on=depends_on, presets=presets),
        **({"presets": presets} if presets else {}),
    }


def save(
    name: str,
    minutes: float,
    *,
    table: dict,
    runs: list,
    readme=None,
    values=None,
    depends_on=(),
    presets=None,
    extra=None,
) -> Path:
    """Writes benchmarks/results/<name>.json: the stamp; `table` ({"columns": [...], "rows": [[...]], optional
    "notes": [...]}), the table the docs show; `runs`, the per-run figures it came from (seed, result, SPS); `readme`
    ({"task", "result", "page", "order"}), this benchmark's row in the README's results table, if it has one;
    `presets`, the entries of common/presets.py its runs took (`presets_taken`): a change elsewhere in that file, or to
    the Args defaults those replace, leaves its figures."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    data = {
        **stamp(minutes, depends_on, presets),
        "table": table,
        "runs": runs,
        **({"readme": readme} if readme else {}),
    }
    data.update(extra or {})  # what else a benchmark keeps (a suite: its definition)
    if values:  # single figures for prose: report.py renders <!-- value:NAME:KEY --> markers from them
        data["values"] = values
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"results: {os.path.relpath(path)} (render the docs' tables: python benchmarks/report.py)", flush=True)
    return path


def markdown(columns: list, rows: list) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    return "\n".join(lines + ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows])


def load(name: str) -> dict:
    return json.loads((RESULTS / f"{name}.json").read_text())
