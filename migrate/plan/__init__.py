"""The rolling-upgrade planner: preflight checks, the phase plan, generated configs, rollback and status logic.

Pure logic over migrate/ only (ZooKeeper model, Java properties, metadata.version table); the CLI glue
lives in cli/plan_cmd.py, cli/rollback_cmd.py, cli/status_cmd.py and cli/finalize_cmd.py.
"""
