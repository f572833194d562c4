"""Benchmark: `zk2kraft audit` of 100,000 and 1,000,000 partitions on local[2], against a parse-only baseline.

    python -m bench.bench_audit [--sizes 100000,1000000] [--work DIR] [--master local[2]] [--driver-memory 1g]

For each size, a setup child (not timed) generates the cluster with bench/generate_cluster.py
(N/100 topics, 100 partitions each), writes it as a `zk export` dump and migrates it with
`migrate_to_metadata_dir` (a KRaft metadata dir whose newest snapshot holds everything). Then, in the same
run, two measured children:

- baseline: the same Spark session settings, parsing both inputs into their row sets (the ZooKeeper dump's
  znodes → rows, the KRaft snapshot's byte ranges → folded rows, each written by the tasks as Parquet files
  per row kind) and nothing else;
- audit: `zk2kraft audit --zk-dump DUMP --kraft META --out OUT --master local[2]`, the whole command.

Wall time, peak RSS of the driver (the Python process), of the JVM (driver and executors, one process in
local mode) and of the Python workers (sum at the peak), and partitions per second. Inputs are kept in
`--work` (default: a temporary directory) so a second run skips the setup. `--before DIR` (another checkout,
e.g. `git archive` of an earlier commit) runs that code's baseline and audit first in the same run and says
whether both audits wrote the same outputs.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 300.0
TARGET_DRIVER_MB = 2048


# ------------------------------------------------------------------ process-tree memory sampling


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out.extend(int(x) for x in f.read().split())
    except OSError:
        pass
    return out


def _rss_kb(pid: int) -> tuple[int, int, str]:
    """(VmRSS, VmHWM, command name) of a process, zeros when it is gone."""
    rss = hwm = 0
    name = ""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Name:"):
                    name = line.split()[1]
                elif line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
    except OSError:
        pass
    return rss, hwm, name


class TreeSampler:
    """Peak RSS of a child (the driver), its JVM descendants and its Python worker descendants."""

    def __init__(self, pid: int, interval: float = 0.25) -> None:
        self.pid = pid
        self.interval = interval
        self.driver_kb = 0
        self.jvm_kb = 0
        self.workers_kb = 0
        self.cpu_ticks: dict[int, int] = {}
        """CPU time (user + system, clock ticks) last seen per process of the tree: load from other processes
        on the machine changes it far less than the wall time."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _cpu(self, pid: int) -> None:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return
        self.cpu_ticks[pid] = max(self.cpu_ticks.get(pid, 0), int(fields[11]) + int(fields[12]))

    def _run(self) -> None:
        while not self._stop.is_set():
            _rss, hwm, _name = _rss_kb(self.pid)
            self.driver_kb = max(self.driver_kb, hwm)
            jvm = workers = 0
            self._cpu(self.pid)
            pending = _children(self.pid)
            while pending:
                pid = pending.pop()
                self._cpu(pid)
                rss, hwm, name = _rss_kb(pid)
                if name == "java":
                    jvm += hwm
                elif name.startswith("python"):
                    workers += rss
                pending.extend(_children(pid))
            self.jvm_kb = max(self.jvm_kb, jvm)
            self.workers_kb = max(self.workers_kb, workers)
            self._stop.wait(self.interval)


