"""The hand-off from a quorum of bridges to Kafka 3.9 controllers, then finalizing, step by step, for plan.md.

Kafka has no counterpart (its migration starts with real controllers); the order follows a static quorum's
rolling restart (KIP-853's rules for a voter restarting on its own directory) and Kafka 3.9's operator
procedure (brokers to KRaft, then finalize).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from migrate.kraft.quorum_voters import QuorumVoter, render_quorum_voters
from migrate.plan.configs import target_controllers, zk_client_configs
from migrate.plan.inputs import PlanInputs, java_bool

HANDOFF_FOLDER = "handoff"
FINALIZE_FOLDER = "finalize"
BRIDGE_METRICS_PORT = 9404  # the plan's `bridge run --metrics 0.0.0.0:9404`, which `bridge stop --status` reads
MONITORING = "examples/monitoring/ (Grafana dashboard and Prometheus alert rules over the bridges' /metrics)"


@dataclass(frozen=True, slots=True)
class MeasuredStep:
    """A step's duration as a benchmark in docs/benchmarks.md measured it, at `partitions` partitions."""

    seconds: float
    partitions: int
    benchmark: str


# Every figure the runbook's estimates use, each as docs/benchmarks.md gives it (2 cores, 200,000 partitions);
# a step without one says "not measured" rather than guess.
MEASURED_STEPS: dict[str, MeasuredStep] = {
    "stop-follower": MeasuredStep(
        4.65, 200_000, "bench/bench_clean_stop.py, a follower voter's clean stop with its final snapshot"
    ),
    "stop-leader": MeasuredStep(
        4.13, 200_000, "bench/bench_clean_stop.py, the leader voter's clean stop with its final snapshot"
    ),
    "check": MeasuredStep(
        2.85, 200_000, "bench/bench_clean_stop.py, the whole `zk2kraft handoff check`, ZooKeeper included"
    ),
    "failover": MeasuredStep(
        4.74, 200_000, "bench/bench_failover.py, the bridges' own failover to a new leader dual-writing; a Kafka "
        "controller's election and claim were not measured"
    ),
}


def scaled_seconds(step: str, partitions: int) -> float | None:
    """`step`'s measured seconds scaled linearly to `partitions`; None where nothing was measured."""
    measured = MEASURED_STEPS.get(step)
    if measured is None:
        return None
    return measured.seconds * max(partitions, 1) / measured.partitions


def _seconds(value: float | None) -> str:
    if value is None:
        return "not measured"
    return "under 0.1 s" if value < 0.1 else f"about {value:.1f} s"


def estimate_text(step: str | None, partitions: int) -> str:
    """`step`'s time at `partitions` and the benchmark it is scaled from, or "not measured"."""
    measured = MEASURED_STEPS.get(step) if step is not None else None
    if step is None or measured is None:
        return "not measured"
    return (
        f"{_seconds(scaled_seconds(step, partitions))} at {partitions:,} partitions, scaled linearly from "
        f"{measured.seconds:g} s at {measured.partitions:,} ({measured.benchmark}); an estimate"
    )


def step_estimate(step: str | None, partitions: int) -> str:
    """How long `step` should take at `partitions`, scaled linearly from its benchmark; or "not measured"."""
    return f"(Time: {estimate_text(step, partitions)}.)"


def handoff_file(node_id: int) -> str:
    """Where the plan writes the controller that takes bridge `node_id`'s place."""
    return f"{HANDOFF_FOLDER}/controller-{node_id}.properties"


def handoff_check_command(
    metadata_dir: str, zk: str, node_id: int, voters: Sequence[QuorumVoter] = (), *, zk_options: Sequence[str] = ()
) -> str:
    """`zk2kraft handoff check` of one voter's directory, ready to paste (the plan's runbook, a bridge's stop);
    `zk_options` are its ZooKeeper TLS/SASL options (`zk_check_options`)."""
    args = ["zk2kraft", "handoff", "check", "--metadata-dir", metadata_dir, "--zk", zk, "--node-id", str(node_id)]
    if voters:
        args += ["--voters", render_quorum_voters(voters)]
    return shlex.join([*args, *zk_options])


PEM = "PEM"
ZK_CA_PLACEHOLDER = "<zk-ca.pem>"
ZK_CERT_PLACEHOLDER = "<zk-client.pem>"
ZK_SASL_USER_PLACEHOLDER = "<zk-sasl-user>"


@dataclass(frozen=True, slots=True)
class ZkCheckOptions:
    """The zk2kraft ZooKeeper options matching the brokers' zookeeper.* settings, and what the operator adds."""

    args: tuple[str, ...]
    notes: tuple[str, ...]

    def note_text(self) -> str:
        return (" " + " ".join(self.notes)) if self.notes else ""


