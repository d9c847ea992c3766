#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# bench/wal_breakdown.py [EXTRA_SQL]: which b-trees each commit of the outbox
# writes (docs/library.md, "Flash wear"). Builds the device schema from the
# DDL in src/storage/database.cpp (version 1 and every revision, plus
# EXTRA_SQL to try a change), runs bench_write's three cases with the
# library's SQL (one event per transaction; 100 per transaction; an event's
# whole life: enqueued 100 per transaction, sent_through per batch of 256,
# acknowledged per 64, confirmed and deleted a batch behind, the first half
# sent twice), with wal_autocheckpoint off, and after each commit reads the
# new frames of the -wal and names the b-tree of each page (dbstat; "page1"
# is the header page, "ptrmap/free" pointer-map and freelist pages).
# Prints frames per commit and -wal bytes per event by b-tree. The -wal
# only: a checkpoint writes each distinct page once more, and /proc/self/io
# (bench_write) counts whole 4 KiB kernel pages. AV=NONE: auto_vacuum off.
# COMPACT=1: a row shape no release writes (a 16-byte time-ordered binary id,
# one number for the stream's topic, type and content type, a boot number)
# with revision 4's indexes on the pending rows, for the estimate in
# docs/library.md ("Flash wear").
import collections
import os
import re
import sqlite3
import struct
import sys
import tempfile
import time
import uuid

src = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'src', 'storage', 'database.cpp')).read()
def block(name):
    return re.search(r'constexpr const char\* %s = R"sql\((.*?)\)sql"' % name, src, re.S).group(1)
V1 = block('schema_v1')
REVISIONS = ''.join(block(name) for name in sorted(set(re.findall(r'constexpr const char\* (schema_revision_\d+) =', src))))

COMPACT = os.environ.get('COMPACT') == '1'
COMPACT_DDL = '''
CREATE TABLE outbox_meta (key TEXT PRIMARY KEY, value ANY NOT NULL) WITHOUT ROWID;
CREATE TABLE outbox (sequence INTEGER PRIMARY KEY AUTOINCREMENT, event_id BLOB NOT NULL UNIQUE,
  stream_ref INTEGER NOT NULL, payload BLOB NOT NULL, attributes TEXT, priority INTEGER NOT NULL DEFAULT 1,
  created_at INTEGER NOT NULL, created_boot INTEGER NOT NULL, created_mono INTEGER NOT NULL, ttl_ms INTEGER,
  attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT, published_at INTEGER, published_boot INTEGER,
  published_mono INTEGER, acked_at INTEGER);
CREATE INDEX outbox_pending ON outbox(sequence) WHERE published_at IS NULL;
CREATE INDEX outbox_unconfirmed ON outbox(sequence) WHERE published_at IS NULL AND acked_at IS NOT NULL;
CREATE INDEX outbox_critical ON outbox(sequence) WHERE published_at IS NULL AND priority = 0;
CREATE INDEX outbox_low ON outbox(sequence) WHERE published_at IS NULL AND priority = 2;
INSERT INTO outbox_meta VALUES ('published_total', 0), ('confirmed_through', 0), ('sent_through', 0);
'''

def make(path, page=1024, extra='', autovac=os.environ.get('AV','INCREMENTAL')):
    for s in ('', '-wal', '-shm'):
        try: os.remove(path + s)
        except FileNotFoundError: pass
    db = sqlite3.connect(path, isolation_level=None)
    db.execute('PRAGMA page_size=%d' % page); db.execute('PRAGMA auto_vacuum=%s' % autovac)
    db.execute('PRAGMA journal_mode=WAL')
    schema = COMPACT_DDL if COMPACT else V1 + "INSERT INTO outbox_meta VALUES('schema_version',1),('published_total',0),('dropped_total',0);" + REVISIONS
    db.executescript('BEGIN;' + schema + extra + 'COMMIT;')
    db.execute('PRAGMA wal_checkpoint(TRUNCATE)')
    return db

class Wal:
    def __init__(self, path, db):
        self.path = path + '-wal'; self.db = db; self.off = 32
        self.page = db.execute('PRAGMA page_size').fetchone()[0]
        self.count = collections.Counter(); self.commits = 0; self.frames = 0
    def owners(self):
        return {p: n for p, n in self.db.execute('SELECT pageno, name FROM dbstat')}
    def after_commit(self):
        data = open(self.path, 'rb').read()
        pages = []
        while self.off + 24 + self.page <= len(data):
            pg, commit = struct.unpack('>II', data[self.off:self.off+8])
            pages.append(pg); self.off += 24 + self.page
            if commit: break
        own = self.owners(); self.commits += 1
        for pg in pages:
            self.frames += 1
            n = 'page1' if pg == 1 else own.get(pg, 'ptrmap/free')
            self.count[n] += 1
    def report(self, events, label):
        print('%s: %d commits, %.2f frames/commit, %.1f WAL bytes/event' % (label, self.commits, self.frames / self.commits, self.frames * (self.page + 24) / events))
        for n, c in self.count.most_common(): print('   %-22s %.3f frames/commit  %.1f bytes/event' % (n, c / self.commits, c * (self.page+24) / events))

