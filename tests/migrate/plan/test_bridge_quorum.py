"""`zk2kraft plan --controllers`: the bridges' `--voters` with one `bridge run` command per bridge, and the brokers'
controller.quorum.voters, read and written in Kafka's syntax."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from migrate.kraft.quorum_voters import QuorumVoter
from migrate.plan.checks import run_checks
from migrate.plan.inputs import BrokerConfig, PlanInputs, parse_controllers
from migrate.plan.phases import Plan, build_plan
from migrate.plan.properties import parse_properties_text
from migrate.plan.render import plan_markdown, summary_lines
from tests.support.bridge import record_bridge_runs
from tests.support.plan import broker_properties, healthy_model

CONTROLLERS = "3000@ctrl1:9093,3001@ctrl2:9093,3002@[fd00::3]:9093"


def plan_for(tmp_path: Path, controllers: str, quorum: str = "static") -> tuple[Plan, dict[str, str]]:
    brokers = []
    for broker_id in (1, 2, 3):
        text = broker_properties(broker_id, "zk1:2181/kafka", {})
        brokers.append(BrokerConfig(parse_properties_text(text, str(tmp_path / f"server-{broker_id}.properties"))))
    inputs = PlanInputs(
        model=healthy_model(),
        zk_origin="test",
        zk_chroot="/kafka",
        zk_connect="zk1:2181/kafka",
        brokers=brokers,
        controllers=parse_controllers(controllers),
        quorum=quorum,
    )
    return build_plan(inputs, run_checks(inputs))


def bridge_commands(plan: Plan) -> list[str]:
    steps = next(p for p in plan.phases if p.id == "provision-controllers").steps
    return [step.split("`")[1] for step in steps if step.startswith("Bridge ")]


def test_each_bridge_gets_its_command_with_the_same_voters_and_bridge_run_accepts_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan, _files = plan_for(tmp_path, CONTROLLERS)
    assert plan.bridge_voters == CONTROLLERS
    commands = bridge_commands(plan)
    assert len(commands) == 3 and all(f"--voters {CONTROLLERS}" in command for command in commands)
    told = record_bridge_runs(monkeypatch)
    for command in commands:
        argv = shlex.split(command.replace("/var/lib/zk2kraft/meta", str(tmp_path / "meta")))[1:]
        result = CliRunner().invoke(cli, [*argv, "--format-empty-voter-directory"])
        assert result.exit_code == 0, result.output
    assert [config.node_id for config in told] == [3000, 3001, 3002]
    assert told[2].quorum_voters[3002] == QuorumVoter(3002, "fd00::3", 9093)
    steps = "\n".join(next(p for p in plan.phases if p.id == "provision-controllers").steps)
    assert "--format-empty-voter-directory on each; leave it out of every later start" in steps


def test_the_brokers_get_the_same_controller_quorum_voters(tmp_path: Path) -> None:
    plan, files = plan_for(tmp_path, CONTROLLERS)
    line = f"controller.quorum.voters={CONTROLLERS}"
    for broker_id in (1, 2, 3):
        assert line in files[f"2-brokers-migration-mode/broker-{broker_id}.properties"].splitlines()
    assert f"`{line}` on the brokers" in plan_markdown(plan).split("## Preflight checks")[0]
    assert any(line in shown for shown in summary_lines(plan))
    assert json.loads(plan.model_dump_json())["bridge_voters"] == CONTROLLERS
    # With the default dynamic quorum the broker files use bootstrap servers: the step says what the bridges need.
    dynamic, files = plan_for(tmp_path, CONTROLLERS, quorum="dynamic")
    steps = "\n".join(next(p for p in dynamic.phases if p.id == "provision-controllers").steps)
    assert f"the brokers need `{line}` in place of controller.quorum.bootstrap.servers" in steps
    assert "--quorum static" in steps


def test_a_single_controller_is_one_bridge_without_voters(tmp_path: Path) -> None:
    plan, _files = plan_for(tmp_path, "3000@ctrl1:9093")
    steps = next(p for p in plan.phases if p.id == "provision-controllers").steps
    bridge = next(step for step in steps if "zk2kraft bridge run" in step)
    assert "--node-id 3000 --listen 0.0.0.0:9093" in bridge and "--voters" not in bridge
    assert plan.bridge_voters == "3000@ctrl1:9093"


@pytest.mark.parametrize(
    ("controllers", "told"),
    [
        ("3000@ctrl1:9093,3000@ctrl2:9093", "--controllers: node id 3000 is given twice"),
        ("3000@ctrl1:9093,3001@ctrl2", "--controllers: entry '3001@ctrl2': what follows '@' is not HOST:PORT"),
        ("3000@0.0.0.0:9093", "the host '0.0.0.0' is the wildcard address"),
    ],
)
def test_controllers_kafka_would_refuse_are_refused_before_zookeeper_is_read(controllers: str, told: str) -> None:
    # Nothing listens at 127.0.0.1:1: reading ZooKeeper would be exit 5.
    result = CliRunner().invoke(cli, ["plan", "--zk", "127.0.0.1:1", "--controllers", controllers])
    assert result.exit_code == 2, result.output
    assert told in result.output
