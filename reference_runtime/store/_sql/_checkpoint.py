"""The checkpoint: one commit writes a step's every record, or none."""

from __future__ import annotations

from collections.abc import Callable

from ... import crashpoints
from ..._errors import StaleWriteError
from ..._records import Run
from .._base import Commit
from .._sqlkit import RUN_UPDATE, Tx, check_lease, run_update_params, validate_commit
from . import _rows
from ._base import SqlBase


class SqlCheckpoint(SqlBase):
    """:meth:`Store.commit` over the row writers, fenced and version-checked."""

    def commit(self, commit: Commit) -> None:
        """Apply ``commit`` in one transaction (see :class:`Store`).

        The lease is checked before the version: a fenced worker must stop
        working on the run (LeaseLostError), while a stale one may reload and
        retry. Crash point ``checkpoint_stmt_<n>`` is passed before write
        group *n*, whether or not the group has rows, so that one spec hits
        the same place in every commit: 1 run row, 2 working state,
        3 operations, 4 approvals, 5 audit, 6 inbox acks, 7 memory,
        8 artifacts, child runs and outbox messages; ``checkpoint_stmt_commit``
        after the last group, before the transaction's COMMIT.
        """
        validate_commit(commit)
        run_id = commit.run.run_id
        if "ack-before-commit" in self.bugs and commit.inbox_acked:
            # SEEDED BUG ack-before-commit: the messages are marked processed
            # at once, in their own transaction, "so that nobody handles them
            # twice"; a crash before the state change below loses them.
            with self._write() as tx:
                _rows.ack_inbox(
                    tx, run_id, commit.inbox_acked, commit.now, row_lock=self._row_lock()
                )
        # SEEDED BUG non-atomic-checkpoint: the run row and working state
        # (groups 1-2) commit in one transaction, the records in another.
        split = 2 if "non-atomic-checkpoint" in self.bugs else 8
        with self._write() as tx:
            stored = self._locked_run(tx, run_id)
            # SEEDED BUG no-fencing: the lease is not checked, so any worker
            # that once held it may still write.
            if "no-fencing" not in self.bugs or stored is None:
                check_lease(run_id, stored, commit.worker_id, commit.fencing_token, commit.now)
            assert stored is not None
            # SEEDED BUG no-version-check: the version read is not compared;
            # the last writer wins.
            if (
                stored.state_version != commit.expected_version
                and "no-version-check" not in self.bugs
            ):
                raise StaleWriteError(run_id, commit.expected_version, stored.state_version)
            steps = self._commit_steps(commit, stored)
            for n, step in enumerate(steps[:split], start=1):
                crashpoints.hit(f"checkpoint_stmt_{n}")
                step(tx)
            crashpoints.hit("checkpoint_stmt_commit")
        if split < len(steps):
            with self._write() as tx:
                for n, step in enumerate(steps[split:], start=split + 1):
                    crashpoints.hit(f"checkpoint_stmt_{n}")
                    step(tx)
                crashpoints.hit("checkpoint_stmt_commit")

    def _commit_steps(self, c: Commit, stored: Run) -> list[Callable[[Tx], None]]:
        # Leases are not state: the stored lease fields win over the new row's.
        run = c.run.model_copy(
            update={
                "lease_owner": stored.lease_owner,
                "lease_expiry": stored.lease_expiry,
                "fencing_token": stored.fencing_token,
            }
        )

        def run_row(tx: Tx) -> None:
            tx.run(RUN_UPDATE, *run_update_params(run))

        def state(tx: Tx) -> None:
            if c.state is not None:
                _rows.upsert_state(tx, c.state)

        def artifacts_and_children(tx: Tx) -> None:
            _rows.upsert_artifacts(tx, c.artifacts)
            for child, child_state in c.children:
                _rows.insert_run(tx, child, child_state)
                _rows.append_audit(tx, (_rows.created_event(child, c.worker_id),))
            # Messages to other runs (a child reporting to its parent) commit
            # with the state change that produced them, or not at all.
            for message in c.outbox:
                _rows.insert_inbox(tx, message)

        return [
            run_row,
            state,
            lambda tx: _rows.upsert_operations(tx, c.operations),
            lambda tx: _rows.upsert_approvals(tx, c.approvals),
            lambda tx: _rows.append_audit(tx, c.audit),
            lambda tx: _rows.ack_inbox(
                tx, run.run_id, c.inbox_acked, c.now, row_lock=self._row_lock()
            ),
            lambda tx: _rows.insert_memory(tx, c.memory),
            artifacts_and_children,
        ]