BOOT = str(uuid.uuid4()); n_id = [0]
INS = ("INSERT INTO outbox (event_id, topic, type, content_type, payload, attributes, priority, created_at, created_boot, created_mono, ttl_ms) VALUES (?,?,?,?,?,?,?,?,?,?,?)")
if os.environ.get('COMPACT') == '1':
    INS = ("INSERT INTO outbox (event_id, stream_ref, payload, attributes, priority, created_at, created_boot, created_mono, ttl_ms) VALUES (?,?,?,?,?,?,?,?,?)")
PAY = bytes((97 + (i*7) % 26) for i in range(120))
def row():
    n_id[0] += 1
    if COMPACT:
        return (n_id[0].to_bytes(8, 'big') + os.urandom(8), 1, PAY, None, 1, int(time.time()*1000), 1, int(time.monotonic()*1000), None)
    return ('0190b3c4-0000-7000-8000-%012d' % n_id[0], 'devices/bench/events/reading', 'bench.reading', 'application/octet-stream', PAY, None, 1, int(time.time()*1000), BOOT, int(time.monotonic()*1000), None)

def insert_case(per_txn, txns, extra='', page=1024):
    p = os.path.join(WORK, 'm.db'); db = make(p, page, extra)
    db.execute('PRAGMA wal_autocheckpoint=0')  # count WAL only; checkpoint separately
    w = Wal(p, db)
    for t in range(txns):
        db.execute('BEGIN IMMEDIATE')
        for r in range(per_txn): db.execute(INS, row())
        db.execute('COMMIT'); w.after_commit()
    w.report(per_txn * txns, 'insert %d/txn' % per_txn)
    # checkpoint cost: distinct pages in the WAL
    return db, w

def lifetime(events=4000, extra=''):
    p = os.path.join(WORK, 'm.db'); db = make(p, 1024, extra); db.execute('PRAGMA wal_autocheckpoint=0')
    w = Wal(p, db); phases = collections.OrderedDict()
    def commit(ph):
        db.execute('COMMIT'); before = w.frames; w.after_commit(); phases[ph] = phases.get(ph, 0) + w.frames - before
    for t in range(events // 100):
        db.execute('BEGIN IMMEDIATE')
        for r in range(100): db.execute(INS, row())
        commit('enqueue')
    seqs = [r[0] for r in db.execute('SELECT sequence FROM outbox ORDER BY sequence')]
    def send(lo, hi, confirm_prev):
        for b in range(lo, hi, 256):
            batch = seqs[b:min(b+256, hi)]
            db.execute('BEGIN IMMEDIATE'); db.execute("UPDATE outbox_meta SET value = max(value, ?) WHERE key='sent_through'", (batch[-1],)); commit('sent_through')
            for a in range(0, len(batch), 64):
                db.execute('BEGIN IMMEDIATE')
                for s in batch[a:a+64]: db.execute('UPDATE outbox SET acked_at = 1 WHERE sequence = ? AND published_at IS NULL AND acked_at IS NULL', (s,))
                commit('ack')
            if confirm_prev is not None and b > lo:
                db.execute('BEGIN IMMEDIATE')
                db.execute('DELETE FROM outbox WHERE published_at IS NULL AND acked_at IS NOT NULL AND sequence <= ?', (seqs[b-1],))
                db.execute("UPDATE outbox_meta SET value = value + 1 WHERE key='published_total'")
                db.execute("UPDATE outbox_meta SET value = max(value, ?) WHERE key='confirmed_through'", (seqs[b-1],))
                commit('confirm+delete')
    send(0, events // 2, None)
    send(0, len(seqs), True)  # resend of the first half (cursor), then rest
    db.execute('BEGIN IMMEDIATE'); db.execute('DELETE FROM outbox WHERE published_at IS NULL AND acked_at IS NOT NULL'); commit('confirm+delete')
    tot = w.frames
    print('lifetime: %.1f WAL bytes/event, frames by phase:' % (tot * 1048 / events), {k: round(v*1048/events,1) for k, v in phases.items()})
    for n, c in w.count.most_common(): print('   %-22s %.1f bytes/event' % (n, c * 1048 / events))

if __name__ == '__main__':
    WORK = tempfile.mkdtemp(prefix='wal-breakdown-')
    extra = sys.argv[1] if len(sys.argv) > 1 else ''
    insert_case(1, 600, extra)
    insert_case(100, 30, extra)
    lifetime(4000, extra)
