"""The bloomkv Python extension, as a user meets it.

Run by ctest (python_test) with build/python on sys.path:
    PYTHONPATH=build/python /usr/bin/python3 -m pytest -q tests/python
Deterministic: every random choice comes from a seeded random.Random.
"""
import bisect
import gc
import os
import pickle
import random
import sys
import threading
import tracemalloc

import pytest

import bloomkv

UNDER_ASAN = bool(os.environ.get("BKV_PYTHON_ASAN"))


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "db")


@pytest.fixture
def db(path):
    d = bloomkv.DB(path, create_if_missing=True)
    yield d
    d.close()


def fill(db, n, seed=1):
    rng = random.Random(seed)
    model = {}
    for i in range(n):
        k = b"k%06d" % rng.randrange(n * 2)
        v = b"v%d" % i
        db.put(k, v)
        model[k] = v
    return model


# ---- basic operations and argument handling -------------------------------

def test_put_get_delete(db):
    assert db.get(b"a") is None
    assert db.get(b"a", b"dflt") == b"dflt"
    db.put(b"a", b"1")
    db.put(b"b\x00c", b"\x00\xff")
    assert db.get(b"a") == b"1"
    assert db.get(b"b\x00c") == b"\x00\xff"
    db.put(b"a", b"2", sync=True)
    assert db.get(b"a") == b"2"
    db.delete(b"a")
    assert db.get(b"a") is None
    db.delete(b"never-there")
    db.put(b"", b"empty key")
    assert db.get(b"") == b"empty key"


def test_bytes_like_arguments(db):
    db.put(bytearray(b"k1"), memoryview(b"v1"))
    assert db.get(memoryview(b"k1")) == b"v1"
    assert db.get(bytearray(b"k1")) == b"v1"
    with pytest.raises(TypeError):
        db.put("text", b"v")
    with pytest.raises(TypeError):
        db.get(12)
    with pytest.raises(TypeError):
        db.put(b"k", None)


def test_open_errors(path):
    with pytest.raises(bloomkv.InvalidArgumentError, match="create_if_missing"):
        bloomkv.DB(path)
    bloomkv.DB(path, create_if_missing=True).close()
    with pytest.raises(bloomkv.InvalidArgumentError):
        bloomkv.DB(path, error_if_exists=True)
    with pytest.raises(bloomkv.InvalidArgumentError, match="write_buffer_size"):
        bloomkv.DB(path, write_buffer_size=10)
    with pytest.raises(bloomkv.InvalidArgumentError, match="filter"):
        bloomkv.DB(path, filter="nope")
    with pytest.raises(bloomkv.InvalidArgumentError, match="zstd"):
        bloomkv.DB(path, compression="gzip")
    with pytest.raises(bloomkv.InvalidArgumentError):
        bloomkv.DB(path, block_cache_size=-1)
    with pytest.raises(TypeError):
        bloomkv.DB(path, no_such_option=1)


def test_exception_hierarchy(path):
    assert issubclass(bloomkv.CorruptionError, bloomkv.Error)
    assert issubclass(bloomkv.IOError, bloomkv.Error) and issubclass(bloomkv.IOError, OSError)
    assert issubclass(bloomkv.InvalidArgumentError, bloomkv.Error)
    assert issubclass(bloomkv.BusyError, bloomkv.IOError)
    with bloomkv.DB(path, create_if_missing=True):
        with pytest.raises(bloomkv.BusyError, match="in use"):
            bloomkv.DB(path)
        with pytest.raises(OSError):
            bloomkv.DB(path)


def test_options_round_trip(path):
    with bloomkv.DB(path, create_if_missing=True, filter="ribbon", bits_per_key=8, compression="zstd",
                    write_buffer_size=1 << 16, block_size=1024, block_cache_size=1 << 20, max_open_files=50,
                    compaction_style="tiered", wal_recovery="point_in_time", file_mode=0o600) as d:
        model = fill(d, 3000)
        d.flush()
        for k, v in model.items():
            assert d.get(k) == v
    assert (os.stat(os.path.join(path, "CURRENT")).st_mode & 0o777) == 0o600


def test_filter_memory_options(path):
    with bloomkv.DB(path, create_if_missing=True, write_buffer_size=1 << 16, partition_filters=True,
                    filter_memory_budget=4000) as d:
        model = fill(d, 5000)
        d.flush()
        for k, v in model.items():
            assert d.get(k) == v
        assert d.get(b"absent") is None
        assert "sized by filter_memory_budget" in d.property("bloomkv.stats")
        assert d.stats()["filter-partitions-read"] > 0
    assert bloomkv.check(path) == []
    with pytest.raises(bloomkv.InvalidArgumentError):
        bloomkv.DB(path, filter_memory_budget=-1)


def test_context_manager_and_closed(path):
    with bloomkv.DB(path, create_if_missing=True) as d:
        assert not d.closed
        d.put(b"k", b"v")
        assert d.path == path
    assert d.closed
    d.close()  # a second close is harmless
    with pytest.raises(RuntimeError, match="closed"):
        d.get(b"k")
    with pytest.raises(RuntimeError):
        d.put(b"k", b"v")
    with bloomkv.DB(path) as d2:
        assert d2.get(b"k") == b"v"
    assert "closed" in repr(d2)


