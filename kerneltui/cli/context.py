"""`kerneltui context index|search|fetch|add`: the agents' context search index, built and queried from the
shell, and sources put into the context folder (a shallow clone of CUTLASS, Triton, TileLang or any git URL; a
copy of a local folder: agents read only inside the context folder, so a link out of it would be refused).

The context folder is the one agents get (find_context: --context, the config's [agent] context,
$KERNELTUI_CONTEXT, <workspace>/context, else the shipped one); the index is the file the agents' search_context
uses, in the workspace's state folder.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from kerneltui.cli.options import EXIT_OK, Subparsers, add_config, add_json, add_workspace
from kerneltui.core.workspace import WorkspaceError, resolve

if TYPE_CHECKING:
    from agents.context_index import ContextIndex

EXIT_NO_HITS = 1
# What `context fetch NAME` clones (shallow): the sources an agent searches for layouts, atoms and examples.
KNOWN_SOURCES = {
    "cutlass": "https://github.com/NVIDIA/cutlass.git",
    "triton": "https://github.com/triton-lang/triton.git",
    "tilelang": "https://github.com/tile-ai/tilelang.git",
}
FETCH_TIMEOUT_S = 1800


def open_index(args: argparse.Namespace, packages: bool | None) -> ContextIndex:
    # imported by the context commands alone, not by every command's parser
    from agents.context_index import ContextIndex, IndexUnavailable, index_file
    from kerneltui.core.agents.host import find_context
    from kerneltui.core.config import load

    if args.context and not Path(args.context).expanduser().is_dir():
        raise WorkspaceError(f"--context {args.context}: no such folder")
    workspace = resolve(args.workspace)
    context = find_context(workspace, args.context or load(args.config).agent.context)
    if context is None:
        raise WorkspaceError("no context folder: pass --context, or set [agent] context or $KERNELTUI_CONTEXT")
    with contextlib.suppress(OSError):  # a read-only workspace: the index goes to the user's cache instead
        workspace.state.mkdir(exist_ok=True)
    path = Path(args.index) if args.index else index_file(workspace.state, context)
    try:
        return ContextIndex(path, context, packages)
    except IndexUnavailable as exc:
        raise WorkspaceError(f"no search index: {exc}") from None


def cmd_index(args: argparse.Namespace) -> int:
    index = open_index(args, False if args.no_packages else True if args.packages else None)
    stats = index.refresh()
    print(f"{index.context} -> {index.db_path}")
    print(stats.summary())
    return EXIT_OK


def cmd_search(args: argparse.Namespace) -> int:
    from agents.context_index import format_hits

    index = open_index(args, None)
    index.refresh()  # incremental: quick when nothing changed
    query = " ".join(args.query)
    hits = index.search(query, max(1, args.limit))
    if args.json:
        print(json.dumps([hit.to_json() for hit in hits]))
    else:
        print(format_hits(hits, query))
    return EXIT_OK if hits else EXIT_NO_HITS


def new_folder(args: argparse.Namespace, name: str) -> tuple[ContextIndex, Path]:
    """The index, and <context>/<name>, which must not exist yet (fetch and add never write over a folder)."""
    index = open_index(args, None)
    assert index.context is not None  # open_index found one or raised
    target = index.context / name
    if target.exists():
        raise WorkspaceError(f"{target} exists already: remove it, or pass --name for another folder")
    return index, target


def cmd_fetch(args: argparse.Namespace) -> int:
    """A shallow clone into <context>/<name>, then the index brought up to date."""
    url = KNOWN_SOURCES.get(args.source, args.source)
    name = args.name or folder_name(url)
    index, target = new_folder(args, name)
    git = shutil.which("git")
    if git is None:
        raise WorkspaceError("context fetch needs git on PATH")
    print(f"cloning {url} into {target} (depth 1)")
    try:
        done = subprocess.run(
            [git, "clone", "--depth", "1", "--quiet", url, str(target)], timeout=FETCH_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        shutil.rmtree(target, ignore_errors=True)
        raise WorkspaceError(f"git clone of {url} took over {FETCH_TIMEOUT_S} s: stopped") from None
    if done.returncode != 0:
        shutil.rmtree(target, ignore_errors=True)
        raise WorkspaceError(f"git clone of {url} failed (exit {done.returncode}): nothing was added")
    print(index.refresh().summary())
    return EXIT_OK


def cmd_add(args: argparse.Namespace) -> int:
    """A copy of a local folder (links copied as links, .git left out) into <context>/<name>, then indexed."""
    source = Path(args.path).expanduser()
    if not source.is_dir():
        raise WorkspaceError(f"{args.path}: no such folder")
    index, target = new_folder(args, args.name or folder_name(str(source.resolve())))
    if target.parent.resolve().is_relative_to(source.resolve()):
        raise WorkspaceError(f"{source} holds the context folder itself: add a folder inside it instead")
    print(f"copying {source} into {target}")
    try:
        shutil.copytree(source, target, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    except (OSError, shutil.Error) as exc:
        shutil.rmtree(target, ignore_errors=True)
        raise WorkspaceError(f"copying {source} failed: {exc}") from None
    print(index.refresh().summary())
    return EXIT_OK


def folder_name(url: str) -> str:
    """'https://github.com/NVIDIA/cutlass.git' -> 'cutlass'; a local path's last part likewise."""
    last = url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")
    name = re.sub(r"[^\w.-]", "_", last).strip(".")
    if not name:
        raise WorkspaceError(f"cannot name a folder after {url!r}: pass --name")
    return name


def common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--context", help="the folder to index (default: the one agents get)")
    add_workspace(parser)
    add_config(parser)
    parser.add_argument("--index", help="the index file (default: <workspace>/.kerneltui/context-index.sqlite)")


def add_parser(subparsers: Subparsers) -> argparse.ArgumentParser:
    """`kerneltui context`: index, search, fetch and add."""
    parser = subparsers.add_parser(
        "context", help="the context folder's search index, as agents' search_context uses it"
    )
    sub = parser.add_subparsers(dest="action", required=True)
    index = sub.add_parser("index", help="index the context folder (only changed files after the first time)")
    common(index)
    held = index.add_mutually_exclusive_group()
    held.add_argument(
        "--packages",
        action="store_true",
        help="the installed triton, cutlass and tilelang as site/<name>/ (a new index has them; later ones keep "
        "what the index held)",
    )
    held.add_argument("--no-packages", action="store_true", help="the context folder alone")
    index.set_defaults(func=cmd_index)
    search = sub.add_parser("search", help="search the index: path:start-end and the matching lines per hit")
    search.add_argument("query", nargs="+")
    common(search)
    add_json(search, "print one JSON array")
    search.add_argument("--limit", type=int, default=10, help="at most this many hits (default 10)")
    search.set_defaults(func=cmd_search)
    fetch = sub.add_parser(
        "fetch", help=f"shallow-clone {', '.join(KNOWN_SOURCES)} or a git URL into the context folder"
    )
    fetch.add_argument("source", help=f"{' | '.join(KNOWN_SOURCES)} | a git URL or path")
    fetch.add_argument("--name", help="the folder's name in the context folder (default: the repository's)")
    common(fetch)
    fetch.set_defaults(func=cmd_fetch)
    add = sub.add_parser("add", help="copy a local folder (docs, a checkout) into the context folder and index it")
    add.add_argument("path")
    add.add_argument("--name", help="the folder's name in the context folder (default: the folder's own)")
    common(add)
    add.set_defaults(func=cmd_add)
    return parser
