"""Initial race schema: meetings, races, runners, odds snapshots, results, dividends, scrapes, checkpoints, movers.

Revision ID: 0001
Revises: (none)
Create Date: 2026-11-29 08:40:40.651607
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('meetings',
    sa.Column('meeting_id', sa.Text(), nullable=False),
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('meeting_date', sa.Date(), nullable=False),
    sa.Column('category', sa.Text(), nullable=False),
    sa.Column('category_name', sa.Text(), nullable=True),
    sa.Column('country', sa.Text(), nullable=False),
    sa.Column('state', sa.Text(), nullable=True),
    sa.Column('track_condition', sa.Text(), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('meeting_id', name=op.f('pk_meetings'))
    )
    op.create_index(op.f('ix_meetings_meeting_date'), 'meetings', ['meeting_date'], unique=False)
    op.create_table('scrapes',
    sa.Column('id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('call_key', sa.Text(), nullable=False),
    sa.Column('endpoint', sa.Text(), nullable=False),
    sa.Column('params', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('outcome', sa.Text(), nullable=False),
    sa.Column('status_code', sa.Integer(), nullable=True),
    sa.Column('duration_ms', sa.Float(), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('items', sa.Integer(), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('run_id', sa.Text(), nullable=True),
    sa.Column('recorded_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_scrapes')),
    sa.UniqueConstraint('call_key', name=op.f('uq_scrapes_call_key'))
    )
    op.create_index(op.f('ix_scrapes_run_id'), 'scrapes', ['run_id'], unique=False)
    op.create_index(op.f('ix_scrapes_started_at'), 'scrapes', ['started_at'], unique=False)
    op.create_table('races',
    sa.Column('race_id', sa.Text(), nullable=False),
    sa.Column('meeting_id', sa.Text(), nullable=False),
    sa.Column('race_number', sa.Integer(), nullable=False),
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('start_time', sa.DateTime(timezone=True), nullable=False),
    sa.Column('status', sa.Text(), nullable=False),
    sa.Column('distance', sa.Integer(), nullable=True),
    sa.Column('track_condition', sa.Text(), nullable=True),
    sa.Column('weather', sa.Text(), nullable=True),
    sa.Column('country', sa.Text(), nullable=True),
    sa.Column('actual_start', sa.DateTime(timezone=True), nullable=True),
    sa.Column('previous_start_time', sa.DateTime(timezone=True), nullable=True),
    sa.Column('start_time_changed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['meeting_id'], ['meetings.meeting_id'], name=op.f('fk_races_meeting_id_meetings')),
    sa.PrimaryKeyConstraint('race_id', name=op.f('pk_races'))
    )
    op.create_index(op.f('ix_races_meeting_id'), 'races', ['meeting_id'], unique=False)
    op.create_index(op.f('ix_races_start_time'), 'races', ['start_time'], unique=False)
    op.create_index(op.f('ix_races_status_start_time'), 'races', ['status', 'start_time'], unique=False)
    op.create_table('dividends',
    sa.Column('race_id', sa.Text(), nullable=False),
    sa.Column('dividend_id', sa.Text(), nullable=False),
    sa.Column('product_name', sa.Text(), nullable=False),
    sa.Column('status', sa.Text(), nullable=False),
    sa.Column('dividend', sa.Float(), nullable=True),
    sa.Column('pool_size', sa.Float(), nullable=True),
    sa.Column('positions', postgresql.JSONB(astext_type=sa.Text()), nullable=False),
    sa.Column('description', sa.Text(), nullable=True),
    sa.Column('tote', sa.Text(), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['race_id'], ['races.race_id'], name=op.f('fk_dividends_race_id_races'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('race_id', 'dividend_id', name=op.f('pk_dividends'))
    )
    op.create_index(op.f('ix_dividends_race_id_status'), 'dividends', ['race_id', 'status'], unique=False)
    op.create_table('market_movers',
    sa.Column('race_id', sa.Text(), nullable=False),
    sa.Column('runner_number', sa.Integer(), nullable=False),
    sa.Column('meeting_date', sa.Date(), nullable=False),
    sa.Column('win_t60', sa.Float(), nullable=True),
    sa.Column('win_t15', sa.Float(), nullable=True),
    sa.Column('finish_position', sa.Integer(), nullable=True),
    sa.Column('move_pct', sa.Float(), nullable=True),
    sa.Column('computed_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['race_id'], ['races.race_id'], name=op.f('fk_market_movers_race_id_races'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('race_id', 'runner_number', name=op.f('pk_market_movers'))
    )
    op.create_index(op.f('ix_market_movers_meeting_date'), 'market_movers', ['meeting_date'], unique=False)
    op.create_table('odds_snapshots',
    sa.Column('id', sa.BigInteger(), sa.Identity(always=False), nullable=False),
    sa.Column('race_id', sa.Text(), nullable=False),
    sa.Column('runner_number', sa.Integer(), nullable=False),
    sa.Column('checkpoint', sa.Text(), nullable=False),
    sa.Column('fixed_win', sa.Float(), nullable=True),
    sa.Column('fixed_place', sa.Float(), nullable=True),
    sa.Column('pool_win', sa.Float(), nullable=True),
    sa.Column('pool_place', sa.Float(), nullable=True),
    sa.Column('is_scratched', sa.Boolean(), server_default=sa.text('false'), nullable=False),
    sa.Column('captured_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('run_id', sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(['race_id'], ['races.race_id'], name=op.f('fk_odds_snapshots_race_id_races'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_odds_snapshots')),
    sa.UniqueConstraint('race_id', 'runner_number', 'checkpoint', name=op.f('uq_odds_snapshots_race_id_runner_number_checkpoint'))
    )
    op.create_index(op.f('ix_odds_snapshots_checkpoint_captured_at'), 'odds_snapshots', ['checkpoint', 'captured_at'], unique=False)
    op.create_table('race_checkpoints',
    sa.Column('race_id', sa.Text(), nullable=False),
    sa.Column('checkpoint', sa.Text(), nullable=False),
    sa.Column('scheduled_for', sa.DateTime(timezone=True), nullable=False),
    sa.Column('requested_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.Column('run_id', sa.Text(), nullable=True),
    sa.Column('state', sa.Text(), server_default='requested', nullable=False),
    sa.Column('note', sa.Text(), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['race_id'], ['races.race_id'], name=op.f('fk_race_checkpoints_race_id_races'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('race_id', 'checkpoint', name=op.f('pk_race_checkpoints'))
    )
    op.create_table('results',
    sa.Column('race_id', sa.Text(), nullable=False),
    sa.Column('runner_number', sa.Integer(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('name', sa.Text(), nullable=True),
    sa.Column('entrant_id', sa.Text(), nullable=True),
    sa.Column('margin_length', sa.Float(), nullable=True),
    sa.Column('is_provisional', sa.Boolean(), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['race_id'], ['races.race_id'], name=op.f('fk_results_race_id_races'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('race_id', 'runner_number', name=op.f('pk_results'))
    )
    op.create_table('runners',
    sa.Column('race_id', sa.Text(), nullable=False),
    sa.Column('runner_number', sa.Integer(), nullable=False),
    sa.Column('entrant_id', sa.Text(), nullable=False),
    sa.Column('name', sa.Text(), nullable=False),
    sa.Column('barrier', sa.Integer(), nullable=True),
    sa.Column('jockey', sa.Text(), nullable=True),
    sa.Column('trainer_name', sa.Text(), nullable=True),
    sa.Column('is_scratched', sa.Boolean(), server_default=sa.text('false'), nullable=False),
    sa.Column('is_late_scratched', sa.Boolean(), server_default=sa.text('false'), nullable=False),
    sa.Column('scratch_time', sa.DateTime(timezone=True), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), server_default=sa.text('now()'), nullable=False),
    sa.ForeignKeyConstraint(['race_id'], ['races.race_id'], name=op.f('fk_runners_race_id_races'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('race_id', 'runner_number', name=op.f('pk_runners'))
    )


def downgrade() -> None:
    op.drop_table('runners')
    op.drop_table('results')
    op.drop_table('race_checkpoints')
    op.drop_index(op.f('ix_odds_snapshots_checkpoint_captured_at'), table_name='odds_snapshots')
    op.drop_table('odds_snapshots')
    op.drop_index(op.f('ix_market_movers_meeting_date'), table_name='market_movers')
    op.drop_table('market_movers')
    op.drop_index(op.f('ix_dividends_race_id_status'), table_name='dividends')
    op.drop_table('dividends')
    op.drop_index(op.f('ix_races_status_start_time'), table_name='races')
    op.drop_index(op.f('ix_races_start_time'), table_name='races')
    op.drop_index(op.f('ix_races_meeting_id'), table_name='races')
    op.drop_table('races')
    op.drop_index(op.f('ix_scrapes_started_at'), table_name='scrapes')
    op.drop_index(op.f('ix_scrapes_run_id'), table_name='scrapes')
    op.drop_table('scrapes')
    op.drop_index(op.f('ix_meetings_meeting_date'), table_name='meetings')
    op.drop_table('meetings')
