"""Kafka's ZkDelegationTokenMigrationClient write side: a delegation token as Kafka's znode.

Read beside core/src/main/scala/kafka/zk/migration/ZkDelegationTokenMigrationClient.scala
(writeDelegationToken, deleteDelegationToken).
"""

from __future__ import annotations

import logging

from bridge.zk.leadership import (
    CreateRequest,
    DeleteRequest,
    MigrationLeadershipState,
    SetDataRequest,
    raise_for_results,
)
from bridge.zk.operations import DeleteDelegationToken, WriteDelegationToken
from bridge.zk.planning import Plan, PlanContext, Planner, failures, fused
from migrate.errors import InvalidRequestError
from migrate.zk import paths
from migrate.zk.protocol import NONODE
from migrate.zk.znodes.tokens import encode_delegation_token

log = logging.getLogger(__name__)

TOKEN_STORE_PATHS = (paths.DELEGATION_TOKEN, paths.DELEGATION_TOKEN_CHANGES, paths.DELEGATION_TOKENS)
"""KafkaZkClient.createDelegationTokenPaths (parents first)."""


def write_delegation_token(
    ctx: PlanContext, op: WriteDelegationToken, state: MigrationLeadershipState
) -> Plan:
    model = op.zk_token()
    if model is None:
        raise InvalidRequestError("WriteDelegationToken without a token")
    path = paths.token_path(model.token_id)
    data = encode_delegation_token(model)

    def kafka_path(state: MigrationLeadershipState) -> MigrationLeadershipState:
        outcome = ctx.fenced_write([SetDataRequest(path, data)], state)
        if outcome.results[0].code == NONODE:
            # Without token authentication ZooKeeper-mode Kafka never ran createDelegationTokenPaths.
            stores = ctx.notifier.missing_containers(TOKEN_STORE_PATHS)
            outcome = ctx.fenced_write([*stores, CreateRequest(path, data)], state)
            ctx.notifier.learn_created(outcome.results[:-1])
        if not outcome.results[-1].ok:
            what = f"Could not write delegation token {model.token_id}"
            raise_for_results(what, failures(outcome.results), where=ctx.where)
        return outcome.state

    return fused([SetDataRequest(path, data)], kafka_path)


def delete_delegation_token(
    ctx: PlanContext, op: DeleteDelegationToken, state: MigrationLeadershipState
) -> Plan:
    request = DeleteRequest(paths.token_path(op.token_id))

    def kafka_path(state: MigrationLeadershipState) -> MigrationLeadershipState:
        outcome = ctx.fenced_write([request], state)
        result = outcome.results[0]
        if result.code == NONODE:
            log.info("Did not delete delegation token %s since the znode did not exist", op.token_id)
            return state
        if not result.ok:
            raise_for_results(f"Could not delete delegation token {op.token_id}", outcome.results, where=ctx.where)
        return outcome.state

    return fused([request], kafka_path)


PLANNERS: dict[type, Planner] = {
    WriteDelegationToken: write_delegation_token,
    DeleteDelegationToken: delete_delegation_token,
}
