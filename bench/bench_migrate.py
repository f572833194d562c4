"""Benchmark: `zk2kraft migrate` of a 1,000,000-partition ZooKeeper snapshot, end to end, in a child process.

    python -m bench.bench_migrate [--topics 10000] [--partitions-per-topic 100] [--data-dir DIR] [--profile N]

Generates the cluster's ZooKeeper data dir (bench/generate_cluster.py, chroot /kafka) unless `--data-dir`
names one already generated, then runs `zk2kraft migrate --zk-data-dir DIR --chroot /kafka --out META` as
a child process: wall time, CPU time and peak memory from the child's own rusage (`os.wait4`). CPU time
is the steadier figure on a loaded machine. `--baseline-root DIR` runs the same command first from
another checkout (e.g. `git worktree add DIR main`): the same-run ratio of this tree against it. A
second child times the phases separately (read the snapshot, build the model under the chroot, translate,
encode the log, replay it into an image, write the directory), in wall and CPU seconds, with the resident
memory after each. The I/O floor, measured in the same run, is reading the snapshot's bytes and writing
as many bytes as the metadata dir holds, with fsync. `--profile N` also runs the phases under cProfile
and prints the top N functions by own time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROOT = "/kafka"
TARGET_S = 20.0
TARGET_RSS_MB = 1536
ROOT = Path(__file__).resolve().parents[1]


def run_child(args: list[str], root: Path = ROOT) -> tuple[float, int, str, float]:
    """Run `args` from the repository `root` (its code first on the path); returns wall seconds, that child's
    peak RSS in bytes, stdout, and its CPU seconds (user + system, steadier than wall time under load)."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        child = subprocess.Popen(args, stdout=out, stderr=err, cwd=root, env=env)
        _pid, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, so Popen must not wait again
        out.seek(0)
        err.seek(0)
        text, problems = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({child.returncode}):\n{problems[-3000:]}")
    return wall, usage.ru_maxrss * 1024, text, usage.ru_utime + usage.ru_stime


def zk2kraft_command() -> list[str]:
    """The installed `zk2kraft` script next to this interpreter, else the same entry point through -c."""
    script = Path(sys.executable).with_name("zk2kraft")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from cli.main import main; sys.argv[0] = 'zk2kraft'; main()"]


def io_floor(snapshot: Path, out_bytes: int, scratch: Path) -> float:
    """Seconds to read the snapshot and write `out_bytes` durably: what any migration must at least pay."""
    start = time.perf_counter()
    view = memoryview(snapshot.read_bytes() or bytes(1 << 20))
    target = scratch / "io-floor.bin"
    with open(target, "wb") as f:
        left = out_bytes
        while left > 0:
            n = min(left, len(view))
            f.write(view[:n])
            left -= n
        f.flush()
        os.fsync(f.fileno())
    elapsed = time.perf_counter() - start
    target.unlink()
    return elapsed


# ------------------------------------------------------------------ the phases (run in a child process)


def _rss_mb() -> int:
    """This process's resident set now, in MB (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 2**20


def phases(data_dir: Path, out: Path) -> dict[str, float]:
    """The migration's steps one by one, as `migrate_to_metadata_dir` runs them; seconds per step."""
    import uuid

    from migrate import migration
    from migrate.kraft import metadata_version as mvs
    from migrate.translate import translate
    from migrate.zk.cluster import from_tree_at
    from migrate.zk.restore import load_data_dir

    times: dict[str, float] = {}
    cpu: dict[str, float] = {}
    rss: dict[str, int] = {}  # resident MB after each step: where the peak builds up

    @contextmanager
    def step(name: str) -> Iterator[None]:
        start, start_cpu = time.perf_counter(), time.process_time()
        yield
        times[name] = round(time.perf_counter() - start, 2)
        # CPU seconds of this process: steadier than wall time on a machine others are loading too.
        cpu[name] = round(time.process_time() - start_cpu, 2)
        rss[name] = _rss_mb()

    with step("read_snapshot"):
        full, _report = load_data_dir(data_dir)
    with step("build_model"):
        # As the CLI does: the model is read under the chroot in place, no relative copy of the tree.
        model = from_tree_at(full, CHROOT, consume=True)
    del full
    mv = mvs.LATEST_PRODUCTION
    cluster_id = migration.model_cluster_id(model)
    with step("translate"):
        translation = translate(model, metadata_version=mv)
    del model  # as migrate_to_metadata_dir does
    with step("encode_log"):
        log = migration.encode_log(
            migration.plan_writes(translation), controller_id=migration.DEFAULT_CONTROLLER_ID
        )
    with step("replay"):
        image = migration.replay_log(log)
    with step("write_dir"):
        # The directory writer is private to migration.py; it is what migrate_to_metadata_dir calls last.
        migration._write_directory(
            out,
            log,
            image,
            mv=mv,
            cluster_id=cluster_id,
            controller_id=migration.DEFAULT_CONTROLLER_ID,
            directory_id=uuid.uuid4(),
        )
    times["total"] = round(sum(times.values()), 2)
    cpu["total"] = round(sum(cpu.values()), 2)
    return {**times, "cpu": cpu, "rss_mb_after": rss}  # type: ignore[dict-item]


def phases_main(data_dir: Path, out: Path, profile: int) -> None:
    if not profile:
        print(json.dumps(phases(data_dir, out)))
        return
    profiler = cProfile.Profile()
    result = profiler.runcall(phases, data_dir, out)
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(profile)
    stats.sort_stats("cumulative").print_stats(profile)
    print(text.getvalue())
    print(json.dumps(result))


