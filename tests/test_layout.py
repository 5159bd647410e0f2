"""The house rules of the layout, read off the syntax tree (docs/design.md, "Layout"):

- the library's shared parts (`training/common`, `data`, `loops`, `publishing`) import no command;
- a command imports no other command (the main job, which runs the others as its stages, excepted);
- `benchmarks/` (not installed) imports from the package only public names: names a module lists in its `__all__`,
  each documented in docs/api.md;
- no import circle inside the package (imports inside functions counted: a lazy import hides a circle, it does not
  remove it);
- no function over 80 lines, in the package or in benchmarks/;
- the layout block of docs/design.md names every folder and module it draws as `git ls-files` has them.
"""

import ast
import re
import subprocess
from pathlib import Path

import pytest

from conftest import REPO

PACKAGE = "modeling_cove"
COMMANDS = f"{PACKAGE}.training.commands"
SHARED = tuple(f"{PACKAGE}.training.{part}" for part in ("common", "data", "loops", "publishing"))
EXCEPTED_COMMANDS = ("main_job",)
MAX_FUNCTION_LINES = 80
DESCRIPTION_COLUMN = 24  # the layout block of docs/design.md: where the descriptions start


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted((REPO / PACKAGE).rglob("*.py"))}


def imports_of(path: Path) -> list:
    """(absolute module, imported names or None for `import x`) of every import statement in `path`."""
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            module = node.module
            if node.level:
                base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            found.append((module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
    return found


def package_targets(module: str, names) -> list:
    """The package's modules an import statement loads for what it asks: the submodules it names, and the module
    itself when it takes other names from it (a package imported only for its submodules is no dependency)."""
    submodules = [f"{module}.{name}" for name in names or () if f"{module}.{name}" in MODULES]
    takes_names = names is None or len(submodules) < len(names)
    return submodules + ([module] if module in MODULES and takes_names else [])


def dependency_graph() -> dict:
    graph = {}
    for name, path in MODULES.items():
        graph[name] = {target for module, names in imports_of(path) if module and module.startswith(PACKAGE)
                       for target in package_targets(module, names) if target != name}
    return graph


def command_of(module: str):
    return module.split(".")[3] if module.startswith(COMMANDS + ".") else None


def test_shared_parts_import_no_command():
    wrong = [f"{module} -> {target}" for module, targets in dependency_graph().items()
             if module.startswith(SHARED) for target in targets if target.startswith(COMMANDS)]
    assert wrong == []


def test_no_command_imports_another():
    wrong = []
    for module, targets in dependency_graph().items():
        mine = command_of(module)
        if mine is None or mine in EXCEPTED_COMMANDS:
            continue
        wrong += [f"{module} -> {target}" for target in targets if command_of(target) not in (None, mine)]
    assert wrong == []


def strongly_connected(graph: dict) -> list:
    """Tarjan's strongly connected components with more than one module: the import circles."""
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def test_no_import_circle_in_the_package():
    assert strongly_connected(dependency_graph()) == []


def test_the_circle_finder_finds_circles():
    assert strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def declared_all(module: str):
    """A module's `__all__` (a literal list), or None when it has none."""
    for node in ast.parse(MODULES[module].read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return None


def benchmark_uses() -> dict:
    """{package module: names benchmarks/ takes from it}: `from m import name` and `alias.name` after
    `from package import m` / `import m as alias`."""
    used = {}
    for path in sorted((REPO / "benchmarks").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith(PACKAGE):
                for alias in node.names:
                    if f"{node.module}.{alias.name}" in MODULES:
                        aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                    else:
                        used.setdefault(node.module, set()).add(alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith(PACKAGE) and alias.asname:
                        aliases[alias.asname] = alias.name
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
                used.setdefault(aliases[node.value.id], set()).add(node.attr)
    return used


def test_benchmarks_import_only_public_names():
    used = benchmark_uses()
    assert used, "benchmarks/ takes nothing from the package: the scan is broken"
    private = {module: sorted(names - (declared_all(module) or set())) for module, names in used.items()}
    assert {module: names for module, names in private.items() if names} == {}


def test_every_public_name_is_documented():
    """Each name of an `__all__` in the package is listed in docs/api.md under its module's heading."""
    api = (REPO / "docs" / "api.md").read_text(encoding="utf-8")
    sections = dict(re.findall(r"^### `([\w.]+)`\n(.*?)(?=^### |\Z)", api, flags=re.M | re.S))
    missing = []
    for module in MODULES:
        names = declared_all(module)
        if names is None or module == PACKAGE:  # the package's own names: the Auto classes (docs/usage.md)
            continue
        text = sections.get(module, "")
        missing += [f"{module}.{name}" for name in sorted(names) if f"`{name}`" not in text]
    assert missing == []


def long_functions(root: Path) -> list:
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({length} lines)")
    return found


@pytest.mark.parametrize("folder", [PACKAGE, "benchmarks"])
def test_no_function_over_80_lines(folder):
    assert long_functions(REPO / folder) == []


def design_layout_paths() -> list:
    """The paths drawn in docs/design.md's layout block: each line's first word, indented under its folder (a line
    indented to the description column continues the description above it)."""
    text = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
    block = re.search(r"^## Layout\n.*?```\n(.*?)```", text, flags=re.M | re.S).group(1)
    paths, folders = [], []  # folders: (indent, path) of the folders open above the current line
    for line in block.splitlines():
        if not line.strip() or line.lstrip().startswith(("#", "(")):
            continue
        indent = len(line) - len(line.lstrip())
        if indent >= DESCRIPTION_COLUMN:
            continue
        word = line.split()[0]
        while folders and folders[-1][0] >= indent:
            folders.pop()
        path = "/".join([f for _, f in folders] + [word.rstrip("/")])
        if word.endswith("/"):
            folders.append((indent, word.rstrip("/")))
        paths.append(path)
    return paths


def expand(path: str) -> list:
    """`a/{b,c}.py` -> [a/b.py, a/c.py]."""
    match = re.search(r"\{([^}]*)\}", path)
    if not match:
        return [path]
    return [p for choice in match.group(1).split(",") for p in expand(path[:match.start()] + choice + path[match.end():])]


def test_the_design_layout_block_matches_the_files():
    tracked = set(subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True)
                  .stdout.split())
    folders = {str(Path(p).parent) for p in tracked} | {str(q) for p in tracked for q in Path(p).parents}
    drawn = [p for path in design_layout_paths() for p in expand(path)]
    assert len(drawn) > 30, drawn
    missing = [p for p in drawn if p not in tracked and p not in folders and not any(
        Path(t).match(p) for t in tracked)]
    assert missing == []
    # every module of the library and every instrument is drawn
    modules = sorted(p for p in tracked if p.startswith(("modeling_cove/training/", "benchmarks/"))
                     and p.endswith(".py") and not p.endswith("__init__.py"))
    undrawn = [p for p in modules if p not in drawn and not any(Path(p).match(d) for d in drawn)]
    assert undrawn == []
