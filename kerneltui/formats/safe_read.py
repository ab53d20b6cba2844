"""Reading a folder brought in by an import, which may be hostile: files only from inside a root folder (no
absolute path, no '..' out of it, no symbolic link anywhere on the way), regular files of bounded size, and
YAML with bounds on its size, its aliases, its nesting and what its aliases expand to."""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from kerneltui.core.workspace import WorkspaceError

MAX_SOURCE_BYTES = 4 << 20  # a problem's Python file: kilobytes in practice
MAX_YAML_BYTES = 1 << 20
MAX_YAML_ALIASES = 100
MAX_YAML_DEPTH = 64
MAX_YAML_NODES = 200_000  # nodes once every alias is expanded: what a reader of the value walks


def inside(root: Path, entry: str, what: str) -> Path:
    """root/entry, where entry stays inside root and no part of the way is a symbolic link; else WorkspaceError
    naming `what` (the entry, as the person would find it)."""
    if not entry or os.path.isabs(entry) or entry.startswith("~"):
        raise WorkspaceError(f"{what}: {entry!r} is an absolute path: files come only from inside {root}")
    parts = [p for p in PurePosixPath(entry.replace("\\", "/")).parts if p != "."]
    if ".." in parts:
        raise WorkspaceError(f"{what}: {entry!r} leaves the problem folder ('..'): files come only from inside {root}")
    path = root
    for part in parts:
        path = path / part
        if path.is_symlink():
            raise WorkspaceError(f"{what}: {entry!r} is a symbolic link or passes through one ({path.name})")
    return path


def read_regular(path: Path, what: str, limit: int = MAX_SOURCE_BYTES) -> bytes:
    """The bytes of a regular file opened without following a link, at most `limit` of them."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        why = "a symbolic link" if path.is_symlink() else exc.strerror
        raise WorkspaceError(f"{what}: cannot read it ({why})") from None
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise WorkspaceError(f"{what}: not a regular file")
        data = file.read(limit + 1)
    if len(data) > limit:
        raise WorkspaceError(f"{what}: larger than {limit >> 10} KiB, the most an import reads of one file")
    return data


def read_text(path: Path, what: str, limit: int = MAX_SOURCE_BYTES) -> str:
    try:
        return read_regular(path, what, limit).decode()
    except UnicodeDecodeError:
        raise WorkspaceError(f"{what}: not UTF-8 text") from None


class YamlLimit(yaml.YAMLError):
    """A YAML document past the bounds an import reads."""


class BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses more than MAX_YAML_ALIASES aliases, nesting past MAX_YAML_DEPTH, and a document
    whose aliases expand past MAX_YAML_NODES nodes (a "billion laughs" of a few hundred bytes)."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._aliases = 0
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_YAML_ALIASES:
                raise YamlLimit(f"more than {MAX_YAML_ALIASES} aliases (*name): refused")
            return super().compose_node(parent, index)
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise YamlLimit(f"nested more than {MAX_YAML_DEPTH} deep: refused")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def get_single_node(self) -> Any:
        node = super().get_single_node()
        if node is not None and expanded_size(node, {}, set()) > MAX_YAML_NODES:
            raise YamlLimit(f"its aliases expand to more than {MAX_YAML_NODES} values: refused")
        return node


def expanded_size(node: yaml.Node, sizes: dict[int, int], open_nodes: set[int]) -> int:
    """Nodes in `node` with every alias written out, each shared node counted once per use, computed once."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_nodes:
        raise YamlLimit("an alias refers to a node that holds it: refused")
    open_nodes.add(key)
    size = 1
    if isinstance(node, yaml.SequenceNode):
        size += sum(expanded_size(child, sizes, open_nodes) for child in node.value)
    elif isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            size += expanded_size(k, sizes, open_nodes) + expanded_size(v, sizes, open_nodes)
            if size > MAX_YAML_NODES:
                break
    open_nodes.discard(key)
    sizes[key] = size
    return size


def load_yaml(path: Path, what: str) -> Any:
    """The YAML file at `path`, read as a regular file of at most MAX_YAML_BYTES, loaded with bounds."""
    text = read_text(path, what, MAX_YAML_BYTES)
    try:
        return yaml.load(text, Loader=BoundedLoader)  # a SafeLoader
    except YamlLimit as exc:
        raise WorkspaceError(f"{what}: {exc}") from None
    except yaml.YAMLError as exc:
        raise WorkspaceError(f"{what}: not valid YAML: {str(exc).splitlines()[0]}") from None
    except RecursionError:
        raise WorkspaceError(f"{what}: nested too deep to read") from None
    except (ValueError, TypeError, OverflowError) as exc:  # a value YAML parses but Python refuses (month 13)
        raise WorkspaceError(
            f"{what}: a value cannot be read: {str(exc).splitlines()[0] if str(exc) else exc}"
        ) from None