def test_persistence_after_reopen(path):
    with bloomkv.DB(path, create_if_missing=True, write_buffer_size=1 << 16) as d:
        model = fill(d, 5000)
    with bloomkv.DB(path) as d:
        assert dict(d.iterator()) == model


# ---- multi_get -------------------------------------------------------------

def test_multi_get(db):
    model = fill(db, 2000)
    db.flush()
    rng = random.Random(7)
    keys = [b"k%06d" % rng.randrange(5000) for _ in range(300)]
    assert db.multi_get(keys) == [model.get(k) for k in keys]
    assert db.multi_get(keys, b"-") == [model.get(k, b"-") for k in keys]
    assert db.multi_get([]) == []
    assert db.multi_get((bytearray(b"nope"),)) == [None]
    with pytest.raises(TypeError):
        db.multi_get([b"a", "b"])


# ---- write batches --------------------------------------------------------

def test_write_batch(db):
    db.put(b"gone", b"x")
    with db.write_batch() as wb:
        wb.put(b"a", b"1")
        wb.put(b"b", b"2")
        wb.delete(b"gone")
        assert len(wb) == 3
        assert db.get(b"a") is None  # nothing before the block ends
    assert db.get(b"a") == b"1" and db.get(b"b") == b"2" and db.get(b"gone") is None


def test_write_batch_transaction_discards_on_exception(db):
    with pytest.raises(ZeroDivisionError):
        with db.write_batch(transaction=True) as wb:
            wb.put(b"a", b"1")
            1 / 0
    assert db.get(b"a") is None
    # By default (plyvel's rule) the batch is written all the same.
    with pytest.raises(ZeroDivisionError):
        with db.write_batch() as wb:
            wb.put(b"a", b"1")
            1 / 0
    assert db.get(b"a") == b"1"


def test_write_batch_append_and_size(db):
    a, b = db.write_batch(), db.write_batch()
    a.put(b"a", b"1")
    empty = b.approximate_size()
    b.put(b"b", b"2")
    b.delete(b"gone")
    assert b.approximate_size() > empty
    a.append(b)
    assert len(a) == 3 and len(b) == 2
    a.append(a)  # itself: its operations twice
    assert len(a) == 6
    with pytest.raises(TypeError):
        a.append(b"not a batch")
    a.write()
    assert db.get(b"a") == b"1" and db.get(b"b") == b"2"


def test_read_only(tmp_path):
    path = str(tmp_path / "ro")
    with bloomkv.DB(path, create_if_missing=True) as db:
        db.put(b"k", b"v")
    def files():
        return sorted((n, os.stat(os.path.join(path, n)).st_mtime_ns) for n in os.listdir(path))
    before = files()
    with bloomkv.DB(path, read_only=True) as ro:
        assert ro.get(b"k") == b"v"
        with pytest.raises(bloomkv.InvalidArgumentError):
            ro.put(b"k", b"x")
    assert files() == before  # nothing written, no LOCK made
    writer = bloomkv.DB(path)  # holds the lock; a read-only open takes none
    with bloomkv.DB(path, read_only=True) as ro:
        assert ro.get(b"k") == b"v"
        writer.put(b"k2", b"v2")
        assert ro.get(b"k2") is None  # the state as of its open ...
        assert ro.try_catch_up() is True  # ... until it follows the writer
        assert ro.get(b"k2") == b"v2"
        assert ro.try_catch_up() is False
        with pytest.raises(bloomkv.InvalidArgumentError):
            writer.try_catch_up()  # a writer is always current
    writer.close()
    with pytest.raises(bloomkv.InvalidArgumentError):
        bloomkv.DB(str(tmp_path / "none"), read_only=True, create_if_missing=True)
    assert not os.path.exists(str(tmp_path / "none"))


def test_plyvel_names(tmp_path):
    """plyvel's option and argument names open and read the same way."""
    path = str(tmp_path / "p")
    db = bloomkv.DB(path, create_if_missing=True, paranoid_checks=True, lru_cache_size=8 << 20,
                    block_restart_interval=32, compression="snappy", bloom_filter_bits=10,
                    comparator_name=b"leveldb.BytewiseComparator")
    db.put(b"k", b"v")
    assert db.get(b"k", verify_checksums=True, fill_cache=False) == b"v"
    assert db.name == path
    db.close()
    with pytest.raises(TypeError):
        bloomkv.DB(path, write_buffer_size="big")
    with pytest.raises(TypeError):
        bloomkv.DB(path, lru_cache_size="big")
    with pytest.raises(NotImplementedError):
        bloomkv.DB(path, comparator=lambda a, b: 0, comparator_name=b"reverse")


def test_write_batch_explicit_write_and_clear(db):
    wb = db.write_batch(sync=True)
    wb.put(b"x", b"1")
    wb.write()
    assert len(wb) == 0 and db.get(b"x") == b"1"
    wb.put(b"y", b"2")
    wb.clear()
    wb.write()
    assert db.get(b"y") is None
    with pytest.raises(TypeError):
        wb.put("x", b"1")


# ---- iterators --------------------------------------------------------------

