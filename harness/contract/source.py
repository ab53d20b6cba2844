"""What the judge learns from a version's source without running it: notes, DSLs used, warnings."""

from __future__ import annotations

import ast
from pathlib import Path

DSL_MODULES = (("triton", "triton"), ("cutlass", "cutedsl"), ("tilelang", "tilelang"))  # (imported module, DSL)
MAX_VERSION_KB = 1024.0  # a kernel's source is kilobytes; a larger "version" is refused, not judged or stored

SUSPICIOUS_MODULES = {
    "ctypes": "uses ctypes",
    "subprocess": "starts processes",
    "gc": "inspects the garbage collector",
    "inspect": "inspects frames",
    "signal": "handles signals",
    "problem": "imports the problem (its reference)",
}
SUSPICIOUS_ATTRIBUTES = {
    "os._exit",
    "torch.allclose",
    "torch.testing.assert_close",
    "torch.testing",
    "sys.exit",
}


class VersionTooLarge(Exception):
    """A version file past the size limit: refused before anything reads it whole."""


class VersionUnreadable(OSError):
    """The version file could not be read when its evaluation began (deleted since it was asked for, say)."""


def read_version(path: Path, limit: int) -> bytes:
    """The version's bytes, read once; a file past `limit` is refused (a 200 MB 'kernel' is not judged)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise VersionUnreadable(exc.errno, f"{path.name} could not be read: {exc.strerror or exc}") from exc
    if len(data) > limit:
        raise VersionTooLarge(
            f"{path.name} is larger than {limit >> 10} KiB (--max-version-kb): refused, not judged or stored"
        )
    return data


def parse(source: str) -> ast.Module | None:
    try:
        return ast.parse(source)
    except SyntaxError:
        return None


def notes(source: str) -> str:
    """The module docstring: the author's note on what changed and why."""
    tree = parse(source)
    return (ast.get_docstring(tree) or "").strip() if tree else ""


def imported_modules(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def dsls(source: str) -> list[str]:
    """Which kernel languages the version uses: 'triton', 'cutedsl', 'tilelang' (empty: plain PyTorch)."""
    tree = parse(source)
    if tree is None:
        return []
    modules = imported_modules(tree)
    return [name for module, name in DSL_MODULES if module in modules]


def defines(source: str, name: str) -> bool:
    tree = parse(source)
    if tree is None:
        return False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name) == name for a in node.names):
            return True
    return False


def static_checks(source: str) -> list[str]:
    """Warnings a reviewer wants before trusting a result; a warning never fails a version by itself."""
    tree = parse(source)
    if tree is None:
        return []
    warnings: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = imported_modules(ast.Module(body=[node], type_ignores=[]))
            for module in modules & SUSPICIOUS_MODULES.keys():
                warnings.add(f"line {node.lineno}: {SUSPICIOUS_MODULES[module]}")
        elif isinstance(node, ast.Attribute):
            target = ast.unparse(node)
            if target in SUSPICIOUS_ATTRIBUTES:
                warnings.add(f"line {node.lineno}: touches {target}")
    return sorted(warnings, key=lambda w: int(w.split(":")[0].split()[1]))