# ------------------------------------------------------------------ the benchmark


def measure(data_dir: Path, profile: int, baseline_root: Path | None = None) -> dict[str, Any]:
    from migrate.zk.restore import list_snapshots, version_dir

    snapshot = list_snapshots(version_dir(data_dir, "data directory"))[-1][1]
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="zk2kraft-bench-") as tmp:
        scratch = Path(tmp)
        meta = scratch / "meta"
        command = [
            *zk2kraft_command(),
            "migrate",
            "--zk-data-dir",
            str(data_dir),
            "--chroot",
            CHROOT,
            "--out",
            str(meta),
            "--format",
            "json",
        ]
        baseline: dict[str, Any] = {}
        if baseline_root is not None:
            # The same command on another checkout (e.g. the code before a change), in this same run.
            b_wall, b_peak, _out, b_cpu = run_child(command, baseline_root)
            shutil.rmtree(meta)
            baseline = {
                "baseline_root": str(baseline_root),
                "baseline_wall_s": round(b_wall, 2),
                "baseline_cpu_s": round(b_cpu, 2),
                "baseline_peak_rss_mb": round(b_peak / 2**20),
            }
        wall, peak, stdout, cpu = run_child(command)
        report = json.loads(stdout)
        out_bytes = sum(report["files"].values())
        shutil.rmtree(meta)
        if baseline:
            baseline["wall_vs_baseline"] = round(wall / baseline["baseline_wall_s"], 2)
            baseline["cpu_vs_baseline"] = round(cpu / baseline["baseline_cpu_s"], 2)
        floor = io_floor(snapshot, out_bytes, scratch)
        phase_cmd = [
            sys.executable,
            "-m",
            "bench.bench_migrate",
            "--phases-child",
            str(data_dir),
            str(scratch / "p"),
        ]
        p_wall, p_peak, p_out, _cpu = run_child([*phase_cmd, "--profile", "0"])
        timings = json.loads(p_out.strip().splitlines()[-1])
        profile_text = ""
        if profile:
            shutil.rmtree(scratch / "p", ignore_errors=True)
            _wall, _peak, profile_text, _cpu = run_child([*phase_cmd, "--profile", str(profile)])
    manifest = report["manifest"]
    return {
        "benchmark": "migrate",
        "snapshot": str(snapshot),
        "snapshot_bytes": snapshot.stat().st_size,
        "partitions": manifest["record_types"].get("PARTITION_RECORD", 0),
        "records": manifest["total_records"],
        "record_types": manifest["record_types"],
        "metadata_dir_bytes": out_bytes,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "migrate_wall_s": round(wall, 2),
        "migrate_cpu_s": round(cpu, 2),
        "migrate_peak_rss_mb": round(peak / 2**20),
        "target_s": TARGET_S,
        "meets_target": wall < TARGET_S and peak / 2**20 < TARGET_RSS_MB,
        **baseline,
        "io_floor_s": round(floor, 2),
        "migrate_vs_io_floor": round(wall / floor, 1),
        "phases_s": timings,
        "phases_child_wall_s": round(p_wall, 2),
        "phases_child_peak_rss_mb": round(p_peak / 2**20),
        "profile": profile_text,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--partitions-per-topic", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-dir", type=Path, help="an already generated data dir with chroot /kafka")
    parser.add_argument(
        "--profile", type=int, default=0, metavar="N", help="print the top N cProfile entries"
    )
    parser.add_argument(
        "--baseline-root",
        type=Path,
        help="another checkout (e.g. `git worktree add DIR main`) whose migrate runs first, for a same-run ratio",
    )
    parser.add_argument(
        "--phases-child", nargs=2, type=Path, metavar=("DATA_DIR", "OUT"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.phases_child:
        phases_main(args.phases_child[0], args.phases_child[1], args.profile)
        return
    if args.data_dir is not None:
        result = measure(args.data_dir, args.profile, args.baseline_root)
    else:
        from bench.generate_cluster import ClusterSpec, generate, write_data_dir

        with tempfile.TemporaryDirectory(prefix="zk2kraft-bench-data-") as tmp:
            spec = ClusterSpec(
                topics=args.topics, partitions_per_topic=args.partitions_per_topic, seed=args.seed
            )
            write_data_dir(generate(spec, CHROOT), tmp)
            result = measure(Path(tmp), args.profile, args.baseline_root)
    profile_text = result.pop("profile")
    if profile_text:
        print(profile_text)
    print(json.dumps(result, indent=2))
    verdict = "meets" if result["meets_target"] else "MISSES"
    if "baseline_wall_s" in result:
        print(
            f"baseline ({result['baseline_root']}), same run: {result['baseline_wall_s']} s wall, "
            f"{result['baseline_cpu_s']} s CPU, peak RSS {result['baseline_peak_rss_mb']} MB; this tree: "
            f"{result['wall_vs_baseline']}x its wall, {result['cpu_vs_baseline']}x its CPU"
        )
    print(
        f"migrate {result['partitions']:,} partitions: {result['migrate_wall_s']} s wall, {result['migrate_cpu_s']} s "
        f"CPU ({verdict} the "
        f"{TARGET_S:.0f} s / {TARGET_RSS_MB} MB target), peak RSS {result['migrate_peak_rss_mb']} MB; {result['migrate_vs_io_floor']}x "
        f"the I/O floor ({result['io_floor_s']} s); phases {result['phases_s']}"
    )


if __name__ == "__main__":
    main()