def test_iterate_whole_database(db):
    model = fill(db, 3000)
    db.flush()
    for k in list(model)[:500]:
        db.delete(k)
        del model[k]
    assert list(db) == sorted(model.items())
    assert list(db.iterator(reverse=True)) == sorted(model.items(), reverse=True)
    assert list(db.iterator(include_value=False)) == sorted(model)
    assert list(db.iterator(include_key=False)) == [v for _, v in sorted(model.items())]
    # Neither: one None per entry (plyvel's rule).
    assert list(db.iterator(include_key=False, include_value=False)) == [None] * len(model)


def test_plyvel_reverse_seek_and_snapshot_iteration(db):
    for k in (b"1", b"2", b"3", b"4", b"5"):
        db.put(k, k)
    it = db.iterator(include_value=False, reverse=True)
    it.seek(b"3")  # before the first key >= 3: reversed, next() goes below it
    assert next(it) == b"2"
    it.seek(b"3")
    assert it.prev() == b"3"
    it.seek(b"1")
    assert next(it, None) is None
    sn = db.snapshot()
    db.put(b"6", b"6")
    assert [k for k, _ in sn] == [b"1", b"2", b"3", b"4", b"5"]
    sn.close()


def test_plyvel_properties_and_ranges(db):
    fill(db, 2000)
    db.flush()
    assert db.get_property(b"leveldb.num-files-at-level0") == db.get_property(b"bloomkv.num-files-at-level0")
    tables = db.get_property(b"leveldb.sstables")
    assert tables.startswith(b"--- level 0 ---") and b"--- level 6 ---" in tables
    assert db.get_property(b"leveldb.no-such-property") is None
    with pytest.raises(TypeError):
        db.get_property("leveldb.stats")
    db.compact_range(start=b"a", stop=b"z")
    assert db.approximate_sizes() == []
    sizes = db.approximate_sizes((b"", b"\xff"), (b"a", b"a"))
    assert len(sizes) == 2 and sizes[0] > 0
    with pytest.raises(TypeError):
        db.approximate_sizes(b"ab")


def test_raw_iterator(db):
    for i in range(100):
        db.put(b"%03d" % i, b"v%03d" % i)
    it = db.raw_iterator()
    assert not it.valid()
    with pytest.raises(bloomkv.IteratorInvalidError):
        it.key()
    it.seek_to_first()
    assert it.item() == (b"000", b"v000")
    it.next()
    it.next()
    assert it.key() == b"002"
    it.prev()
    assert it.value() == b"v001"
    it.seek(b"049x")
    assert it.key() == b"050"
    it.seek_to_last()
    assert it.key() == b"099"
    it.next()
    assert not it.valid()
    with pytest.raises(bloomkv.IteratorInvalidError):
        it.next()
    sn = db.snapshot()
    db.put(b"100", b"late")
    with sn.raw_iterator() as rit:
        rit.seek_to_last()
        assert rit.key() == b"099"
    with pytest.raises(RuntimeError):
        rit.valid()
    sn.close()
    db.close()
    with pytest.raises(RuntimeError):
        it.seek_to_first()


def test_prefixed_db(db):
    for p in (b"a", b"b"):
        for i in range(20):
            db.put(p + b"%02d" % i, p)
    pa = db.prefixed_db(b"a")
    assert pa.db is db and pa.prefix == b"a"
    assert pa.get(b"05") == b"a" and pa.get(b"zz", b"d") == b"d"
    pa.put(b"05", b"new")
    assert db.get(b"a05") == b"new"
    pa.delete(b"06")
    assert db.get(b"a06") is None
    assert [k for k, _ in pa][:3] == [b"00", b"01", b"02"] and len(list(pa)) == 19
    it = pa.iterator(start=b"10", stop=b"12", include_stop=True, include_value=False)
    assert list(it) == [b"10", b"11", b"12"]
    it = pa.iterator(include_value=False, reverse=True)
    it.seek(b"03")
    assert next(it) == b"02"
    assert list(pa.iterator(prefix=b"1", include_value=False))[:2] == [b"10", b"11"]
    sn = pa.snapshot()
    pa.put(b"07", b"later")
    assert sn.get(b"07") == b"a" and sn.multi_get([b"07", b"06"]) == [b"a", None]
    assert [k for k, _ in sn.iterator(start=b"18")] == [b"18", b"19"]
    with pytest.raises(NotImplementedError):
        sn.find_value(b"a")
    sn.close()
    with pa.write_batch() as wb:
        wb.put(b"x", b"1")
        wb.delete(b"00")
    assert db.get(b"ax") == b"1" and db.get(b"a00") is None
    nested = pa.prefixed_db(b"1")
    assert nested.prefix == b"a1" and nested.get(b"5") == b"a"
    assert list(db.prefixed_db(b"\xff").iterator()) == []
    db.close()
    with pytest.raises(RuntimeError):
        pa.get(b"05")