def zk_check_options(settings: Mapping[str, str]) -> ZkCheckOptions:
    """`--zk-tls*` / `--zk-sasl-*` for a zk2kraft command reaching ZooKeeper as the brokers do (their zookeeper.*
    client settings, Kafka's names). Passwords never go on the line: they come from zk2kraft's environment variables."""
    args: list[str] = []
    notes: list[str] = []
    tls = java_bool(settings.get("zookeeper.ssl.client.enable")) is True
    keystore = settings.get("zookeeper.ssl.keystore.location")
    if tls:
        args.append("--zk-tls")
        truststore = settings.get("zookeeper.ssl.truststore.location")
        if truststore:
            pem = (settings.get("zookeeper.ssl.truststore.type") or "").strip().upper() == PEM
            args += ["--zk-tls-ca", truststore if pem else ZK_CA_PLACEHOLDER]
            if not pem:
                notes.append(f"{ZK_CA_PLACEHOLDER}: the CA certificates of {truststore} as PEM (zk2kraft reads PEM; "
                             "`keytool -exportcert -rfc`).")  # fmt: skip
        if keystore:
            pem = (settings.get("zookeeper.ssl.keystore.type") or "").strip().upper() == PEM
            args += ["--zk-tls-cert", keystore if pem else ZK_CERT_PLACEHOLDER]
            if not pem:
                notes.append(f"{ZK_CERT_PLACEHOLDER}: the client certificate and key of {keystore} as PEM.")
            if settings.get("zookeeper.ssl.keystore.password"):
                notes.append("Set ZK2KRAFT_ZK_TLS_KEY_PASSWORD to its key's password (zookeeper.ssl.keystore.password).")
        if (settings.get("zookeeper.ssl.endpoint.identification.algorithm", "HTTPS") or "").strip() == "":
            args.append("--zk-tls-no-hostname-check")
    if java_bool(settings.get("zookeeper.set.acl")) is True and not (tls and keystore):
        # Kafka refuses zookeeper.set.acl=true without a SASL or mTLS login: no keystore, so the JAAS Client login.
        args += ["--zk-sasl-username", ZK_SASL_USER_PLACEHOLDER]
        notes.append(f"{ZK_SASL_USER_PLACEHOLDER}: the username of the brokers' JAAS Client login; set "
                     "ZK2KRAFT_ZK_SASL_PASSWORD to its password.")  # fmt: skip
    return ZkCheckOptions(tuple(args), tuple(notes))


def plan_zk_check_options(inputs: PlanInputs) -> ZkCheckOptions:
    """`zk_check_options` of the brokers' settings the plan read (none without a broker config)."""
    return zk_check_options(zk_client_configs(inputs.brokers[0]) if inputs.brokers else {})




