"""Wake duties when there is work: NOTIFY on hot_segments and cold_files changes.

Revision ID: 0015_segment_wakeups
Revises: 0014_transactions
Create Date: 2026-11-29

An idle tiering worker waits on this channel (and a slow safety-net timer) instead of asking
Postgres every second whether a segment is claimable. A segment becomes claimable when it is
registered (INSERT), when a claim is released (state back to 'sealed'), and when the segment
below it is tiered; each of these sends a NOTIFY. Postgres folds identical notifications of
one transaction into one, so a batch of rows wakes a listener once. Deadlines only the clock
reaches (a release's retry_at, a lapsed claim) are the worker's own to wait for.

Brokers keep each hosted partition's cold manifest view (tiered end, cold log start) and read
it again only when `tierlog_cold_files` names the partition (payload `topic_id:partition`):
when a cold file is committed or removed, the only changes that move either offset.
"""

from __future__ import annotations

from alembic import op

revision = "0015_segment_wakeups"
down_revision: str | None = "0014_transactions"
branch_labels = None
depends_on = None

CHANNEL = "tierlog_segments"  # metadata/segment_registry.py's SEGMENTS_CHANNEL
COLD_CHANNEL = "tierlog_cold_files"  # metadata/cold_manifest.py's COLD_FILES_CHANNEL


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
    op.execute(
        f"""
        CREATE FUNCTION tierlog_cold_files_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('{COLD_CHANNEL}', NEW.topic_id::text || ':' || NEW.partition);
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER cold_files_committed_or_removed"
        " AFTER INSERT OR UPDATE OF state ON cold_files FOR EACH ROW"
        " WHEN (NEW.state IN ('committed', 'delete_started', 'deleted'))"
        " EXECUTE FUNCTION tierlog_cold_files_changed()"
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER cold_files_committed_or_removed ON cold_files")
    op.execute("DROP FUNCTION tierlog_cold_files_changed()")
    op.execute("DROP TRIGGER hot_segments_released_or_tiered ON hot_segments")
    op.execute("DROP TRIGGER hot_segments_registered ON hot_segments")
    op.execute("DROP FUNCTION tierlog_segments_changed()")
