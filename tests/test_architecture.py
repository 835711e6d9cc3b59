"""The shape of crawler/: its layers import only downwards, and no class or function grows too long.

The layer order is the README's ("How it is built"), bottom to top. A layer is a subpackage of
crawler/ or a top-level module; imports inside functions count too, since a lazy import is still a
dependency (and a lazy one hides a cycle best), and so do the "crawler.module:name" strings plugin
tables load with importlib. Imports within one layer are that layer's business.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

CRAWLER = Path(__file__).resolve().parent.parent / "crawler"

LAYERS = [
    "errors", "units", "crawldir", "fsutil", "memory", "pandas_probe", "arrow_filesystems", "plugins", "statuses", "models", "parquet_encoding", "config", "log", "protocols", "urls", "webdb",
    "segments", "parsers", "storage", "jobs", "fetcher", "metrics", "daemon", "commands", "cli",
    # Not part of the crawler proper: the demo and test site server, and `python -m crawler`.
    "devserver", "__main__",
]
RANK = {name: rank for rank, name in enumerate(LAYERS)}

# "module:attribute", the form plugin tables name what they load with importlib.
_PLUGIN_SPEC = re.compile(r"crawler(\.\w+)+:\w+")

MAX_CLASS_LINES = 300
MAX_FUNCTION_LINES = 80


def _modules() -> list[Path]:
    return sorted(p for p in CRAWLER.rglob("*.py") if "__pycache__" not in p.parts)


def _module_name(path: Path) -> list[str]:
    """``crawler/jobs/updatedb.py`` as ``["crawler", "jobs", "updatedb"]`` (a package as its folder)."""
    parts = ["crawler", *path.relative_to(CRAWLER).with_suffix("").parts]
    return parts[:-1] if parts[-1] == "__init__" else parts


def _layer(dotted: list[str]) -> str | None:
    """The layer of a crawler module name, None for the package itself (``crawler/__init__.py``)."""
    return dotted[1] if len(dotted) > 1 and dotted[0] == "crawler" else None


def _is_module(name: str) -> bool:
    return (CRAWLER / f"{name}.py").exists() or (CRAWLER / name / "__init__.py").exists()


def _imported(path: Path, node: ast.AST) -> list[list[str]]:
    """The crawler modules ``node`` imports, relative imports resolved against ``path``."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str) and _PLUGIN_SPEC.fullmatch(node.value):
            return [node.value.split(":")[0].split(".")]
        return []
    if isinstance(node, ast.Import):
        return [alias.name.split(".") for alias in node.names if alias.name.split(".")[0] == "crawler"]
    if node.level:
        package = _module_name(path)
        if path.name != "__init__.py":
            package = package[:-1]
        base = package[: len(package) - (node.level - 1)]
    else:
        base = []
    target = base + (node.module.split(".") if node.module else [])
    if not target or target[0] != "crawler":
        return []
    if len(target) == 1:  # `from crawler import config`: a module of its own layer, or a name of the package
        return [["crawler", a.name] if _is_module(a.name) else ["crawler"] for a in node.names]
    return [target]


def _import_violations() -> list[str]:
    found = []
    for path in _modules():
        source_layer = _layer(_module_name(path))
        if source_layer is None:
            continue
        assert source_layer in RANK, f"{path}: layer {source_layer} is not in LAYERS (nor the README's order)"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Import | ast.ImportFrom | ast.Constant):
                continue
            for target in _imported(path, node):
                target_layer = _layer(target)
                if target_layer is None or target_layer == source_layer:
                    continue
                assert target_layer in RANK, f"{path}:{node.lineno}: imports unknown layer {target_layer}"
                if RANK[target_layer] > RANK[source_layer]:
                    rel = path.relative_to(CRAWLER.parent)
                    found.append(f"{rel}:{node.lineno}: {source_layer} -> {target_layer} ({'.'.join(target)})")
    return found


def _length_violations() -> list[str]:
    found = []
    for path in _modules():
        rel = path.relative_to(CRAWLER.parent)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                limit = MAX_CLASS_LINES
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                limit = MAX_FUNCTION_LINES
            else:
                continue
            # From the first decorator to the last line of the body: what a reader has to hold.
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            lines = node.end_lineno - start + 1
            if lines > limit:
                found.append(f"{rel}:{node.lineno}: {type(node).__name__} {node.name} is {lines} lines (max {limit})")
    return found


def test_every_import_goes_to_the_same_or_a_lower_layer() -> None:
    violations = _import_violations()
    assert not violations, "imports upwards in the layer order:\n" + "\n".join(violations)


def test_no_class_over_300_lines_and_no_function_over_80() -> None:
    violations = _length_violations()
    assert not violations, "too long:\n" + "\n".join(violations)
