"""Writing what the judge says: an evaluation queued, started, rung by rung, finished with its details."""

from __future__ import annotations

import json
from typing import Any

from harness.contract.results import Evaluation, RungResult
from kerneltui.history.connection import Connection, now
from kerneltui.history.reads import MAY_BE_BEST


class EvaluationWrites(Connection):
    def start_evaluation(
        self,
        version_id: int,
        problem: str,
        version: str,
        file_hash: str,
        options: dict[str, Any] | None = None,
        status: str = "running",
    ) -> int:
        stamp = now()
        return int(
            self.table("evaluations")
            .insert(
                {
                    "version_id": version_id,
                    "problem": problem,
                    "version": version,
                    "hash": file_hash,
                    "status": status,
                    "queued": stamp,
                    "started": stamp if status == "running" else None,
                    "options": json.dumps(options or {}),
                }
            )
            .last_pk
            or 0
        )

    def add_rung(self, evaluation_id: int, idx: int, rung: RungResult) -> None:
        self.table("rungs").insert(
            {
                "evaluation_id": evaluation_id,
                "idx": idx,
                "name": rung.name,
                "ok": None if rung.ok is None else int(rung.ok),
                "skipped": rung.skipped,
                "err": rung.err,
                "seconds": rung.seconds,
                "metrics": json.dumps(rung.metrics, default=str),
                "log": rung.log,
            }
        )

    def finish_evaluation(self, evaluation_id: int, ev: Evaluation) -> None:
        """Stores the final result: key metrics, per-case results, timings, artifacts."""
        with self.transaction():
            self.conn.execute("DELETE FROM rungs WHERE evaluation_id = ?", [evaluation_id])
            for idx, rung in enumerate(ev.rungs):
                self.add_rung(evaluation_id, idx, rung)
            metrics = key_metrics(ev)
            metrics["vs_best"] = self._vs_best(ev, metrics.get("median_us"), evaluation_id)
            self.table("evaluations").update(
                evaluation_id,
                {
                    "status": ev.status,
                    "ok": int(ev.ok),
                    "failed_rung": ev.failed_rung,
                    "error": ev.error,
                    "device_kind": ev.device.get("kind"),
                    "device_name": ev.device.get("name"),
                    "arch": ev.device.get("arch"),
                    "sandbox": ev.sandbox,
                    "flags": json.dumps([flag.to_json() for flag in ev.flags]),
                    "problem_hash": ev.problem_hash,
                    "seeds": json.dumps(ev.seeds),
                    "device": json.dumps(ev.device),
                    "finished": now(),
                    "seconds": ev.seconds,
                    **metrics,
                },
            )
            self._store_details(evaluation_id, ev)

    def _store_details(self, evaluation_id: int, ev: Evaluation) -> None:
        correctness = ev.rung("correctness")
        for case in correctness.metrics.get("cases", []) if correctness else []:
            self.table("case_results").insert(
                {
                    "evaluation_id": evaluation_id,
                    "case_label": case.get("case"),
                    "seed": case.get("seed"),
                    "ok": int(bool(case.get("ok"))),
                    "err": case.get("err"),
                    **{k: case.get(k) for k in ("max_abs", "max_rel", "mse", "rmse", "psnr", "cosine")},
                }
            )
        bench, roof = ev.rung("benchmark"), ev.rung("roofline")
        roof_rows = {r["case"]: r for r in (roof.metrics.get("cases", []) if roof and roof.ok is not None else [])}
        for case in bench.metrics.get("cases", []) if bench and bench.ok else []:
            line = roof_rows.get(case["case"], {})
            self.table("timings").insert(
                {
                    "evaluation_id": evaluation_id,
                    "case_label": case["case"],
                    **{
                        k: case.get(k)
                        for k in (
                            "median_us",
                            "p20_us",
                            "p80_us",
                            "min_us",
                            "n",
                            "noise_pct",
                            "ref_median_us",
                            "speedup",
                        )
                    },
                    "gbps": line.get("gbps"),
                    "tflops": line.get("tflops"),
                    "roofline_pct": line.get("pct"),
                    "device_name": ev.device.get("name"),
                }
            )
        dumps = ev.rung("dumps")
        for item in dumps.metrics.get("files", []) if dumps and dumps.ok else []:
            self.table("artifacts").insert(
                {
                    "evaluation_id": evaluation_id,
                    "case_label": item.get("case"),
                    **{k: item.get(k) for k in ("kernel", "dsl", "kind", "path", "bytes")},
                }
            )

    def _vs_best(self, ev: Evaluation, median_us: float | None, evaluation_id: int) -> float | None:
        """The best's time over this one's (>1: faster than the best so far): from the race against the best,
        back to back, where there was one; else the best earlier passing median on the same device over this."""
        if not median_us or ev.status != "pass":
            return None
        bench = ev.rung("benchmark")
        raced = (bench.metrics.get("race") or {}) if bench else {}
        if raced.get("label") and raced.get("ratio"):
            return 1.0 / float(raced["ratio"])
        row = self.conn.execute(
            f"SELECT MIN(median_us) FROM evaluations WHERE problem = ? AND {MAY_BE_BEST} AND device_name = ? "
            "AND median_us IS NOT NULL AND id < ?",
            [ev.problem, ev.device.get("name"), evaluation_id],
        ).fetchone()
        return row[0] / median_us if row and row[0] else None

    def fail_evaluation(self, evaluation_id: int, error: str, status: str = "error") -> None:
        self.table("evaluations").update(evaluation_id, {"status": status, "ok": 0, "error": error, "finished": now()})

    def set_running(self, evaluation_id: int) -> None:
        self.table("evaluations").update(evaluation_id, {"status": "running", "started": now()})

    def requeue(self, evaluation_id: int) -> None:
        """Queued again from the start (its judge was lost with it in hand): its rungs so far are dropped."""
        self.conn.execute("UPDATE evaluations SET status = 'queued', started = NULL WHERE id = ?", [evaluation_id])
        self.conn.execute("DELETE FROM rungs WHERE evaluation_id = ?", [evaluation_id])

    def requeue_interrupted(self) -> list[int]:
        """Evaluations left queued or running by a kerneltui that stopped: queued again, oldest first."""
        ids = [
            r[0]
            for r in self.conn.execute(
                "SELECT id FROM evaluations WHERE status IN ('queued', 'running') ORDER BY id"
            ).fetchall()
        ]
        if ids:
            self.conn.execute(
                f"UPDATE evaluations SET status = 'queued', started = NULL WHERE id IN ({','.join('?' * len(ids))})",
                ids,
            )
            self.conn.execute(f"DELETE FROM rungs WHERE evaluation_id IN ({','.join('?' * len(ids))})", ids)
        return ids


def key_metrics(ev: Evaluation) -> dict[str, Any]:
    out: dict[str, Any] = {}
    correctness = ev.rung("correctness")
    if correctness and "max_abs" in correctness.metrics:
        for key in ("max_abs", "max_rel", "rmse", "psnr", "cosine"):
            out[key] = correctness.metrics.get(key)
    bench = ev.rung("benchmark")
    if bench and bench.ok:
        for key in ("median_us", "ref_median_us", "speedup"):
            out[key] = bench.metrics.get(key)
        raced = bench.metrics.get("race") or {}
        if raced.get("label"):
            out["race"] = raced["label"]
    roof = ev.rung("roofline")
    if roof and roof.ok is not None and "pct" in roof.metrics:
        out["roofline_pct"] = roof.metrics["pct"]
    return out
