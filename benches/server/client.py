"""The `server` row's client: drives a server of the Agent Server API through the real
`langgraph-sdk` and prints one JSON line.

usage: client.py URL --mode runs|ceiling [--assistant NAME] [--input JSON] [--expect JSON]
                 [--clients N] [--runs K] [--warmup W] [--streams S]

runs     N clients run concurrently, each in its own SDK client; each client makes K runs,
         one after another: a new thread (`threads.create`), then `runs.wait` on it, timed
         from the call to its answer. W runs on one client come first and are not counted.
         Each answer is checked: its values must hold --expect (a JSON object whose keys
         must each equal the answer's; a list value must be the answer's list's tail).
         Then S runs of `runs.stream` (stream_mode "values"), one at a time, each on a new
         thread: the time from the call to the first event that is not `metadata`.
ceiling  The same clients and loop, with each run's two calls replaced by two `GET /ok`
         (the SDK's own HTTP client): what this client can do at all against a route that
         does nothing, so a server faster than that shows as the client's ceiling.
raw      One client, the runs mode's calls (`POST /threads`, then `POST
         /threads/{id}/runs/wait`) sent with Python's `http.client` on one keep-alive
         connection instead of the SDK: what the server itself adds to a run, with as
         little client as Python has. `create_p50_ms` is then the round trip of a call that
         does almost nothing.

Prints: mode, assistant, clients, runs, wall_s, runs_per_s, wait_p50_ms, wait_p99_ms (the
second call of each run in ceiling mode), create_p50_ms (the first call), client_cpu_share
(this process's CPU seconds over the wall seconds of the measured runs: near 1, its one
thread is the limit), and in runs mode first_event_p50_ms, first_event_p99_ms, streams.
"""

import argparse
import asyncio
import http.client
import json
import urllib.parse
import math
import sys
import time

from langgraph_sdk import get_client


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("url")
    ap.add_argument("--mode", choices=("runs", "ceiling", "raw"), default="runs")
    ap.add_argument("--assistant", default="chain")
    ap.add_argument("--input", default='{"log": []}')
    ap.add_argument("--expect", default="{}")
    ap.add_argument("--clients", type=int, default=1)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--streams", type=int, default=20)
    return ap.parse_args()


def percentile(xs, q):
    """Nearest rank: the smallest value with at least q of the values at or below it."""
    s = sorted(xs)
    return s[max(0, math.ceil(q * len(s)) - 1)]


def ms(seconds):
    return round(seconds * 1000, 3)


class Mismatch(Exception):
    pass


def check(values, expect):
    """The answer holds what --expect names (a list: its tail)."""
    if not isinstance(values, dict):
        raise Mismatch(f"the answer is not an object: {values!r:.200}")
    for key, want in expect.items():
        got = values.get(key)
        if isinstance(want, list) and isinstance(got, list):
            tail = [strip(m) for m in got[len(got) - len(want):]]
            if len(got) < len(want) or tail != want:
                raise Mismatch(f"{key}: expected the tail {want!r}, got {got!r:.300}")
        elif got != want:
            raise Mismatch(f"{key}: expected {want!r}, got {got!r:.300}")


def strip(item):
    """A message as the check compares it: type and content only (ids and extras vary)."""
    if isinstance(item, dict) and "content" in item:
        return {"type": item.get("type"), "content": item.get("content")}
    return item


async def run_once(client, a, inp, expect):
    """One run: a new thread, then `runs.wait`; the seconds of each call."""
    t0 = time.perf_counter()
    thread = (await client.threads.create())["thread_id"]
    t1 = time.perf_counter()
    values = await client.runs.wait(thread, a.assistant, input=inp)
    t2 = time.perf_counter()
    check(values, expect)
    return t1 - t0, t2 - t1


async def ok_twice(client):
    """The ceiling's run: two calls that do nothing; the seconds of each."""
    t0 = time.perf_counter()
    await client.http.get("/ok")
    t1 = time.perf_counter()
    await client.http.get("/ok")
    return t1 - t0, time.perf_counter() - t1


