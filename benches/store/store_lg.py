"""LangGraph's side of the `store` workload: the same items, operations and vectors on one of
LangGraph's stores (`InMemoryStore`, `SqliteStore` or `PostgresStore`).

    python store_lg.py --backend memory|sqlite|postgres --items N --vectors FILE --dims 384
                       [--queries 64] [--index on|off] [--workdir DIR] [--pg-url URL]

FILE holds `N + queries` vectors of `dims` little-endian float32, written by the Rust side:
item i's text is "v{i}", query j's text is "q{j}", and the index's `embed` function looks
each text's vector up, so no model is timed. Prints one JSON line of rates (operations per
second) and the vector search latencies.

Needs, beside langgraph: langgraph-checkpoint-sqlite and sqlite-vec (sqlite), numpy
(InMemoryStore's vector search), langgraph-checkpoint-postgres, psycopg[binary] and
psycopg-pool (postgres). A Python whose `sqlite3` cannot load extensions (built without
them, as pyenv's are by default) needs pysqlite3-binary, used in its place.
"""

import argparse
import contextlib
import json
import os
import re
import sqlite3
import sys
import time
import uuid

import numpy as np

KINDS = ["fact", "preference", "note", "todo"]
USERS = 100
FILL_BATCH = 1000


def value(i, text_of):
    return {"text": f"v{text_of}", "kind": KINDS[i % 4], "score": i % 100}


def namespace(i):
    return ("users", f"u{i % USERS}")


class Lookup:
    """The embed function: "v{i}" is item i's vector, "q{j}" query j's. (SqliteStore hands
    it the whole value's JSON, not the `text` field: the first "v{i}" in it is looked up.)"""

    WORD = re.compile(r"\b([vq])(\d+)\b")

    def __init__(self, vectors, items):
        self.vectors = vectors
        self.items = items

    def __call__(self, texts):
        out = []
        for t in texts:
            m = self.WORD.search(t)
            if m is None:
                raise ValueError(f"store_lg.py: no vector for {t!r}")
            row = int(m.group(2)) + (self.items if m.group(1) == "q" else 0)
            out.append(self.vectors[row].tolist())
        return out


def timed(op, count, budget_s, min_count=3):
    """Runs op(j) for j = 0.. until `count` runs or `budget_s` seconds (at least
    `min_count` runs); returns (rate per second, each run's seconds)."""
    each = []
    start = time.perf_counter()
    j = 0
    while j < count:
        t0 = time.perf_counter()
        op(j)
        each.append(time.perf_counter() - t0)
        j += 1
        if j >= min_count and time.perf_counter() - start > budget_s:
            break
    return j / (time.perf_counter() - start), each


def quantile(xs, q):
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


@contextlib.contextmanager
def open_store(args, index):
    if args.backend == "memory":
        from langgraph.store.memory import InMemoryStore

        yield InMemoryStore(index=index)
    elif args.backend == "sqlite":
        loadable_sqlite()
        from langgraph.store.sqlite import SqliteStore

        path = os.path.join(args.workdir, f"lg-store-{os.getpid()}-{uuid.uuid4().hex[:8]}.db")
        try:
            with SqliteStore.from_conn_string(path, index=index) as store:
                store.setup()
                yield store
        finally:
            for suffix in ("", "-wal", "-shm", "-journal"):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path + suffix)
    else:
        yield from postgres_store(args, index)


def loadable_sqlite():
    """sqlite-vec is an extension: with a `sqlite3` that cannot load one, pysqlite3's."""
    if not hasattr(sqlite3.connect(":memory:"), "enable_load_extension"):
        import pysqlite3.dbapi2

        sys.modules["sqlite3"] = pysqlite3.dbapi2


def postgres_store(args, index):
    """A PostgresStore on a fresh database, dropped afterwards."""
    import psycopg
    from langgraph.store.postgres import PostgresStore

    name = f"lg_store_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.pg_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            url = psycopg.conninfo.make_conninfo(args.pg_url, dbname=name)
            with PostgresStore.from_conn_string(url, index=index) as store:
                store.setup()
                yield store
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def fill(store, items):
    from langgraph.store.base import PutOp

    t0 = time.perf_counter()
    for start in range(0, items, FILL_BATCH):
        ops = [
            PutOp(namespace(i), f"k{i}", value(i, i))
            for i in range(start, min(items, start + FILL_BATCH))
        ]
        store.batch(ops)
    return time.perf_counter() - t0


def run(args, store, indexed):
    n = args.items
    out = {"engine": "langgraph", "backend": args.backend, "items": n, "indexed": indexed}
    out["fill_s"] = round(fill(store, n), 3)

    def put(j):
        store.put(namespace(j), f"n{j}", value(j, j % n))

    def get(j):
        key = (j * 7919) % n
        if store.get(namespace(key), f"k{key}") is None:
            raise SystemExit(f"store_lg.py: k{key} missing")

    def filtered(j):
        flt = {"kind": "fact", "score": {"$gte": (j * 7) % 90}}
        if not store.search(("users",), filter=flt, limit=10):
            raise SystemExit("store_lg.py: a filtered search found nothing")

    out["put_per_s"], _ = timed(put, 2000, args.budget)
    out["get_per_s"], _ = timed(get, 20000, args.budget)
    out["search_filtered_per_s"], _ = timed(filtered, 2000, args.budget)
    if indexed:
        def vector(j):
            found = store.search(("users",), query=f"q{j % args.queries}", limit=10)
            if len(found) != 10 or found[0].score is None:
                raise SystemExit(f"store_lg.py: vector search found {found[:1]}")

        vector(0)  # warm-up
        rate, each = timed(vector, 200, 2 * args.budget)
        out["search_vector_per_s"] = rate
        out["vector_p50_ms"] = quantile(each, 0.5) * 1e3
        out["vector_p99_ms"] = quantile(each, 0.99) * 1e3
        out["vector_searches"] = len(each)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", choices=["memory", "sqlite", "postgres"], required=True)
    p.add_argument("--items", type=int, required=True)
    p.add_argument("--vectors", required=True)
    p.add_argument("--dims", type=int, default=384)
    p.add_argument("--queries", type=int, default=64)
    p.add_argument("--index", choices=["on", "off"], default="on")
    p.add_argument("--workdir", default=".")
    p.add_argument("--pg-url")
    p.add_argument("--budget", type=float, default=3.0)
    args = p.parse_args()
    vectors = np.fromfile(args.vectors, dtype="<f4").reshape(-1, args.dims)
    if len(vectors) != args.items + args.queries:
        raise SystemExit(f"store_lg.py: {len(vectors)} vectors for {args.items} items")
    indexed = args.index == "on"
    index = (
        {"dims": args.dims, "embed": Lookup(vectors, args.items), "fields": ["text"]}
        if indexed
        else None
    )
    with open_store(args, index) as store:
        out = run(args, store, indexed)
    print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in out.items()}))


if __name__ == "__main__":
    main()