def test_iterator_ranges(db):
    keys = [b"a", b"ab", b"abc", b"b", b"b\xff", b"b\xff\xff", b"c", b"\xff", b"\xff\xff"]
    for k in keys:
        db.put(k, k.upper())

    def ks(**kw):
        return list(db.iterator(include_value=False, **kw))

    assert ks(start=b"ab", stop=b"b") == [b"ab", b"abc"]
    assert ks(start=b"ab", stop=b"b", include_start=False) == [b"abc"]
    assert ks(start=b"ab", stop=b"b", include_stop=True) == [b"ab", b"abc", b"b"]
    assert ks(start=b"b") == [b"b", b"b\xff", b"b\xff\xff", b"c", b"\xff", b"\xff\xff"]
    assert ks(stop=b"ab") == [b"a"]
    assert ks(prefix=b"ab") == [b"ab", b"abc"]
    assert ks(prefix=b"b\xff") == [b"b\xff", b"b\xff\xff"]
    assert ks(prefix=b"\xff") == [b"\xff", b"\xff\xff"]
    assert ks(prefix=b"zz") == []
    assert ks(prefix=b"") == keys
    assert ks(start=b"b", stop=b"a") == []
    assert ks(prefix=b"ab", reverse=True) == [b"abc", b"ab"]
    with pytest.raises(TypeError):
        db.iterator(prefix=b"a", start=b"a")
    with pytest.raises(TypeError):
        db.iterator(start="a")


class CursorModel:
    """What an iterator over sorted keys must do, as a position between them."""

    def __init__(self, keys, reverse):
        self.keys, self.reverse = keys, reverse
        self.pos = len(keys) if reverse else 0

    def forward(self):
        if self.pos >= len(self.keys):
            return None
        self.pos += 1
        return self.keys[self.pos - 1]

    def backward(self):
        if self.pos == 0:
            return None
        self.pos -= 1
        return self.keys[self.pos]

    def next(self):
        return self.backward() if self.reverse else self.forward()

    def prev(self):
        return self.forward() if self.reverse else self.backward()

    def seek(self, target):
        # Before the first key >= target, in either direction (plyvel's rule).
        self.pos = bisect.bisect_left(self.keys, target)


def test_iterator_cursor_against_model(db):
    rng = random.Random(42)
    all_keys = sorted({b"%03d" % rng.randrange(400) for _ in range(150)})
    for i, k in enumerate(all_keys):
        db.put(k, b"v" + k)
        if i == len(all_keys) // 2:
            db.flush()  # half in a table, half in the memtable
    for trial in range(60):
        reverse = bool(trial % 2)
        lo = b"%03d" % rng.randrange(400) if rng.random() < 0.5 else None
        hi = b"%03d" % rng.randrange(400) if rng.random() < 0.5 else None
        in_range = [k for k in all_keys if (lo is None or k >= lo) and (hi is None or k < hi)]
        it = db.iterator(start=lo, stop=hi, reverse=reverse, include_value=False)
        model = CursorModel(in_range, reverse)
        for _ in range(40):
            op = rng.randrange(5)
            if op == 0:
                assert next(it, None) == model.next()
            elif op == 1:
                try:
                    got = it.prev()
                except StopIteration:
                    got = None
                assert got == model.prev()
            elif op == 2:
                target = b"%03d" % rng.randrange(400)
                it.seek(target)
                model.seek(target)
            elif op == 3:
                it.seek_to_start()
                model.pos = 0
            else:
                it.seek_to_stop()
                model.pos = len(in_range)
        it.close()


def test_iterator_sees_state_at_creation(db):
    db.put(b"a", b"1")
    it = db.iterator()
    db.put(b"b", b"2")
    db.delete(b"a")
    assert list(it) == [(b"a", b"1")]


def test_iterator_close_and_context(db):
    db.put(b"a", b"1")
    with db.iterator() as it:
        assert next(it) == (b"a", b"1")
    with pytest.raises(RuntimeError, match="closed"):
        next(it)
    it.close()


# ---- snapshots ---------------------------------------------------------------

def test_snapshot_reads(db):
    db.put(b"a", b"1")
    db.put(b"b", b"1")
    sn = db.snapshot()
    db.put(b"a", b"2")
    db.delete(b"b")
    db.put(b"c", b"3")
    db.flush()
    assert sn.get(b"a") == b"1" and sn.get(b"b") == b"1" and sn.get(b"c") is None
    assert sn.get(b"c", b"-") == b"-"
    assert db.get(b"a", snapshot=sn) == b"1"
    assert sn.multi_get([b"a", b"b", b"c"]) == [b"1", b"1", None]
    assert db.multi_get([b"a", b"c"], snapshot=sn) == [b"1", None]
    assert list(sn.iterator()) == [(b"a", b"1"), (b"b", b"1")]
    assert list(db.iterator(snapshot=sn, reverse=True)) == [(b"b", b"1"), (b"a", b"1")]
    assert list(db) == [(b"a", b"2"), (b"c", b"3")]
    sn.close()
    assert sn.closed
    with pytest.raises(RuntimeError):
        sn.get(b"a")
    with pytest.raises(RuntimeError):
        db.get(b"a", snapshot=sn)
    sn.release()


def test_snapshot_context_gc_and_misuse(path, db):
    with db.snapshot() as sn:
        db.put(b"x", b"1")
        assert sn.get(b"x") is None
    assert sn.closed
    for _ in range(100):
        db.snapshot()  # released by garbage collection
    with pytest.raises(TypeError):
        db.get(b"x", snapshot=object())
    with bloomkv.DB(path + "2", create_if_missing=True) as other:
        with other.snapshot() as foreign:
            with pytest.raises(bloomkv.InvalidArgumentError, match="another database"):
                db.get(b"x", snapshot=foreign)


