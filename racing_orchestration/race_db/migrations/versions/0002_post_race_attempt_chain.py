"""Post-race attempt chain in the ledger: attempt number, when the next attempt is due, and the previous attempt's run.

The post-race check no longer waits inside a live run: a run that finds the race still Interim records
`next_attempt_at` and ends; the post-race sensor requests the next attempt when it falls due (index below).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('race_checkpoints', sa.Column('attempt', sa.Integer(), server_default='0', nullable=False))
    op.add_column('race_checkpoints', sa.Column('next_attempt_at', sa.DateTime(timezone=True), nullable=True))
    op.add_column('race_checkpoints', sa.Column('previous_run_id', sa.Text(), nullable=True))
    op.create_index(op.f('ix_race_checkpoints_state_next_attempt_at'), 'race_checkpoints',
                    ['state', 'next_attempt_at'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_race_checkpoints_state_next_attempt_at'), table_name='race_checkpoints')
    op.drop_column('race_checkpoints', 'previous_run_id')
    op.drop_column('race_checkpoints', 'next_attempt_at')
    op.drop_column('race_checkpoints', 'attempt')