def handoff_steps(inputs: PlanInputs, zk: str, brokers_to_kraft: str = "the brokers-to-kraft phase") -> list[str]:
    """Choose rolling or cold, hand over (each voter's stop, check, start, catch-up), then brokers to KRaft
    (`brokers_to_kraft` names that phase), finalize, and rollback while it is still possible; each step with the
    command that checks it and how long it should take for this cluster."""
    ctrls = target_controllers(inputs)
    partitions = inputs.model.partition_count
    broker_count = len(inputs.model.brokers) or len(inputs.brokers)
    voters = len(ctrls)
    bootstrap = ",".join(c.endpoint for c in ctrls)
    quorum_cmd = f"bin/kafka-metadata-quorum.sh --bootstrap-controller {bootstrap} describe"
    metadata_dir = str(inputs.bridge_metadata_dir)
    zk_opts = plan_zk_check_options(inputs)
    zk_args = " ".join(shlex.quote(a) for a in zk_opts.args)
    zk_with = f"{zk} {zk_args}".rstrip()
    status_cmd = f"zk2kraft status --zk {zk_with}"

    def stop(c: QuorumVoter) -> str:
        return f"zk2kraft bridge stop --status http://{c.host}:{BRIDGE_METRICS_PORT} --for-handoff"

    def check(c: QuorumVoter) -> str:
        return handoff_check_command(metadata_dir, zk, c.node_id, ctrls, zk_options=zk_opts.args)

    def start(c: QuorumVoter) -> str:
        return f"bin/kafka-server-start.sh {handoff_file(c.node_id)}"

    follower_stop = scaled_seconds("stop-follower", partitions) or 0.0
    leader_stop = scaled_seconds("stop-leader", partitions) or 0.0
    one_check = scaled_seconds("check", partitions) or 0.0
    failover = scaled_seconds("failover", partitions) or 0.0
    rolling_measured = (voters - 1) * follower_stop + leader_stop + voters * one_check + failover
    follower, leader = MEASURED_STEPS["stop-follower"], MEASURED_STEPS["stop-leader"]
    stop_time = (
        f"{_seconds(follower_stop)} for a follower, {_seconds(leader_stop)} for the leader bridge, at "
        f"{partitions:,} partitions, scaled linearly from {follower.seconds:g} s and {leader.seconds:g} s at "
        f"{leader.partitions:,} (bench/bench_clean_stop.py, a voter's clean stop with its final snapshot); an estimate"
    )
    steps = [
        f"Choose the procedure. Rolling (no controller outage): one voter at a time, followers first, the leader "
        f"bridge last; choose it when the brokers must never be without a controller. Its measured parts for this "
        f"cluster ({voters} voters, {partitions:,} partitions): {_seconds(rolling_measured)} in all of stops, checks and the "
        f"final election, plus {voters} Kafka controller starts and catch-ups (not measured). Cold (seconds without "
        f"a controller): stop every bridge, then start every controller; fewer steps, for a maintenance window, "
        f"or when a mixed quorum of bridges and Kafka controllers is not wanted. Its outage: from the leader "
        f"bridge's stop ({_seconds(leader_stop)}) through every check ({voters} checks of {_seconds(one_check)}, or one on each "
        f"host at once) to a Kafka controller elected and dual-writing ({_seconds(failover)} for the bridges' own "
        "failover; Kafka's start and election not measured). Times scale linearly with partitions, as estimates.",
        f"Watch throughout with {MONITORING}, and `{status_cmd}` (phase dual-write, lag 0) before every step.",
        f"Rolling: find the leader bridge: `{quorum_cmd} --status` (LeaderId). Hand over the followers one at a time, "
        f"each with its four steps below, then the leader bridge with its four steps, last. {step_estimate(None, partitions)}",
    ]
    for c in ctrls:
        steps += [
            f"Voter {c.node_id} on {c.host}: stop bridge {c.node_id} cleanly, on its host: `{stop(c)}`; it sends "
            f"SIGTERM, waits for the exit (0) and runs the check of the next step (or `kill -TERM <pid of bridge "
            f"{c.node_id}>` and wait). Its {metadata_dir} is now the Kafka controller's. Never run both at once, "
            f"nor a controller on an empty directory or another voter's. (Time: {stop_time}.)",
            f"Voter {c.node_id}: check its directory; it must exit 0: `{check(c)}`.{zk_opts.note_text()} "
            f"{step_estimate('check', partitions)}",
            f"Voter {c.node_id}: start the Kafka controller on that directory, without formatting it: `{start(c)}`. "
            f"Check: its log says it is a follower (or leader) of the quorum. {step_estimate(None, partitions)}",
            f"Voter {c.node_id}: wait until it has caught up before going on: `{quorum_cmd} --replication` lists "
            f"node {c.node_id} with the leader's LogEndOffset (lag 0) and `{quorum_cmd} --status` names a leader. "
            f"{step_estimate(None, partitions)}",
        ]
    steps += [
        "After the leader bridge (it resigns on SIGTERM, and the Kafka controllers elect one of them): "
        f"`{quorum_cmd} --status` names a Kafka controller with a higher LeaderEpoch, and `{status_cmd}` shows "
        f"dual-write (the new leader claimed /controller and resumed from /migration, without re-migrating). "
        f"{step_estimate('failover', partitions)}",
        "Cold, instead of the rolling steps: stop every bridge, followers first, the leader last ("
        + "; ".join(f"`{stop(c)}`" for c in ctrls)
        + f") (time: {stop_time}); then check every directory as above (time, each: {estimate_text('check', partitions)}); "
        "then start every controller (" + "; ".join(f"`{start(c)}`" for c in ctrls) + "). No controller leads from "
        f"the leader bridge's stop until a Kafka controller is elected and dual-writes; check with `{quorum_cmd} "
        f"--status` and `{status_cmd}`. {step_estimate('failover', partitions)}",
        f"Once every controller is a Kafka controller: restart every broker as a KRaft broker, one at a time, as "
        f"{brokers_to_kraft} says; check after each with `{status_cmd} --format json` (the broker no longer in "
        f"/brokers/ids), and at the end phase kraft-brokers. {broker_count} broker restart(s): not measured "
        "(Kafka's own restart).",
        f"Finalize once every broker is a KRaft broker: `zk2kraft finalize --zk {zk_with} --metadata-dir "
        f"{metadata_dir} " + " ".join(f"--controller-config {handoff_file(c.node_id)}" for c in ctrls)
        + f" --out {FINALIZE_FOLDER}/` on a controller's host (it reads that controller's directory); it refuses "
        "(exit 1, nothing written) while any condition fails, then writes the controllers' files without the "
        "migration settings and prints the order to restart them, each with its check; at the end "
        f"`{status_cmd}` shows phase finalized. There is no rollback after finalization. "
        f"{step_estimate(None, partitions)}",
        f"Rollback, only before finalizing (stop the Kafka controllers first): `zk2kraft rollback --zk {zk_with} "
        f"--metadata-dir {metadata_dir} --broker-meta <each broker's log dir> ... --dry-run`, then without "
        "--dry-run; it refuses after finalization and while a broker's meta.properties would stop it in ZooKeeper "
        "mode (a broker re-formatted during the migration: KAFKA-20762), naming the file to write. Check: "
        f"`{status_cmd}` no longer shows a KRaft controller. {step_estimate(None, partitions)}",
    ]
    return steps