def test_close_closes_iterators_and_snapshots(path):
    d = bloomkv.DB(path, create_if_missing=True)
    d.put(b"a", b"1")
    it = d.iterator()
    sn = d.snapshot()
    sit = sn.iterator()
    d.close()
    assert sn.closed
    with pytest.raises(RuntimeError):
        next(it)
    with pytest.raises(RuntimeError):
        next(sit)
    with pytest.raises(RuntimeError):
        sn.get(b"a")
    del it, sn, sit
    gc.collect()
    with bloomkv.DB(path) as d:
        assert d.get(b"a") == b"1"


# ---- search by value -----------------------------------------------------------

@pytest.mark.parametrize("shape", ["bitsliced", "paged"])
def test_find_value(path, shape):
    with bloomkv.DB(path, create_if_missing=True, value_index=shape, write_buffer_size=1 << 16) as d:
        rng = random.Random(3)
        model = {}
        for i in range(4000):
            k = b"k%05d" % rng.randrange(3000)
            v = b"color-%d" % rng.randrange(20)
            d.put(k, v)
            model[k] = v
            if i == 2000:
                sn = d.snapshot()
                at_snapshot = dict(model)
        d.flush()
        for v in (b"color-0", b"color-7", b"absent"):
            want = sorted((k, x) for k, x in model.items() if x == v)
            assert list(d.find_value(v)) == want
            assert list(d.find_value(v, keys_only=True)) == [k for k, _ in want]
            assert list(d.find_value(v, limit=3)) == want[:3]
            assert list(d.find_value(v, limit=0)) == []
            pages, after = [], None
            while True:  # pages of 17, each resuming after the last key of the one before
                page = list(d.find_value(v, limit=17, after=after))
                pages += page
                if len(page) < 17:
                    break
                after = page[-1][0]
            assert pages == want
            if want:
                assert list(d.find_value(v, after=want[0][0], keys_only=True)) == [k for k, _ in want[1:]]
            old = sorted((k, x) for k, x in at_snapshot.items() if x == v)
            assert list(d.find_value(v, snapshot=sn)) == old
            assert list(sn.find_value(v, keys_only=True)) == [k for k, _ in old]
        with pytest.raises(bloomkv.InvalidArgumentError):
            d.find_value(b"x", limit=-1)
        sn.close()


def test_builtin_terms_extractor(path):
    with bloomkv.DB(path, create_if_missing=True, value_index="bitsliced", terms_name="words") as d:
        d.put(b"a", b"The quick brown Fox")
        d.put(b"b", b"lazy dog")
        assert list(d.find_value(b"fox", keys_only=True)) == [b"a"]
    with bloomkv.DB(path) as d:  # recorded: nothing to pass
        assert list(d.find_value(b"dog", keys_only=True)) == [b"b"]
        assert 'terms "words/1"' in d.property("bloomkv.value-index")
    with pytest.raises(bloomkv.InvalidArgumentError, match="words/1"):
        bloomkv.DB(path, terms_name="prefix:2")


def test_find_value_needs_an_index(db):
    db.put(b"k", b"v")
    with pytest.raises(bloomkv.InvalidArgumentError):
        list(db.find_value(b"v"))


def words(value):
    return value.lower().split()


def test_find_value_with_python_terms(path):
    with pytest.raises(bloomkv.InvalidArgumentError, match="terms_name"):
        bloomkv.DB(path, create_if_missing=True, value_index="hierarchy", terms=words)
    with pytest.raises(TypeError):
        bloomkv.DB(path, create_if_missing=True, value_index="hierarchy", terms=5, terms_name="x")
    opts = dict(value_index="hierarchy", terms=words, terms_name="words-1", write_buffer_size=1 << 16)
    with bloomkv.DB(path, create_if_missing=True, **opts) as d:
        d.put(b"1", b"The quick brown fox")
        d.put(b"2", b"a lazy DOG")
        d.put(b"3", b"quick dog")
        d.flush()  # the extractor runs on the engine's flush thread too
        d.put(b"4", b"Quick")
        assert list(d.find_value(b"quick", keys_only=True)) == [b"1", b"3", b"4"]
        assert list(d.find_value(b"dog", keys_only=True)) == [b"2", b"3"]
        assert list(d.find_value([b"quick", b"dog"], keys_only=True)) == [b"3"]
        assert list(d.find_value((b"fox", b"lazy"), match="any", keys_only=True)) == [b"1", b"2"]
        assert list(d.find_value([b"fox", b"lazy"], keys_only=True)) == []
        with d.snapshot() as sn:
            d.delete(b"3")
            assert list(sn.find_value([b"quick", b"dog"], keys_only=True)) == [b"3"]
        assert list(d.find_value([b"quick", b"dog"])) == []
        with pytest.raises(bloomkv.InvalidArgumentError, match="'all' or 'any'"):
            d.find_value([b"quick"], match="some")
        with pytest.raises(bloomkv.InvalidArgumentError, match="1 to 64"):
            d.find_value([])
        with pytest.raises(TypeError):
            d.find_value([b"quick", "dog"])
    with pytest.raises(bloomkv.InvalidArgumentError):
        bloomkv.DB(path, value_index="hierarchy", terms=words, terms_name="words-2")
    with bloomkv.DB(path, **opts) as d:
        assert list(d.find_value(b"fox", keys_only=True)) == [b"1"]


