"""Many seeds of the Raft wing's simulation: steps per second and invariant violations (must be 0).

python -m bench.bench_raft_sim [--seeds 200] [--voters 3] [--observers 1]
"""

from __future__ import annotations

import argparse
import logging
import time

from tests.support.raft_sim import RaftSimulation, SimSettings, SimulationViolation


def chaos_run(seed: int, voters: int, observers: int) -> RaftSimulation:
    """Kills, restarts, partitions and 10% loss for about 40 s of simulated time, then a healed finish."""
    sim = RaftSimulation(seed, SimSettings(voters=voters, observers=observers, loss=0.1, max_delay_ms=80))
    sim.start_all()
    sim.chaos()
    target = sim.committed_end + 10
    sim.run_until(
        lambda: all(sim.high_watermark(n.node_id) >= target for n in sim.alive()), 60_000, "progress"
    )
    return sim


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--voters", type=int, default=3)
    parser.add_argument("--observers", type=int, default=1)
    args = parser.parse_args()
    logging.getLogger("bridge.raft").setLevel(logging.ERROR)  # check-quorum resignations are expected here
    steps = 0
    violations: list[str] = []
    began = time.perf_counter()
    for seed in range(1, args.seeds + 1):
        try:
            steps += chaos_run(seed, args.voters, args.observers).steps
        except SimulationViolation as exc:
            violations.append(str(exc).splitlines()[0] + f" (seed {seed})")
    elapsed = time.perf_counter() - began
    print(f"seeds={args.seeds} voters={args.voters} observers={args.observers} steps={steps}")
    print(f"steps_per_s={steps / elapsed:,.0f} elapsed_s={elapsed:.1f} violations={len(violations)}")
    for line in violations:
        print(f"  {line}")
    raise SystemExit(1 if violations else 0)


if __name__ == "__main__":
    main()
