"""Every dependency `pyproject.toml` declares is imported somewhere in the installed package (`modeling_cove/`,
its `evaluate` metric modules included): a dependency nothing imports is dropped, not carried."""

import ast
import re
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def normalized(name: str) -> str:
    """A distribution name as the packaging standards compare them (case, `-`, `_` and `.` folded)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def declared_dependencies() -> set:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return {normalized(re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", spec).group(0)) for spec in project["dependencies"]}


def imported_modules(package: Path) -> set:
    """The top-level modules that the package's Python files import (absolute imports, at any depth)."""
    modules = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
    return modules


def test_every_declared_dependency_is_imported_by_the_package():
    distributions = packages_distributions()  # top-level module -> the installed distributions providing it
    imported = {normalized(dist) for module in imported_modules(REPO / "modeling_cove")
                for dist in distributions.get(module, [])}
    unused = declared_dependencies() - imported
    assert not unused, f"pyproject.toml declares dependencies that nothing in modeling_cove/ imports: {sorted(unused)}"
