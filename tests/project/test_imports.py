"""The house's own modules import each other one way: no import circles (no Spark needed).

The graph holds every ``import`` of a ``spark_mlt`` module, module-level or inside a function
(an import put off into a function is still a dependency), read from the source with ``ast``.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.paths import ROOT

PACKAGE = ROOT / "spark_mlt"


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Each ``spark_mlt`` module and the ``spark_mlt`` modules it imports (a name imported from a
    package counts as its submodule when there is one)."""
    modules = {_module(path): path for path in package.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the module's package
                    anchor = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                    base = ".".join([*anchor, *([base] if base else [])])
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names
                ]
            graph[name] |= {t for t in targets if t in modules and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph``: its strongly connected components of more than one module
    (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_package_has_no_import_circles() -> None:
    """``spark_mlt.batch.write.tokenize`` and ``spark_mlt.batch.write.stream`` used to import each other (the
    stream builds on the batch path, one way), as did ``spark_mlt.paper.methods`` and
    ``spark_mlt.paper.options``."""
    assert cycles(import_graph()) == []


if __name__ == "__main__":
    for circle in cycles(import_graph()):
        print(" <-> ".join(circle))


def _private_imports(package: Path = PACKAGE) -> list[str]:
    """Where a module imports a private module or name (``_x``) of a folder it is not in
    (its own folder's and the folders above it are its own business)."""
    found = []
    for path in sorted(package.rglob("*.py")):
        folder = path.parent
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("spark_mlt")):
                continue
            for alias in node.names:
                parts = [*node.module.split("."), alias.name]
                private = next((i for i, part in enumerate(parts) if part.startswith("_") and part[:2] != "__"), None)
                if private is None:
                    continue
                owner = PACKAGE.parent.joinpath(*parts[:private])
                owner = owner if owner.is_dir() else owner.parent
                if owner != folder and owner not in folder.parents:
                    found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {'.'.join(parts)}")
    return found


def test_no_module_imports_a_private_module_or_name_of_another_folder() -> None:
    """``batch`` used to take ``storage._delta_spark``'s helpers and ``delta._local``'s frames."""
    assert _private_imports() == []


def _code_lines(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's lines of code: its body but the docstring, blank lines and comments."""
    body = node.body
    first = body[0]
    docstring = (
        isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
    )
    start = (body[1].lineno if len(body) > 1 else first.end_lineno or first.lineno) if docstring else first.lineno
    text = lines[start - 1 : node.end_lineno] if not (docstring and len(body) == 1) else []
    return sum(1 for line in text if line.strip() and not line.strip().startswith("#"))


def _oversized(package: Path = PACKAGE) -> list[str]:
    """Modules over 800 lines, folders whose own modules are over 4,000, and functions over 60
    lines of code or 8 parameters (pyspark.ml's ``keyword_only`` constructors aside)."""
    found = []
    folders: dict[Path, int] = {}
    for path in sorted(package.rglob("*.py")):
        text = path.read_text()
        lines = text.splitlines()
        name = path.relative_to(PACKAGE.parent)
        folders[path.parent] = folders.get(path.parent, 0) + len(lines)
        if len(lines) > 800:
            found.append(f"{name}: {len(lines)} lines")
        for node in ast.walk(ast.parse(text, str(path))):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if any(isinstance(d, ast.Name) and d.id == "keyword_only" for d in node.decorator_list):
                continue
            args = node.args
            named = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs] if a.arg not in ("self", "cls")]
            count = len(named) + (args.vararg is not None) + (args.kwarg is not None)
            if count > 8:
                found.append(f"{name}:{node.lineno} {node.name}: {count} parameters")
            if (code := _code_lines(lines, node)) > 60:
                found.append(f"{name}:{node.lineno} {node.name}: {code} lines of code")
    found += [f"{f.relative_to(PACKAGE.parent)}/: {n} lines" for f, n in sorted(folders.items()) if n > 4000]
    return found


def test_no_module_folder_or_function_outgrows_its_size() -> None:
    """The sync was one 928-line module and the command one of 1,125; ``storage/`` and ``delta/``
    held over 4,000 lines each in their own modules."""
    assert _oversized() == []


#: The folders of ``spark_mlt.batch`` and the ones each may import: from the front door down.
BATCH_LAYERS = {
    "job": set(),
    "write": {"job"},
    "mirror": {"job", "write"},
    "read": {"job", "write", "mirror"},
    "cli": {"job", "write", "mirror", "read"},
}


def test_the_batch_folders_import_from_the_front_door_down() -> None:
    graph = import_graph()

    def folder(module: str) -> str | None:
        parts = module.split(".")
        return parts[2] if len(parts) > 2 and parts[:2] == ["spark_mlt", "batch"] else None

    upward = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if (mine := folder(module)) is not None
        for target in targets
        if (theirs := folder(target)) is not None and theirs != mine and theirs not in BATCH_LAYERS[mine]
    )
    assert upward == []