def run_measured(args: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT) -> dict[str, Any]:
    """Run a child from a checkout's root (this one by default); wall time, peak memories, stdout."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        child = subprocess.Popen(args, stdout=out, stderr=err, cwd=cwd, env=env)
        sampler = TreeSampler(child.pid)
        sampler.start()
        code = child.wait()
        wall = time.perf_counter() - start
        sampler.stop()
        out.seek(0)
        err.seek(0)
        text, problems = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    return {
        "exit_code": code,
        "wall_s": round(wall, 2),
        "cpu_s": round(sum(sampler.cpu_ticks.values()) / os.sysconf("SC_CLK_TCK"), 1),
        "driver_peak_rss_mb": round(sampler.driver_kb / 1024),
        "jvm_peak_rss_mb": round(sampler.jvm_kb / 1024),
        "python_workers_peak_rss_mb": round(sampler.workers_kb / 1024),
        "stdout": text,
        "stderr_tail": problems[-2000:],
    }


# ------------------------------------------------------------------ children


def prepare_child(partitions: int, work: Path) -> None:
    """Generate the cluster, write its dump and its migrated KRaft dir (skipped when present)."""
    from bench.generate_cluster import ClusterSpec, generate
    from migrate.migration import migrate_to_metadata_dir
    from migrate.zk.dump import write_dump

    done = work / "ready.json"
    if done.exists():
        return
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    spec = ClusterSpec(topics=partitions // 100, partitions_per_topic=100, seed=0)
    start = time.perf_counter()
    cluster = generate(spec, "/")
    tree = cluster.kafka_tree()
    write_dump(tree, work / "zk.jsonl")
    model = cluster.model
    del cluster, tree
    migrate_to_metadata_dir(model, work / "meta")
    info = {"partitions": model.partition_count, "setup_s": round(time.perf_counter() - start, 1)}
    done.write_text(json.dumps(info))


def parse_child(work: Path, master: str, driver_memory: str) -> None:
    """The baseline: both inputs parsed into their row sets (Parquet files per row kind, written by the
    tasks: the same work as the audit's two parse phases), nothing compared."""
    from migrate.zk.sources import ZkSource
    from validators.kraft_tasks import kraft_side, plan_kraft
    from validators.spark import build_session
    from validators.zk_tasks import prepare_zk_input, zk_side

    spark = build_session(master, driver_memory=driver_memory)
    start = time.perf_counter()
    zk = prepare_zk_input(spark, ZkSource(dump=work / "zk.jsonl"), work / "tmp")
    parallelism = spark.sparkContext.defaultParallelism
    zk_rows = sum(zk_side(spark, zk, work / "tmp" / "zk", min_partitions=max(2, parallelism)).counts.values())
    t_zk = time.perf_counter() - start
    plan = plan_kraft(work / "meta")
    kraft_rows = sum(kraft_side(spark, plan, work / "tmp" / "kraft", shuffle_partitions=8).counts.values())
    total = time.perf_counter() - start
    spark.stop()
    shutil.rmtree(work / "tmp", ignore_errors=True)
    print(json.dumps({"zk_rows": zk_rows, "kraft_rows": kraft_rows, "zk_s": round(t_zk, 2), "total_s": round(total, 2)}))


# ------------------------------------------------------------------ the benchmark


def _baseline_and_audit(work: Path, master: str, driver_memory: str, code: Path) -> tuple[dict[str, Any], dict[str, Any], Path]:
    """The parse-only baseline and the whole audit, both run with the code of checkout `code`."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONPATH": str(code)}
    baseline = run_measured(
        [sys.executable, "-m", "bench.bench_audit", "--parse-child", str(work), master, driver_memory], env, code
    )
    if baseline["exit_code"] != 0:
        raise SystemExit(f"baseline of {code} failed:\n{baseline['stderr_tail']}")
    out = work / ("audit-out" if code == ROOT else "audit-out-before")
    shutil.rmtree(out, ignore_errors=True)
    script = Path(sys.executable).with_name("zk2kraft")
    audit = run_measured(
        [
            str(script), "audit", "--zk-dump", str(work / "zk.jsonl"), "--kraft", str(work / "meta"),
            "--out", str(out), "--master", master, "--driver-memory", driver_memory,
        ],
        env,
        code,
    )  # fmt: skip
    return baseline, audit, out


def _same_report(a: Path, b: Path) -> bool:
    """Two audits' outputs say the same: summary.json less its timings, and the discrepancy rows."""
    import pyarrow.parquet as pq

    def summary(out: Path) -> dict[str, Any]:
        data = json.loads((out / "summary.json").read_text())
        data.pop("timings_s", None)
        data.pop("outputs", None)
        return data

    def rows(out: Path) -> list[Any]:
        return sorted(map(repr, pq.read_table(out / "discrepancies.parquet").to_pylist()))

    return summary(a) == summary(b) and rows(a) == rows(b)


def measure(partitions: int, work: Path, master: str, driver_memory: str, before: Path | None = None) -> dict[str, Any]:
    subprocess.run(
        [sys.executable, "-m", "bench.bench_audit", "--prepare-child", str(partitions), str(work)], cwd=ROOT, check=True
    )
    info = json.loads((work / "ready.json").read_text())
    dump_bytes = (work / "zk.jsonl").stat().st_size
    meta_bytes = sum(p.stat().st_size for p in (work / "meta").rglob("*") if p.is_file())
    load_before = os.getloadavg()
    compared: dict[str, Any] = {}
    if before is not None:
        old_baseline, old_audit, old_out = _baseline_and_audit(work, master, driver_memory, before)
        old_base = json.loads(old_baseline["stdout"].strip().splitlines()[-1])
        compared = {
            "before_code": str(before),
            "before_load_average": [round(x, 2) for x in os.getloadavg()],
            "before_baseline_wall_s": old_baseline["wall_s"],
            "before_baseline_parse_s": old_base["total_s"],
            "before_baseline_cpu_s": old_baseline["cpu_s"],
            "before_audit_cpu_s": old_audit["cpu_s"],
            "before_audit_wall_s": old_audit["wall_s"],
            "before_audit_exit_code": old_audit["exit_code"],
        }
    baseline, audit, out = _baseline_and_audit(work, master, driver_memory, ROOT)
    load_after = os.getloadavg()
    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    base = json.loads(baseline["stdout"].strip().splitlines()[-1])
    if compared:
        compared["audit_vs_before"] = round(audit["wall_s"] / compared["before_audit_wall_s"], 2)
        compared["baseline_vs_before"] = round(baseline["wall_s"] / compared["before_baseline_wall_s"], 2)
        compared["same_report_as_before"] = bool(summary) and _same_report(out, old_out)
    return {
        "partitions": info["partitions"],
        "zk_dump_bytes": dump_bytes,
        "kraft_dir_bytes": meta_bytes,
        "master": master,
        "driver_memory": driver_memory,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
        "baseline_wall_s": baseline["wall_s"],
        "baseline_parse_s": base["total_s"],
        "baseline_cpu_s": baseline["cpu_s"],
        "baseline_driver_peak_rss_mb": baseline["driver_peak_rss_mb"],
        "baseline_jvm_peak_rss_mb": baseline["jvm_peak_rss_mb"],
        "audit_exit_code": audit["exit_code"],
        "audit_verdict": summary.get("verdict"),
        "audit_wall_s": audit["wall_s"],
        "audit_cpu_s": audit["cpu_s"],
        "audit_timings_s": summary.get("timings_s"),
        "audit_driver_peak_rss_mb": audit["driver_peak_rss_mb"],
        "audit_jvm_peak_rss_mb": audit["jvm_peak_rss_mb"],
        "audit_python_workers_peak_rss_mb": audit["python_workers_peak_rss_mb"],
        "partitions_per_s": round(info["partitions"] / audit["wall_s"]),
        "audit_vs_baseline": round(audit["wall_s"] / baseline["wall_s"], 2),
        "meets_target": bool(summary) and audit["wall_s"] < TARGET_S and audit["driver_peak_rss_mb"] < TARGET_DRIVER_MB,
        "audit_stderr_tail": "" if summary else audit["stderr_tail"],
        **compared,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000,1000000", help="partition counts, comma-separated")
    parser.add_argument("--work", type=Path, help="where to keep generated inputs (reused across runs)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--driver-memory", default="1g")
    parser.add_argument(
        "--before", type=Path, help="another checkout (e.g. `git archive` of the previous commit): its baseline and "
        "audit run first in the same run, and the report says whether both audits wrote the same outputs",
    )
    parser.add_argument("--prepare-child", nargs=2, metavar=("PARTITIONS", "DIR"), help=argparse.SUPPRESS)
    parser.add_argument("--parse-child", nargs=3, metavar=("DIR", "MASTER", "MEMORY"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.prepare_child:
        prepare_child(int(args.prepare_child[0]), Path(args.prepare_child[1]))
        return
    if args.parse_child:
        parse_child(Path(args.parse_child[0]), args.parse_child[1], args.parse_child[2])
        return
    sizes = [int(x) for x in args.sizes.split(",")]
    temporary = args.work is None
    work = Path(tempfile.mkdtemp(prefix="zk2kraft-bench-audit-")) if temporary else args.work
    results = []
    try:
        for n in sizes:
            result = measure(n, work / f"p{n}", args.master, args.driver_memory, args.before)
            results.append(result)
            print(json.dumps(result, indent=2), flush=True)
    finally:
        if temporary:
            shutil.rmtree(work, ignore_errors=True)
    if len(results) > 1:
        small, big = results[0], results[-1]
        growth = {
            "partitions_ratio": round(big["partitions"] / small["partitions"], 1),
            "audit_time_ratio": round(big["audit_wall_s"] / small["audit_wall_s"], 2),
            "baseline_time_ratio": round(big["baseline_wall_s"] / small["baseline_wall_s"], 2),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
        }
        print(json.dumps({"growth": growth}, indent=2))


if __name__ == "__main__":
    main()
