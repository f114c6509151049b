"""Checkpoint re-requests in the ledger: how often a claimed checkpoint was requested again, and under which run key.

A run that fails before it takes its checkpoint (e.g. the code location cannot reach Postgres) leaves the row
`requested`; Dagster's run-key dedupe then blocks that key for good, so the sensor requests it again under
`<key>:retry<n>`, at most a few times, and records each re-request here. The same holds for a row left `running`
by a run that died; `checked_at` is when the sensor last looked at such a row (requested_at stays the request time).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 14:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('race_checkpoints', sa.Column('relaunches', sa.Integer(), server_default='0', nullable=False))
    op.add_column('race_checkpoints', sa.Column('run_key', sa.Text(), nullable=True))
    op.add_column('race_checkpoints', sa.Column('checked_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column('race_checkpoints', 'checked_at')
    op.drop_column('race_checkpoints', 'run_key')
    op.drop_column('race_checkpoints', 'relaunches')
