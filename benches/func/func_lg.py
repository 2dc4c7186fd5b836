#!/usr/bin/env python3
"""LangGraph's side of stategraph-bench's `func` workload (run by it with --lg-python).

A functional workflow (`@entrypoint` over `SqliteSaver`) that calls `--tasks` `@task`s one
after another, each returning its argument plus one, invoked `--repeats` times on fresh
threads of a fresh SQLite file under `--durability`; prints one JSON line with the median
time per task. Needs `langgraph` and `langgraph-checkpoint-sqlite` in the interpreter's env.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import time
from importlib.metadata import version

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.func import entrypoint, task


@task
def step(i: int) -> int:
    return i + 1


def workflow(saver):
    @entrypoint(checkpointer=saver)
    def squares(n: int) -> int:
        total = 0
        for i in range(n):
            total += step(i).result()
        return total

    return squares


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--tasks", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--durability", default="sync")
    p.add_argument("--workdir", default=".")
    a = p.parse_args()
    path = os.path.join(a.workdir, f"func-lg-{os.getpid()}.sqlite")
    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        wf = workflow(SqliteSaver(conn))
        times = []
        for r in range(a.repeats):
            start = time.perf_counter()
            out = wf.invoke(a.tasks, {"configurable": {"thread_id": f"t{r}"}},
                            durability=a.durability)
            times.append(time.perf_counter() - start)
            assert out == sum(i + 1 for i in range(a.tasks)), out
        print(json.dumps({
            "langgraph": version("langgraph"),
            "tasks": a.tasks,
            "durability": a.durability,
            "per_task_us": statistics.median(times) / a.tasks * 1e6,
        }))
    finally:
        conn.close()
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)


if __name__ == "__main__":
    main()