def test_failing_terms_extractor_indexes_whole_value(path, monkeypatch):
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(u.exc_type))

    def broken(value):
        if value == b"bad":
            raise ValueError("no terms")
        return [value]

    with bloomkv.DB(path, create_if_missing=True, value_index="flat", terms=broken, terms_name="broken") as d:
        d.put(b"k", b"bad")
        assert list(d.find_value(b"bad", keys_only=True)) == [b"k"]
    assert ValueError in reported


# ---- administration, properties, errors from damaged files ---------------------

def test_stats_and_properties(db):
    fill(db, 1000)
    db.get(b"k000001")
    db.flush()
    stats = db.stats()
    assert stats["gets"] >= 1 and stats["writes"] == 1000 and stats["flushes"] == 1
    assert len(stats["files-at-level"]) == 7 and sum(stats["files-at-level"]) >= 1
    assert sum(stats["bytes-at-level"]) > 0
    assert isinstance(stats["write-amplification"], float)
    assert "level" in db.property("bloomkv.stats")
    assert db.property("bloomkv.counter.writes") == "1000"
    assert db.property("no.such.property") is None


def test_compact_flush_size_checkpoint(path, db):
    model = fill(db, 5000)
    db.compact()
    db.compact(b"k000100", b"k000200")
    db.compact(start=b"k009000")
    assert db.approximate_size() > 0
    assert db.approximate_size(b"k000000", b"k001000") <= db.approximate_size()
    db.checkpoint(path + "-copy")
    with pytest.raises(bloomkv.InvalidArgumentError):
        db.checkpoint(path + "-copy")
    with bloomkv.DB(path + "-copy") as copy:
        assert dict(copy.iterator()) == model


def test_check_and_destroy(path):
    with bloomkv.DB(path, create_if_missing=True) as d:
        fill(d, 2000)
        d.flush()
    assert bloomkv.check(path) == []
    with pytest.raises(bloomkv.Error):
        bloomkv.check(path + "-missing")
    with bloomkv.DB(path):
        with pytest.raises(bloomkv.BusyError):
            bloomkv.check(path)
    bloomkv.destroy_db(path)
    assert not os.path.exists(os.path.join(path, "CURRENT"))


def test_largest_key_and_value(path):
    """The maximum key and value are stored and read back after a flush;
    one byte more is refused by every writing call, nothing stored."""
    K, V = bloomkv.MAX_KEY_SIZE, bloomkv.MAX_VALUE_SIZE
    assert (K, V) == (1 << 20, 256 << 20)
    big_value = b"v" * V
    with bloomkv.DB(path, create_if_missing=True) as d:
        d.put(b"a", b"1")
        with pytest.raises(bloomkv.InvalidArgumentError, match="longer than the maximum"):
            d.put(b"k" * (K + 1), b"x")
        with pytest.raises(bloomkv.InvalidArgumentError, match="value of 268435457 bytes"):
            d.put(b"k", big_value + b"v")
        with pytest.raises(bloomkv.InvalidArgumentError):
            d.delete(b"k" * (K + 1))
        wb = d.write_batch()
        with pytest.raises(bloomkv.InvalidArgumentError, match="longer than the maximum"):
            wb.put(b"k" * (K + 1), b"x")
        d.put(b"k" * K, b"small")
        d.put(b"big", big_value)
        d.flush()
        assert d.get(b"a") == b"1"
        assert d.get(b"k" * K) == b"small"
        assert d.get(b"big") == big_value
        assert d.get(b"k" * (K + 1)) is None


def test_lost_current_repair_and_destroy(path):
    with bloomkv.DB(path, create_if_missing=True) as d:
        model = fill(d, 2000)
        d.compact()
    os.unlink(os.path.join(path, "CURRENT"))
    with pytest.raises(bloomkv.CorruptionError, match="bloomkv repair"):
        bloomkv.DB(path, create_if_missing=True)
    assert "CURRENT now names" in bloomkv.repair_db(path)
    with bloomkv.DB(path) as d:
        assert dict(d.iterator()) == model
    os.symlink(path, path + "-link")
    with pytest.raises(bloomkv.InvalidArgumentError, match="symbolic link"):
        bloomkv.destroy_db(path + "-link")
    foreign = path + "-foreign"
    os.mkdir(foreign)
    for name in ("CURRENT", "1.log", "2024.sst", "notes.tmp"):
        open(os.path.join(foreign, name), "w").close()
    with pytest.raises(bloomkv.InvalidArgumentError, match="not a bloomkv database"):
        bloomkv.destroy_db(foreign)
    assert sorted(os.listdir(foreign)) == ["1.log", "2024.sst", "CURRENT", "notes.tmp"]
    bloomkv.destroy_db(path)
    assert not os.path.exists(path)


def test_misuse_is_refused_with_its_own_message(db):
    with pytest.raises(bloomkv.InvalidArgumentError, match="begin is after end"):
        db.compact(b"z", b"a")
    db.compact(b"a", b"z")


