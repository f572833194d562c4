"""Brokers and clients at once against one bridge controller: Kafka's invariants hold after every step.

A few seeds of `tests.support.stress` against the real Kafka 3.5 cluster's tree (brokers 1, 2, 3). A failure
prints its seed; `ZK2KRAFT_STRESS_SEED=<seed>` runs that seed alone, `ZK2KRAFT_STRESS_STEPS` sets the steps.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from migrate.zk.load import load_tree
from migrate.zk.tree import ZTree
from tests.support.stress import SEED_ENV, StressKit, seed_from_env, steps_from_env, stressed_cluster

SEEDS = [int(os.environ[SEED_ENV])] if os.environ.get(SEED_ENV) else [1, 2, 3]
STEPS = 50


def broker_ids(zk_client: KazooClient) -> list[int]:
    try:
        return sorted(int(b) for b in zk_client.get_children("/brokers/ids"))
    except NoNodeError:
        return []


@pytest.mark.parametrize("seed", SEEDS)
def test_kafkas_invariants_hold_while_brokers_and_clients_act_concurrently(
    seed: int, zk_client: KazooClient, zk_connect: str, real_tree: ZTree, tmp_path: Path
) -> None:
    load_tree(zk_client, real_tree)
    with stressed_cluster(zk_connect, tmp_path / "meta", broker_ids(zk_client)) as (controller, brokers):
        report = StressKit(controller, brokers, zk_client, seed_from_env(seed)).run(steps_from_env(STEPS))
    assert not report.violations, report.summary()
    assert report.steps == steps_from_env(STEPS), report.summary()
    # The run did what it is for: many requests, both kinds of change answered without error.
    assert report.requests > report.steps
    assert report.answers["AlterPartition none"] > 0 and report.answers["CreateTopics none"] > 0
