"""Wake tiering workers when there is work: NOTIFY tierlog_segments on hot_segments changes.

Revision ID: 0015_segment_wakeups
Revises: 0014_transactions
Create Date: 2026-11-29

An idle tiering worker waits on this channel (and a slow safety-net timer) instead of asking
Postgres every second whether a segment is claimable. A segment becomes claimable when it is
registered (INSERT), when a claim is released (state back to 'sealed'), and when the segment
below it is tiered; each of these sends a NOTIFY. Postgres folds identical notifications of
one transaction into one, so a batch of rows wakes a listener once. Deadlines only the clock
reaches (a release's retry_at, a lapsed claim) are the worker's own to wait for.
"""

from __future__ import annotations

from alembic import op

revision = "0015_segment_wakeups"
down_revision: str | None = "0014_transactions"
branch_labels = None
depends_on = None

CHANNEL = "tierlog_segments"  # metadata/segment_registry.py's SEGMENTS_CHANNEL


def upgrade() -> None:
    op.execute(
        f"""
        CREATE FUNCTION tierlog_segments_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('{CHANNEL}', '');
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER hot_segments_registered AFTER INSERT ON hot_segments"
        " FOR EACH STATEMENT EXECUTE FUNCTION tierlog_segments_changed()"
    )
    op.execute(
        "CREATE TRIGGER hot_segments_released_or_tiered AFTER UPDATE OF state ON hot_segments"
        " FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state"
        " AND NEW.state IN ('sealed', 'tiered'))"
        " EXECUTE FUNCTION tierlog_segments_changed()"
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER hot_segments_released_or_tiered ON hot_segments")
    op.execute("DROP TRIGGER hot_segments_registered ON hot_segments")
    op.execute("DROP FUNCTION tierlog_segments_changed()")