def test_skip_damaged_recovery_ends_on_a_long_record(path):
    """A damaged first fragment of a record over 32 KiB leaves orphaned
    fragments: skip_damaged still ends, keeping the other records."""
    with bloomkv.DB(path, create_if_missing=True) as d:
        d.put(b"big", b"v" * 40000)
        d.put(b"after", b"1")
    log = [f for f in os.listdir(path) if f.endswith(".log")][0]
    with open(os.path.join(path, log), "r+b") as f:
        f.seek(100)
        f.write(b"\xff")
    with bloomkv.DB(path, wal_recovery="skip_damaged") as d:
        assert d.get(b"big") is None
        assert d.get(b"after") == b"1"


def test_damaged_table_raises_corruption(path):
    with bloomkv.DB(path, create_if_missing=True, block_cache_size=0) as d:
        model = fill(d, 3000)
        d.flush()
    table = [f for f in os.listdir(path) if f.endswith(".sst")][0]
    with open(os.path.join(path, table), "r+b") as f:
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0x55]))
    problems = bloomkv.check(path)
    assert problems and table in problems[0]
    with bloomkv.DB(path, block_cache_size=0) as d:
        with pytest.raises(bloomkv.CorruptionError, match=table):
            for k in model:
                d.get(k)
        with pytest.raises(bloomkv.CorruptionError):
            list(d.iterator())


# ---- threads ---------------------------------------------------------------------

def test_threads_share_a_database(db):
    errors = []

    def work(t):
        try:
            rng = random.Random(t)
            for i in range(2000):
                k = b"t%d-%d" % (t, i)
                db.put(k, k)
                assert db.get(k) == k
                if i % 500 == 0:
                    assert all(v == kk for kk, v in db.iterator(prefix=b"t%d-" % t))
                    db.multi_get([b"t%d-%d" % (t, rng.randrange(i + 1))])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    assert len(list(db.iterator(include_value=False))) == 8000


def test_close_while_other_threads_open_and_close_handles(path):
    # Each round, readers get, and open and drop iterators, raw iterators
    # and snapshots (closing some, leaving others to deallocation), while
    # the main thread closes the database under them: each must see a
    # RuntimeError and nothing else, and a handle a reader is tearing down
    # must neither be freed under the close nor outlive it. The switch
    # interval is shortened so that the threads interleave often.
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        for round_no in range(60):
            d = bloomkv.DB("%s-%d" % (path, round_no), create_if_missing=True)
            fill(d, 200)
            outcomes = []

            def reader():
                try:
                    while True:
                        d.get(b"k000001")
                        list(d.iterator(prefix=b"k0000"))
                        s = d.snapshot()
                        it = s.iterator()
                        next(it)
                        it.close()
                        raw = d.raw_iterator()
                        raw.seek_to_first()
                        del raw
                        s.close()
                except RuntimeError:
                    outcomes.append("closed")
                except Exception as e:  # pragma: no cover
                    outcomes.append(e)

            threads = [threading.Thread(target=reader) for _ in range(3)]
            for th in threads:
                th.start()
            d.close()
            for th in threads:
                th.join()
            assert outcomes == ["closed"] * 3
    finally:
        sys.setswitchinterval(old_interval)


# ---- filters ------------------------------------------------------------------------

STATIC = ["ribbon", "fuse8", "fuse16", "xor8"]
DYNAMIC = ["bloom", "blocked", "cuckoo8", "cuckoo12", "cuckoo16", "counting"]


@pytest.mark.parametrize("kind", STATIC + DYNAMIC)
def test_filter_build_has_no_false_negatives(kind):
    keys = [b"key-%d" % i for i in range(20000)]
    f = bloomkv.Filter.build(keys, type=kind)
    assert len(f) == len(keys)
    assert all(k in f for k in keys)
    assert all(f.may_contain_many(keys))
    absent = [b"absent-%d" % i for i in range(20000)]
    flags = f.may_contain_many(absent)
    assert flags == [f.may_contain(k) for k in absent]
    assert sum(flags) / len(absent) < 0.05
    raw = f.may_contain_many(absent, as_bytes=True)
    assert isinstance(raw, bytearray) and list(raw) == [int(x) for x in flags]
    info = f.info()
    assert info["type"] == kind and info["num_keys"] == len(keys) and info["encoded_bytes"] == len(bytes(f))


def test_filter_sizing():
    keys = [b"%d" % i for i in range(50000)]
    small = bloomkv.Filter.build(keys, type="blocked", bits_per_key=6)
    big = bloomkv.Filter.build(keys, type="blocked", fpr=0.001)
    assert small.info()["bits_per_key"] < big.info()["bits_per_key"]
    with pytest.raises(bloomkv.InvalidArgumentError):
        bloomkv.Filter.build(keys, type="blocked", bits_per_key=6, fpr=0.01)
    with pytest.raises(bloomkv.InvalidArgumentError):
        bloomkv.Filter.build(keys, type="blocked", fpr=2)
    with pytest.raises(bloomkv.InvalidArgumentError):
        bloomkv.Filter.build(keys, type="nope")
    with pytest.raises(TypeError):
        bloomkv.Filter.build(["text"])
    assert len(bloomkv.Filter.build([], type="ribbon")) == 0