async def worker(a, runs, one, creates, lat):
    client = get_client(url=a.url, api_key=None)
    try:
        for _ in range(runs):
            create, wait = await one(client)
            creates.append(create)
            lat.append(wait)
    finally:
        await client.aclose()


async def first_events(a, inp):
    """Seconds from each `runs.stream` call to its first event past `metadata`."""
    client = get_client(url=a.url, api_key=None)
    firsts = []
    try:
        for _ in range(a.streams):
            thread = (await client.threads.create())["thread_id"]
            t0 = time.perf_counter()
            async for part in client.runs.stream(
                thread, a.assistant, input=inp, stream_mode="values"
            ):
                if part.event != "metadata":
                    firsts.append(time.perf_counter() - t0)
                    break
    finally:
        await client.aclose()
    return firsts


def raw_runs(a, inp, expect):
    """The raw mode: (create, wait) seconds of each measured run, over http.client."""
    url = urllib.parse.urlsplit(a.url)
    conn = http.client.HTTPConnection(url.hostname, url.port)

    def call(path, body):
        conn.request("POST", path, body=json.dumps(body),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
        if resp.status != 200:
            raise Mismatch(f"POST {path}: HTTP {resp.status}: {data[:200]!r}")
        return json.loads(data)

    creates, lat = [], []
    for i in range(a.warmup + a.runs):
        t0 = time.perf_counter()
        thread = call("/threads", {})["thread_id"]
        t1 = time.perf_counter()
        values = call(f"/threads/{thread}/runs/wait", {"assistant_id": a.assistant, "input": inp})
        t2 = time.perf_counter()
        check(values, expect)
        if i >= a.warmup:
            creates.append(t1 - t0)
            lat.append(t2 - t1)
    conn.close()
    return creates, lat


async def main():
    a = parse_args()
    inp = json.loads(a.input)
    expect = json.loads(a.expect)
    if a.mode == "raw":
        t0 = time.perf_counter()
        creates, lat = raw_runs(a, inp, expect)
        wall = time.perf_counter() - t0
        print(json.dumps({
            "mode": "raw", "assistant": a.assistant, "clients": 1, "runs": len(lat),
            "wall_s": round(wall, 3), "runs_per_s": round(len(lat) / wall, 1),
            "wait_p50_ms": ms(percentile(lat, 0.5)), "wait_p99_ms": ms(percentile(lat, 0.99)),
            "create_p50_ms": ms(percentile(creates, 0.5)),
        }), flush=True)
        return
    if a.mode == "runs":
        async def one(client):
            return await run_once(client, a, inp, expect)
    else:
        one = ok_twice
    await worker(a, a.warmup, one, [], [])
    creates, lat = [], []
    cpu0 = time.process_time()
    t0 = time.perf_counter()
    await asyncio.gather(
        *(worker(a, a.runs, one, creates, lat) for _ in range(a.clients))
    )
    wall = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    row = {
        "mode": a.mode,
        "assistant": a.assistant if a.mode == "runs" else None,
        "clients": a.clients,
        "runs": len(lat),
        "wall_s": round(wall, 3),
        "runs_per_s": round(len(lat) / wall, 1),
        "wait_p50_ms": ms(percentile(lat, 0.5)),
        "wait_p99_ms": ms(percentile(lat, 0.99)),
        "create_p50_ms": ms(percentile(creates, 0.5)),
        "client_cpu_share": round(cpu / wall, 2),
    }
    if a.mode == "runs" and a.streams > 0:
        firsts = await first_events(a, inp)
        row["first_event_p50_ms"] = ms(percentile(firsts, 0.5))
        row["first_event_p99_ms"] = ms(percentile(firsts, 0.99))
        row["streams"] = len(firsts)
    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except Mismatch as e:
        print(f"client.py: a run answered wrongly: {e}", file=sys.stderr)
        sys.exit(1)
