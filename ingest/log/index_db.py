"""The broker's RocksDB handle (ingest/log/index.py keeps the key layout): opening it (a
corrupt one is set aside and rebuilt from the segments), and reopening it after a write
failed.

RocksDB stops taking writes after one fails (a full disk fails its WAL append) and stays so
until `DB::Resume`, which rocksdict does not expose; closing and opening it again is the
same recovery (the WAL replays every write that was acknowledged). Until then reads go on."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time

from rocksdict import DBCompressionType, Options, Rdict, WriteBatch, WriteOptions

from failures.families import StorageError
from ingest.log.storage_errors import IndexWriteError

log = logging.getLogger("ingest.log.index")


def _options() -> Options:
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.set_max_background_jobs(2)
    opts.set_write_buffer_size(64 << 20)
    opts.set_keep_log_file_num(3)
    opts.set_compression_type(DBCompressionType.lz4())
    return opts


def _open(path: str) -> Rdict:
    db = Rdict(path, _options())
    wo = WriteOptions()
    wo.sync = False
    db.set_write_options(wo)
    return db


class IndexDb:
    """The Rdict of one broker, replaced (never mutated) when it is reopened: readers take
    `db` once per call, so one in flight finishes on the handle it started with. While it is
    being reopened there is none: a reader is answered a retriable storage error, never a
    handle another thread is closing (rocksdict raised "Already mutably borrowed", a 500 to
    followers' fetches in the 30-minute soak, seed 2911)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.recreated = False  # True when a corrupt DB was set aside: every log reindexes
        self.failure: OSError | None = None  # the write that failed, until reopened
        self._reopen_lock = threading.Lock()
        try:
            self._db: Rdict | None = _open(path)
        except Exception as exc:  # rocksdict raises plain Exception for corruption
            if not os.path.isdir(path):
                raise
            aside = f"{path}.corrupt-{int(time.time())}"
            log.error(
                "index unreadable, rebuilding from segments",
                extra={"path": path, "moved_to": aside, "error": str(exc)},
            )
            os.rename(path, aside)
            self._db = _open(path)
            self.recreated = True

    @property
    def db(self) -> Rdict:
        db = self._db
        if db is None:
            raise StorageError(
                "the broker's index is being reopened after a failed write; retry shortly"
            )
        return db

    def write(self, batch: WriteBatch) -> None:
        try:
            self.db.write(batch)
        except Exception as exc:
            err = IndexWriteError(str(exc))
            self.failure = err
            raise err from exc

    def reopen(self) -> None:
        """After a failed write: close the DB and open it again, so that it takes writes.
        Raises while that fails (the disk still full, or a reader still holding the old one:
        RocksDB's lock); the caller tries again later."""
        with self._reopen_lock:
            if self.failure is None:
                return
            old, self._db = self._db, None
            closed = old is None
            if old is not None:
                with contextlib.suppress(Exception):  # its final flush fails as the write did
                    old.close()
                    closed = True
            try:
                self._db = _open(self.path)
            except Exception:
                if not closed:  # still open (a reader holds it): reads go on meanwhile
                    self._db = old
                raise
            log.warning("index reopened after a failed write", extra={"error": str(self.failure)})
            self.failure = None

    def flush(self) -> None:
        self.db.flush()

    def close(self) -> None:
        db = self._db
        if db is None:  # a reopen failed half-way: nothing is open
            return
        try:
            db.flush()
        finally:
            db.close()