def test_filter_serialization():
    keys = [b"x%d" % i for i in range(5000)]
    f = bloomkv.Filter.build(keys, type="fuse8")
    data = bytes(f)
    g = bloomkv.Filter.from_bytes(data)
    assert g.info()["zero_copy"] and all(k in g for k in keys)
    h = bloomkv.Filter.from_bytes(bytearray(data))  # writable: copied
    assert not h.info()["zero_copy"] and all(k in h for k in keys)
    p = pickle.loads(pickle.dumps(f))
    assert bytes(p) == data
    damaged = bytearray(data)
    damaged[len(damaged) // 2] ^= 1
    with pytest.raises(bloomkv.CorruptionError):
        bloomkv.Filter.from_bytes(bytes(damaged))
    with pytest.raises(bloomkv.CorruptionError):
        bloomkv.Filter.from_bytes(data[:-3])
    with pytest.raises(TypeError):
        bloomkv.Filter.from_bytes("text")


def test_dynamic_filters_add_and_remove():
    f = bloomkv.Filter("blocked", 1000)
    for i in range(1000):
        f.add(b"%d" % i)
    assert all(b"%d" % i in f for i in range(1000)) and len(f) == 1000
    with pytest.raises(bloomkv.InvalidArgumentError, match="delete"):
        f.remove(b"1")
    for kind in ("cuckoo16", "counting"):
        d = bloomkv.Filter(kind, 1000)
        for i in range(500):
            d.add(b"%d" % i)
        assert d.remove(b"7") is True
        assert b"7" not in d or kind == "counting"
        assert d.remove(b"never-added-key") in (False, True)
    with pytest.raises(bloomkv.InvalidArgumentError, match="static"):
        bloomkv.Filter("ribbon", 10)
    static = bloomkv.Filter.build([b"a"], type="xor8")
    with pytest.raises(bloomkv.InvalidArgumentError, match="static"):
        static.add(b"b")
    with pytest.raises(bloomkv.InvalidArgumentError):
        bloomkv.Filter("blocked", 0)


def test_cuckoo_full_and_zero_copy_add():
    f = bloomkv.Filter("cuckoo8", 64)
    with pytest.raises(bloomkv.FilterFullError):
        for i in range(100000):
            f.add(b"%d" % i)
    g = bloomkv.Filter.from_bytes(bytes(bloomkv.Filter("counting", 100)))
    assert g.info()["zero_copy"]
    g.add(b"k")  # becomes a copy of its own first
    assert b"k" in g and not g.info()["zero_copy"]
    assert g.remove(b"k") and b"k" not in g


# ---- no leaks --------------------------------------------------------------------------

def test_no_reference_or_memory_leaks(path):
    d = bloomkv.DB(path, create_if_missing=True, write_buffer_size=1 << 20, block_cache_size=1 << 20,
                   value_index="flat")
    keys = [b"key%04d" % i for i in range(1000)]
    value = b"v" * 50
    for k in keys:
        d.put(k, value)
    f = bloomkv.Filter.build(keys, type="blocked")
    probe = keys[:64]

    def one_round(i):
        k = keys[i % 1000]
        d.put(k, value)
        d.get(k)
        d.get(b"missing", b"-")
        d.multi_get(probe[:4])
        with d.write_batch() as wb:
            wb.put(k, value)
            wb.delete(b"missing")
        if i % 10 == 0:
            with d.snapshot() as sn:
                sn.get(k)
            it = d.iterator(start=k, stop=k + b"\xff")
            list(it)
            list(d.find_value(b"nothing"))
        f.may_contain_many(probe)
        k in f
        try:
            d.get("not bytes")
        except TypeError:
            pass

    for i in range(5000):
        one_round(i)
    refs = [sys.getrefcount(x) for x in (d, f, value, keys[0], probe)]
    gc.collect()
    rss_before = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    tracemalloc.start()
    traced_before = tracemalloc.get_traced_memory()[0]
    for i in range(100000):
        one_round(i)
    gc.collect()
    traced_growth = tracemalloc.get_traced_memory()[0] - traced_before
    tracemalloc.stop()
    rss_growth = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") - rss_before
    assert [sys.getrefcount(x) for x in (d, f, value, keys[0], probe)] == refs
    assert traced_growth < 256 * 1024, traced_growth
    if not UNDER_ASAN:
        assert rss_growth < 16 << 20, rss_growth
    d.close()


def test_delete_range(tmp_path):
    with bloomkv.DB(str(tmp_path / "dr"), create_if_missing=True) as db:
        for i in range(100):
            db.put(b"k%03d" % i, b"v")
        snap = db.snapshot()
        db.delete_range(b"k010", b"k020")
        assert db.get(b"k009") == b"v" and db.get(b"k010") is None and db.get(b"k019") is None
        assert db.get(b"k020") == b"v"
        assert snap.get(b"k015") == b"v"  # a snapshot from before keeps its view
        snap.close()
        db.delete_range(b"k090")  # no stop: to the end
        assert [k for k, _ in db] == [b"k%03d" % i for i in list(range(10)) + list(range(20, 90))]
        db.delete_range()
        assert list(db) == []
        db.put(b"after", b"1")
        assert db.get(b"after") == b"1"
