"""`python -m harness doctor` (and `kerneltui doctor`): what this box offers for containing kernel versions,
what a worker started here really gets, and how to get more."""

from __future__ import annotations

import os
import platform
from typing import Any

from harness.containment import watch as containment
from harness.containment.sandbox import cuda_device_count
from harness.workers import fork_server
from harness.workers.forks import NotChild
from harness.workers.process import Spawn, WorkerFailure, WorkerPool


def facts() -> dict[str, Any]:
    offer = containment.probe()
    found: dict[str, Any] = {
        "level": offer.level,
        "bwrap": offer.bwrap,
        "bwrap_note": offer.bwrap_note,
        "landlock_abi": offer.landlock_abi,
        "seccomp": platform.system() == "Linux" and platform.machine() in ("x86_64", "aarch64"),
        "cgroup": offer.cgroup,
        "cgroup_note": offer.cgroup_note,
        "gpus": cuda_device_count(),
        "root": os.geteuid() == 0,
    }
    found["worker"] = try_worker()
    return found


def try_worker() -> dict[str, Any]:
    """Forks one worker as the judge would (from a template, the judge's fork server's where start_fork_server ran)
    and reports what it says it got, whether it sees the GPU, and where its template came from."""
    pool = WorkerPool(Spawn())
    try:
        worker = pool.take("run")
        ready = worker.wait_ready()
        found = {"ok": True, "containment": worker.containment, "cuda": ready.cuda, "template": template_origin(pool)}
        pool.release(worker)
        return found
    except WorkerFailure as exc:
        return {"ok": False, "error": str(exc)}
    finally:
        pool.close()


def start_fork_server() -> None:
    """As a judge does before anything starts a thread or CUDA: torch imported, then the fork server."""
    import torch  # noqa: F401

    fork_server.start()


def template_origin(pool: WorkerPool) -> str:
    template = pool.templates.running
    if template is None:
        return "none"
    if isinstance(template.proc, NotChild):
        return "forked from the judge's fork server (shares its torch)"
    why = template.not_forked_because
    return "started afresh" + (f" (the fork server could not: {why})" if why else "")


def advice(found: dict[str, Any]) -> list[str]:
    tips = []
    if not found["bwrap"]:
        tips.append(
            "install bubblewrap (apt-get install bubblewrap; dnf install bubblewrap) for namespaces: "
            + str(found["bwrap_note"])
        )
    if found["landlock_abi"] < 1:
        tips.append("a Linux kernel with Landlock (5.13+, lsm=landlock) confines reads and writes without privileges")
    elif found["landlock_abi"] < 6:
        tips.append(f"Landlock ABI {found['landlock_abi']}: kernels with ABI 6+ also stop signals to other processes")
    if not found["cgroup"]:
        tips.append(
            f"{found['cgroup_note']}: the judge's watch limits memory and processes instead (a cgroup v2 folder "
            "delegated to this user, with the memory and pids controllers, makes those limits the kernel's)"
        )
    worker = found["worker"]
    if not worker.get("ok"):
        tips.append(f"a worker did not start: {worker.get('error')}")
    elif found["gpus"] and not worker.get("cuda"):
        tips.append(
            "the GPU is not usable inside the worker's sandbox: run `kerneltui eval --no-sandbox` to compare, "
            "or set KERNELTUI_BWRAP=none to use Landlock alone"
        )
    return tips


def report(found: dict[str, Any]) -> str:
    worker = found["worker"]
    lines = [
        "kerneltui doctor: how kernel versions are contained on this box",
        f"  level        {found['level']}",
        f"  bubblewrap   {found['bwrap'] or 'no'}: {found['bwrap_note']}",
        f"  Landlock     {'ABI ' + str(found['landlock_abi']) if found['landlock_abi'] else 'not available'}",
        f"  seccomp      {'yes' if found['seccomp'] else 'no'}",
        f"  cgroup v2    {found['cgroup'] or 'no'}{'' if found['cgroup'] else ': ' + found['cgroup_note']}",
        f"  GPUs         {found['gpus'] or 'none (versions run through the Triton interpreter)'}",
        f"  a worker     {worker.get('containment') if worker.get('ok') else 'failed: ' + str(worker.get('error'))}",
    ]
    if worker.get("ok"):
        lines.append(f"  its template {worker.get('template')}")
    if worker.get("ok") and found["gpus"]:
        lines.append(f"  GPU in it    {'yes' if worker.get('cuda') else 'NO'}")
    tips = advice(found)
    if tips:
        lines += ["", "To get more:", *[f"  - {tip}" for tip in tips]]
    return "\n".join(lines)
