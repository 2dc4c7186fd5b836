"""Drives an Agent Server with LangGraph's Python SDK (langgraph-sdk 0.4.14), one scenario a run.

    python client.py URL SCENARIO [--ours]
    python client.py URL all [--ours]

URL is the server's base URL; SCENARIO one of the names in SCENARIOS below (`all` runs each in
turn). The server must serve the graphs of langgraph_app/graphs.py under the same names.
Exit status 0 when every check held; 1 otherwise, after printing each difference as
`SCENARIO: WHAT: expected X, got Y`. Nothing else is printed but one summary line.

`--ours` (or STATEGRAPH_SDK_OURS=1) turns on the few checks where stategraph deliberately
answers otherwise than LangGraph's server; they are marked `if OURS:` below. Without it the
scripts hold for `langgraph dev` as well, which is how they were checked.
"""

import asyncio
import os
import sys
import time
import uuid

import httpx
from langgraph_sdk import get_client

OURS = os.environ.get("STATEGRAPH_SDK_OURS") == "1"


class Failed(Exception):
    """A check that did not hold."""


def expect(what, expected, got):
    if expected != got:
        raise Failed(f"{what}: expected {expected!r}, got {got!r}")


def check(what, cond, detail=""):
    if not cond:
        raise Failed(f"{what}{': ' + detail if detail else ''}")


async def expect_status(what, status, awaitable):
    """Awaits a call that must fail with HTTP `status` (an int, or a predicate on it)."""
    try:
        got = await awaitable
    except httpx.HTTPStatusError as err:
        code = err.response.status_code
        ok = status(code) if callable(status) else code == status
        check(what, ok, f"expected HTTP {status if not callable(status) else '4xx'}, got {code}")
        return err
    except Exception as err:  # the SDK raised something other than an HTTP error
        raise Failed(f"{what}: expected HTTP {status}, got {type(err).__name__}: {err}") from err
    raise Failed(f"{what}: expected HTTP {status}, got success {got!r}")


async def collect(stream):
    """The (event, data) pairs of a stream, to its end."""
    return [(part.event, part.data) for part in [p async for p in stream]]


def check_metadata_first(events):
    check("stream is not empty", events)
    event, data = events[0]
    expect("first event", "metadata", event)
    check("metadata event has run_id", isinstance(data, dict) and isinstance(data.get("run_id"), str),
          repr(data))
    return data["run_id"]


async def wait_status(client, thread_id, run_id, wanted, timeout=10.0):
    """Polls a run until its status is in `wanted`; returns the run."""
    deadline = time.monotonic() + timeout
    while True:
        run = await client.runs.get(thread_id, run_id)
        if run["status"] in wanted:
            return run
        if time.monotonic() > deadline:
            raise Failed(f"run {run_id} status: expected one of {wanted}, still {run['status']!r}")
        await asyncio.sleep(0.05)


async def new_thread(client, **kwargs):
    return (await client.threads.create(**kwargs))["thread_id"]


# ---- threads -------------------------------------------------------------------------------


async def threads(client):
    suite = str(uuid.uuid4())
    t1 = await client.threads.create(metadata={"suite": suite, "kind": "a"})
    tid = t1["thread_id"]
    expect("created thread metadata", {"suite": suite, "kind": "a"}, t1["metadata"])
    expect("created thread status", "idle", t1["status"])
    for key in ("thread_id", "created_at", "updated_at", "metadata", "status", "values"):
        check(f"thread has {key}", key in t1, repr(t1))
    got = await client.threads.get(tid)
    expect("get thread id", tid, got["thread_id"])
    expect("get thread metadata", {"suite": suite, "kind": "a"}, got["metadata"])
    upd = await client.threads.update(tid, metadata={"extra": 1})
    expect("patched metadata merges", {"suite": suite, "kind": "a", "extra": 1}, upd["metadata"])
    got = await client.threads.get(tid)
    expect("patched metadata persists", {"suite": suite, "kind": "a", "extra": 1}, got["metadata"])

    t2 = await new_thread(client, metadata={"suite": suite, "kind": "b"})
    found = await client.threads.search(metadata={"suite": suite}, limit=10)
    expect("search by metadata", {tid, t2}, {t["thread_id"] for t in found})
    found = await client.threads.search(metadata={"suite": suite, "kind": "a"})
    expect("search by two metadata keys", [tid], [t["thread_id"] for t in found])
    found = await client.threads.search(metadata={"suite": suite, "kind": "c"})
    expect("search by a metadata value nobody has", [], found)
    page1 = await client.threads.search(metadata={"suite": suite}, limit=1)
    page2 = await client.threads.search(metadata={"suite": suite}, limit=1, offset=1)
    page3 = await client.threads.search(metadata={"suite": suite}, limit=1, offset=2)
    expect("search limit 1", 1, len(page1))
    expect("search offset 1", 1, len(page2))
    expect("search past the end", [], page3)
    expect("pages cover both", {tid, t2}, {page1[0]["thread_id"], page2[0]["thread_id"]})

    # An interrupted thread is found by status; the idle one is not.
    await client.runs.wait(t2, "approval", input={"log": []})
    found = await client.threads.search(metadata={"suite": suite}, status="interrupted")
    expect("search by status interrupted", [t2], [t["thread_id"] for t in found])
    found = await client.threads.search(metadata={"suite": suite}, status="idle")
    expect("search by status idle", [tid], [t["thread_id"] for t in found])
    # The run stamped graph_id and assistant_id into the thread's metadata.
    got = await client.threads.get(t2)
    expect("run stamps graph_id", "approval", got["metadata"].get("graph_id"))
    check("run stamps assistant_id", isinstance(got["metadata"].get("assistant_id"), str), repr(got))
    found = await client.threads.search(metadata={"suite": suite, "graph_id": "approval"})
    expect("search by stamped graph_id", [t2], [t["thread_id"] for t in found])

    await client.threads.delete(tid)
    await expect_status("get deleted thread", 404, client.threads.get(tid))
    await client.threads.delete(t2)


# ---- streaming -----------------------------------------------------------------------------


async def stream_values(client):
    tid = await new_thread(client)
    created = []  # the SDK reads the run from the Content-Location header
    events = await collect(client.runs.stream(
        tid, "chain", input={"log": []}, stream_mode="values", on_run_created=created.append))
    run_id = check_metadata_first(events)
    expect("run from Content-Location", [(run_id, tid)],
           [(c["run_id"], c["thread_id"]) for c in created])
    expect("values events", [
        ("values", {"log": []}),
        ("values", {"log": ["a"]}),
        ("values", {"log": ["a", "b"]}),
        ("values", {"log": ["a", "b", "c"]}),
    ], events[1:])
    run = await client.runs.get(tid, run_id)
    expect("run status after the stream closed", "success", run["status"])
    expect("run thread_id", tid, run["thread_id"])


async def stream_updates(client):
    tid = await new_thread(client)
    events = await collect(client.runs.stream(tid, "chain", input={"log": []}, stream_mode="updates"))
    check_metadata_first(events)
    expect("updates events", [
        ("updates", {"a": {"log": ["a"]}}),
        ("updates", {"b": {"log": ["b"]}}),
        ("updates", {"c": {"log": ["c"]}}),
    ], events[1:])


async def stream_custom(client):
    tid = await new_thread(client)
    events = await collect(client.runs.stream(tid, "custom", input={"log": []}, stream_mode="custom"))
    check_metadata_first(events)
    expect("custom events", [
        ("custom", {"progress": 0}),
        ("custom", {"progress": 1}),
        ("custom", {"progress": 2}),
    ], events[1:])
    events = await collect(client.runs.stream(
        tid, "custom", input={"log": []}, stream_mode=["values", "custom"]))
    check_metadata_first(events)
    expect("values and custom events", [
        ("values", {"log": ["worked"]}),
        ("custom", {"progress": 0}),
        ("custom", {"progress": 1}),
        ("custom", {"progress": 2}),
        ("values", {"log": ["worked", "worked"]}),
    ], events[1:])


async def stream_subgraphs(client):
    tid = await new_thread(client)
    events = await collect(client.runs.stream(
        tid, "nested", input={"log": []}, stream_mode=["values", "updates"], stream_subgraphs=True))
    check_metadata_first(events)
    names = set()
    normalised = []
    for event, data in events[1:]:
        mode, _, ns = event.partition("|")
        if ns:
            check("subgraph namespace is child:<task id>", ns.startswith("child:") and len(ns) > 6
                  and "|" not in ns, event)
            names.add(ns)
            event = mode + "|child"
        normalised.append((event, data))
    expect("one subgraph namespace", 1, len(names))
    expect("parent and subgraph events", [
        ("values", {"log": []}),
        ("values|child", {"log": []}),
        ("updates|child", {"a": {"log": ["a"]}}),
        ("values|child", {"log": ["a"]}),
        ("updates|child", {"b": {"log": ["b"]}}),
        ("values|child", {"log": ["a", "b"]}),
        ("updates|child", {"c": {"log": ["c"]}}),
        ("values|child", {"log": ["a", "b", "c"]}),
        ("updates", {"child": {"log": ["a", "b", "c"]}}),
        ("values", {"log": ["a", "b", "c"]}),
        ("updates", {"after": {"log": ["after"]}}),
        ("values", {"log": ["a", "b", "c", "after"]}),
    ], normalised)
    # Without stream_subgraphs the child's events stay inside.
    tid = await new_thread(client)
    events = await collect(client.runs.stream(
        tid, "nested", input={"log": []}, stream_mode=["updates"]))
    expect("updates without subgraphs", [
        ("updates", {"child": {"log": ["a", "b", "c"]}}),
        ("updates", {"after": {"log": ["after"]}}),
    ], events[1:])


def unset_dropped(values):
    """Values as LangGraph shows them: with --ours, fields still null are dropped, since our
    typed state shows every field (an unset one as null) where LangGraph omits the channels
    nobody wrote."""
    if not OURS or not isinstance(values, dict):
        return values
    return {k: v for k, v in values.items() if v is not None}


async def stream_error(client):
    tid = await new_thread(client)
    events = await collect(client.runs.stream(tid, "boom", input={"log": []}, stream_mode="values"))
    run_id = check_metadata_first(events)
    expect("events of a failing run", [
        ("values", {"log": []}),
        # A node's failure has no Python exception class on our server: it is a NodeError.
        ("error", {"error": "NodeError" if OURS else "ValueError", "message": "boom"}),
    ], events[1:])
    run = await client.runs.get(tid, run_id)
    expect("failed run status", "error", run["status"])
    thread = await client.threads.get(tid)
    expect("failed run's thread status", "error", thread["status"])
    # The thread takes a new run after the failure.
    survived = await client.runs.wait(tid, "boom", input={"log": ["ok"]})
    expect("the new run's values", {"log": ["ok", "survived"]}, survived)
    thread = await client.threads.get(tid)
    expect("thread status after a good run", "idle", thread["status"])


# ---- interrupts, forks, state --------------------------------------------------------------


async def interrupt_resume(client):
    tid = await new_thread(client)
    events = await collect(client.runs.stream(
        tid, "approval", input={"log": []}, stream_mode="values"))
    run_id = check_metadata_first(events)
    expect("event names up to the interrupt", ["values", "values"], [e for e, _ in events[1:]])
    expect("first values", {"log": []}, unset_dropped(events[1][1]))
    last = events[-1][1]
    interrupts = last.get("__interrupt__")
    check("last values event carries __interrupt__", isinstance(interrupts, list)
          and len(interrupts) == 1, repr(last))
    expect("interrupt value", {"question": "approve?"}, interrupts[0].get("value"))
    check("interrupt has an id", isinstance(interrupts[0].get("id"), str), repr(interrupts[0]))
    interrupt_id = interrupts[0]["id"]
    expect("values beside the interrupt", {"log": []},
           unset_dropped({k: v for k, v in last.items() if k != "__interrupt__"}))

    run = await client.runs.get(tid, run_id)
    expect("interrupted run status", "success", run["status"])
    thread = await client.threads.get(tid)
    expect("thread status", "interrupted", thread["status"])
    thread_interrupts = [i for group in thread["interrupts"].values() for i in group]
    expect("thread interrupts", [interrupt_id], [i["id"] for i in thread_interrupts])
    state = await client.threads.get_state(tid)
    expect("state next", ["ask"], state["next"])
    expect("state tasks", ["ask"], [t["name"] for t in state["tasks"]])
    task_interrupts = state["tasks"][0]["interrupts"]
    expect("task interrupt", [(interrupt_id, {"question": "approve?"})],
           [(i["id"], i["value"]) for i in task_interrupts])
    expect("state interrupts", [interrupt_id], [i["id"] for i in state["interrupts"]])

    events = await collect(client.runs.stream(
        tid, "approval", command={"resume": "yes"}, stream_mode="values"))
    check_metadata_first(events)
    final = events[-1]
    expect("final values", ("values", {"log": ["asked", "finished"], "decision": "yes"}), final)
    state = await client.threads.get_state(tid)
    expect("state after resume", {"log": ["asked", "finished"], "decision": "yes"}, state["values"])
    expect("state next after resume", [], state["next"])
    thread = await client.threads.get(tid)
    expect("thread status after resume", "idle", thread["status"])


async def stream_debug(client):
    """The checkpoints, tasks and debug modes through an interrupt and its resume."""
    tid = await new_thread(client)
    modes = ["checkpoints", "tasks", "debug"]
    events = await collect(client.runs.stream(
        tid, "approval", input={"log": []}, stream_mode=modes))
    check_metadata_first(events)
    frames = events[1:]
    cps = [d for e, d in frames if e == "checkpoints"]
    expect("checkpoint steps", [-1, 0], [c["metadata"]["step"] for c in cps])
    expect("checkpoint sources", ["input", "loop"], [c["metadata"]["source"] for c in cps])
    expect("checkpoint next", [["__start__"], ["ask"]], [c["next"] for c in cps])
    expect("parents chain", cps[0]["config"]["configurable"]["checkpoint_id"],
           cps[1]["parent_config"]["configurable"]["checkpoint_id"])
    announced = cps[1]["tasks"][0]["id"]
    starts = [d for e, d in frames if e == "tasks" and "input" in d]
    expect("task started", [("ask", announced, ["branch:to:ask"])],
           [(d["name"], d["id"], d["triggers"]) for d in starts])
    expect("task input", {"log": []}, unset_dropped(starts[0]["input"]))
    results = [d for e, d in frames if e == "tasks" and "result" in d]
    expect("task result interrupts", [[{"question": "approve?"}]],
           [[i["value"] for i in d["interrupts"]] for d in results])
    debug = [(d["type"], d["step"]) for e, d in frames if e == "debug"]
    expect("debug frames", [("checkpoint", -1), ("checkpoint", 0), ("task", 1),
                            ("task_result", 1)], debug)

    events = await collect(client.runs.stream(
        tid, "approval", command={"resume": "yes"}, stream_mode=modes))
    frames = events[1:]
    cps = [d for e, d in frames if e == "checkpoints"]
    expect("resumed from the head, then two steps", [0, 1, 2],
           [c["metadata"]["step"] for c in cps])
    expect("the head's task carries its interrupt", [{"question": "approve?"}],
           [i["value"] for i in cps[0]["tasks"][0]["interrupts"]])
    results = [(d["name"], d["result"]) for e, d in frames if e == "tasks" and "result" in d]
    expect("task results after the resume",
           [("ask", {"decision": "yes", "log": ["asked"]}), ("finish", {"log": ["finished"]})],
           results)
    expect("last checkpoint values", {"log": ["asked", "finished"], "decision": "yes"},
           cps[-1]["values"])


def human(text):
    return {"type": "human", "content": text}


async def fork(client):
    tid = await new_thread(client)
    await client.runs.wait(tid, "agent", input={"messages": [human("hello")]})
    done = await client.runs.wait(tid, "agent", input={"messages": [human("again")]})
    expect("contents before the fork", ["hello", "You said: hello", "again", "You said: again"],
           [m["content"] for m in done["messages"]])
    history = await client.threads.get_history(tid, limit=100)
    old_head = history[0]["checkpoint"]
    # As agent-chat-ui edits a message: the first state (oldest) in which the message appears,
    # and its parent checkpoint.
    first_seen = [s for s in history
                  if any(m["content"] == "again" for m in s["values"].get("messages", []))][-1]
    parent = first_seen["parent_checkpoint"]
    check("first state with the message has a parent", parent is not None, repr(first_seen))
    forked = await client.runs.wait(
        tid, "agent", input={"messages": [human("edited")]}, checkpoint=parent)
    expect("contents after the fork", ["hello", "You said: hello", "edited", "You said: edited"],
           [m["content"] for m in forked["messages"]])
    state = await client.threads.get_state(tid)
    expect("thread state follows the fork",
           ["hello", "You said: hello", "edited", "You said: edited"],
           [m["content"] for m in state["values"]["messages"]])
    after = await client.threads.get_history(tid, limit=100)
    check("history grew", len(after) > len(history), f"{len(history)} -> {len(after)}")
    old = await client.threads.get_state(tid, checkpoint=old_head)
    expect("the old branch stays reachable",
           ["hello", "You said: hello", "again", "You said: again"],
           [m["content"] for m in old["values"]["messages"]])


async def update_state(client):
    # LangGraph needs to know the thread's graph before its first run: graph_id in metadata.
    tid = await new_thread(client, graph_id="chain")
    res = await client.threads.update_state(tid, {"log": ["x"]}, as_node="a")
    check("update_state answers a checkpoint", isinstance(res.get("checkpoint"), dict), repr(res))
    state = await client.threads.get_state(tid)
    expect("values after update_state", {"log": ["x"]}, state["values"])
    expect("next after update_state as a", ["b"], state["next"])
    expect("update_state's checkpoint is the head", res["checkpoint"]["checkpoint_id"],
           state["checkpoint"]["checkpoint_id"])
    done = await client.runs.wait(tid, "chain", input=None)
    expect("a run goes on from b", {"log": ["x", "b", "c"]}, done)
    await client.threads.update_state(tid, {"log": ["y"]}, as_node="a")
    state = await client.threads.get_state(tid)
    expect("values after a second update_state", {"log": ["x", "b", "c", "y"]}, state["values"])
    expect("next after the second update_state", ["b"], state["next"])


async def history(client):
    tid = await new_thread(client)
    await client.runs.wait(tid, "chain", input={"log": []})
    items = await client.threads.get_history(tid, limit=10)
    expect("history length of a 3-node run", 5, len(items))
    keys = ("values", "next", "checkpoint", "parent_checkpoint", "tasks", "metadata",
            "created_at", "interrupts")
    for i, item in enumerate(items):
        for key in keys:
            check(f"history item {i} has {key}", key in item, repr(sorted(item)))
    expect("history values, newest first",
           [{"log": ["a", "b", "c"]}, {"log": ["a", "b"]}, {"log": ["a"]}, {"log": []}, {"log": []}],
           [s["values"] for s in items])
    expect("history next", [[], ["c"], ["b"], ["a"], ["__start__"]], [s["next"] for s in items])
    expect("history steps", [3, 2, 1, 0, -1], [s["metadata"]["step"] for s in items])
    expect("history sources", ["loop", "loop", "loop", "loop", "input"],
           [s["metadata"]["source"] for s in items])
    expect("history tasks", [[], ["c"], ["b"], ["a"], ["__start__"]],
           [[t["name"] for t in s["tasks"]] for s in items])
    for newer, older in zip(items, items[1:]):
        expect("parent_checkpoint is the next item's checkpoint",
               older["checkpoint"]["checkpoint_id"], newer["parent_checkpoint"]["checkpoint_id"])
    expect("oldest has no parent", None, items[-1]["parent_checkpoint"])
    expect("checkpoint thread_id", tid, items[0]["checkpoint"]["thread_id"])
    expect("checkpoint ns", "", items[0]["checkpoint"]["checkpoint_ns"])
    check("created_at is a string", isinstance(items[0]["created_at"], str), repr(items[0]))

    two = await client.threads.get_history(tid, limit=2)
    expect("limit 2", [s["checkpoint"]["checkpoint_id"] for s in items[:2]],
           [s["checkpoint"]["checkpoint_id"] for s in two])
    # `before` is a config, as the JS SDK types it: LangGraph's server reads
    # before["configurable"]["checkpoint_id"] (a bare Checkpoint there is a 500, a string 422).
    before = await client.threads.get_history(
        tid, limit=10,
        before={"configurable": {"checkpoint_id": items[1]["checkpoint"]["checkpoint_id"]}})
    expect("before", [s["checkpoint"]["checkpoint_id"] for s in items[2:]],
           [s["checkpoint"]["checkpoint_id"] for s in before])
    by_step = await client.threads.get_history(tid, limit=10, metadata={"step": 1})
    expect("metadata filter", [items[2]["checkpoint"]["checkpoint_id"]],
           [s["checkpoint"]["checkpoint_id"] for s in by_step])
    by_cp = await client.threads.get_state(tid, checkpoint=items[2]["checkpoint"])
    expect("state at a checkpoint", {"log": ["a"]}, by_cp["values"])


# ---- runs ----------------------------------------------------------------------------------


async def wait_join(client):
    tid = await new_thread(client)
    done = await client.runs.wait(tid, "chain", input={"log": []})
    expect("runs.wait values", {"log": ["a", "b", "c"]}, done)
    run = await client.runs.create(tid, "chain", input={"log": []})
    for key in ("run_id", "thread_id", "assistant_id", "created_at", "updated_at", "status",
                "metadata", "multitask_strategy"):
        check(f"run has {key}", key in run, repr(run))
    check("new run status", run["status"] in ("pending", "running"), run["status"])
    joined = await client.runs.join(tid, run["run_id"])
    expect("runs.join values", {"log": ["a", "b", "c", "a", "b", "c"]}, joined)
    got = await client.runs.get(tid, run["run_id"])
    expect("joined run status", "success", got["status"])
    if OURS:
        # The run's token usage, a field LangGraph's Run lacks: the chain calls no model.
        expect("ended run usage",
               {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0, "model_calls": 0},
               got.get("usage"))
    runs = await client.runs.list(tid)
    expect("runs.list count", 2, len(runs))
    expect("runs.list newest first", run["run_id"], runs[0]["run_id"])
    expect("runs.list statuses", ["success", "success"], [r["status"] for r in runs])
    stateless = await client.runs.wait(None, "chain", input={"log": []})
    expect("stateless runs.wait values", {"log": ["a", "b", "c"]}, stateless)


async def context(client):
    tid = await new_thread(client)
    done = await client.runs.wait(tid, "greet", input={"log": []},
                                  context={"user": "user-7f3a9c", "tier": 2})
    expect("a run's context reaches its node", {"log": ["hello user-7f3a9c (tier 2)"]}, done)
    default = await client.runs.wait(tid, "greet", input={"log": []}, context={"user": "bo"})
    expect("a field the context leaves out takes its default",
           {"log": ["hello user-7f3a9c (tier 2)", "hello bo (tier 1)"]}, default)
    none = await client.runs.wait(None, "greet", input={"log": []})
    expect("a run without context gets the default one", {"log": ["hello  (tier 1)"]}, none)
    state = await client.threads.get_state(tid)
    check("the context is not in the thread's metadata",
          "user-7f3a9c" not in repr(state["metadata"]), repr(state["metadata"]))
    if OURS:
        # LangGraph passes a context that does not fit its schema to the run, which fails;
        # we refuse it with 422 naming the type (decision 0094).
        await expect_status("a context that does not fit", 422, client.runs.create(
            tid, "greet", input={"log": []}, context={"user": "ada", "tier": "gold"}))


async def cancel(client):
    tid = await new_thread(client)
    run = await client.runs.create(tid, "slow", input={"steps": 50, "delay_ms": 100})
    await wait_status(client, tid, run["run_id"], ("running",))
    await asyncio.sleep(0.3)
    await client.runs.cancel(tid, run["run_id"], wait=True)
    got = await client.runs.get(tid, run["run_id"])
    expect("cancelled run status", "interrupted", got["status"])
    thread = await client.threads.get(tid)
    # LangGraph leaves the thread interrupted (its head has next == ["tick"]).
    expect("thread status after cancel", "interrupted", thread["status"])
    state = await client.threads.get_state(tid)
    ticks = len(state["values"].get("log", []))
    check("the cancelled run stopped early", 0 < ticks < 50, f"{ticks} ticks")
    done = await client.runs.wait(tid, "slow", input={"steps": 0, "delay_ms": 0})
    expect("a run after the cancel", ticks + 1, len(done["log"]))
    runs = await client.runs.list(tid)
    expect("run statuses after cancel", ["success", "interrupted"], [r["status"] for r in runs])


async def reject_busy(client):
    tid = await new_thread(client)
    run = await client.runs.create(tid, "slow", input={"steps": 50, "delay_ms": 100})
    await wait_status(client, tid, run["run_id"], ("running",))
    thread = await client.threads.get(tid)
    expect("thread status while running", "busy", thread["status"])
    err = await expect_status("second run with reject", 409, client.runs.create(
        tid, "chain", input={"log": []}, multitask_strategy="reject"))
    body = err.response.json()
    check("409 body has detail", isinstance(body.get("detail"), str), repr(body))
    runs = await client.runs.list(tid)
    expect("the rejected run was not kept", [run["run_id"]], [r["run_id"] for r in runs])
    # Without a multitask_strategy the server queues the run (LangGraph's default: enqueue).
    queued = await client.runs.create(tid, "slow", input={"steps": 0, "delay_ms": 0})
    expect("default multitask_strategy", "enqueue", queued["multitask_strategy"])
    expect("default strategy queues the run", "pending",
           (await client.runs.get(tid, queued["run_id"]))["status"])
    await client.runs.cancel(tid, queued["run_id"], wait=True)
    await client.runs.cancel(tid, run["run_id"], wait=True)
    runs = await client.runs.list(tid)
    expect("statuses after cancelling both", ["interrupted", "interrupted"],
           [r["status"] for r in runs])


async def enqueue(client):
    tid = await new_thread(client)
    first = await client.runs.create(tid, "slow", input={"steps": 3, "delay_ms": 200})
    second = await client.runs.create(
        tid, "slow", input={"steps": 5, "delay_ms": 0}, multitask_strategy="enqueue")
    got = await client.runs.get(tid, second["run_id"])
    expect("queued run status while the first runs", "pending", got["status"])
    expect("queued run multitask_strategy", "enqueue", got["multitask_strategy"])
    one = await client.runs.join(tid, first["run_id"])
    expect("first run's values (no write from the second)", ["tick0", "tick1", "tick2"], one["log"])
    two = await client.runs.join(tid, second["run_id"])
    expect("second run's values", ["tick0", "tick1", "tick2", "tick3", "tick4"], two["log"])
    r1 = await client.runs.get(tid, first["run_id"])
    r2 = await client.runs.get(tid, second["run_id"])
    expect("statuses", ("success", "success"), (r1["status"], r2["status"]))
    check("second created after first", r2["created_at"] > r1["created_at"],
          f"{r1['created_at']} / {r2['created_at']}")
    check("second ended after first", r2["updated_at"] >= r1["updated_at"],
          f"{r1['updated_at']} / {r2['updated_at']}")


async def resume_stream(client):
    tid = await new_thread(client)
    seen = []
    stream = client.runs.stream(
        tid, "slow", input={"steps": 6, "delay_ms": 200}, stream_mode="values",
        stream_resumable=True, on_disconnect="continue")
    async for part in stream:
        check("resumable frames carry an id", part.id is not None, repr(part))
        seen.append(part)
        if len(seen) == 3:
            break
    await stream.aclose()
    expect("first events", ["metadata", "values", "values"], [p.event for p in seen])
    run_id = seen[0].data["run_id"]
    rest = [p async for p in client.runs.join_stream(tid, run_id, last_event_id=seen[-1].id)]
    for part in rest:
        check("replayed frames carry an id", part.id is not None, repr(part))
    ids = [p.id for p in seen + rest]
    expect("no event id repeats", len(ids), len(set(ids)))
    values = [p.data for p in seen + rest if p.event == "values"]
    expect("every values event once", [
        {"steps": 6, "delay_ms": 200, "log": [f"tick{i}" for i in range(n)]} for n in range(7)
    ], values)
    expect("events after the resume point", ["values"] * 5, [p.event for p in rest])
    run = await client.runs.get(tid, run_id)
    expect("run status at the stream's end", "success", run["status"])
    # Replaying from the start gives the whole log again.
    again = [p async for p in client.runs.join_stream(tid, run_id, last_event_id="-1")]
    expect("replay from -1", [p.event for p in seen + rest], [p.event for p in again])


async def errors(client):
    missing = str(uuid.uuid4())
    await expect_status("unknown assistant id", 404, client.assistants.get(missing))
    tid = await new_thread(client)
    # A name that is neither a graph nor a UUID is a validation error (422) on LangGraph's
    # server; an unknown assistant UUID is 404.
    err = await expect_status("run on an unknown graph name", 422,
                              client.runs.create(tid, "no_such_graph", input={}))
    check("the 422 names the assistant", "no_such_graph" in err.response.text, err.response.text)
    await expect_status("run on an unknown assistant id", 404,
                        client.runs.create(tid, missing, input={}))
    await expect_status("unknown thread", 404, client.threads.get(missing))
    await expect_status("state of an unknown thread", 404, client.threads.get_state(missing))
    await expect_status("run on an unknown thread", 404,
                        client.runs.create(missing, "chain", input={"log": []}))
    await expect_status("unknown run", 404, client.runs.get(tid, missing))
    if OURS:
        err = await expect_status("wrong type in input", 422, client.runs.wait(
            tid, "chain", input={"log": 5}))
        check("the 422 names the field", "log" in err.response.text, err.response.text)
    else:
        # LangGraph accepts the run, which fails in the reducer: runs.wait answers 200 with the
        # error as its body, and the SDK raises it.
        try:
            got = await client.runs.wait(tid, "chain", input={"log": 5}, raise_error=False)
        except httpx.HTTPStatusError as err:
            raise Failed(f"wrong type in input: LangGraph answered HTTP "
                         f"{err.response.status_code}") from err
        check("wrong type in input fails the run", isinstance(got, dict) and "__error__" in got,
              repr(got))
    await client.runs.wait(tid, "chain", input={"log": []})


async def reconnect(client):
    """A resumable stream read to its end. Through a proxy that cuts the connection mid-run
    (the server's `reconnect` test), the SDK's own reconnect must give every step's values
    once, in order: nothing lost, nothing repeated."""
    tid = await new_thread(client)
    events = await collect(client.runs.stream(
        tid, "slow", input={"steps": 8, "delay_ms": 100}, stream_mode="values",
        stream_resumable=True, on_disconnect="continue"))
    check_metadata_first(events)
    logs = [data["log"] for event, data in events if event == "values"]
    expect("every step's values once, in order",
           [[f"tick{i}" for i in range(n)] for n in range(9)], logs)


async def stream_messages(client):
    tid = await new_thread(client)
    events = await collect(client.runs.stream(
        tid, "chat", input={"messages": [human("hello there")]},
        stream_mode=["messages-tuple", "values"]))
    check_metadata_first(events)
    names = [event for event, _ in events[1:]]
    tuples = [data for event, data in events if event == "messages"]
    check("several chunks", len(tuples) >= 3, repr(tuples))
    check("chunks come between the input's values and the answer's",
          names[0] == "values" and names[-1] == "values" and set(names[1:-1]) == {"messages"},
          repr(names))
    for chunk, meta in tuples:
        expect("chunk type", "AIMessageChunk", chunk["type"])
        expect("chunk node", "model", meta["langgraph_node"])
        expect("chunk step", 1, meta["langgraph_step"])
        check("chunk namespace names the node's task",
              meta["langgraph_checkpoint_ns"].startswith("model:"), repr(meta))
    ids = {chunk["id"] for chunk, _ in tuples}
    expect("one message id across the chunks", 1, len(ids))
    expect("joined chunks", "You said: hello there", "".join(c["content"] for c, _ in tuples))
    expect("the last chunk says so", "last", tuples[-1][0].get("chunk_position"))
    final = events[-1][1]["messages"]
    expect("message kinds", ["human", "ai"], [m["type"] for m in final])
    expect("answer", "You said: hello there", final[-1]["content"])
    expect("the streamed id is the id the thread keeps", ids.pop(), final[-1]["id"])

    # As agent-chat-ui sends a message: the role form, content as a list of blocks.
    said = {"role": "user", "content": [{"type": "text", "text": "once more"}]}
    events = await collect(client.runs.stream(
        tid, "chat", input={"messages": [said]}, stream_mode="messages"))
    check_metadata_first(events)
    expect("first event after metadata", "messages/metadata", events[1][0])
    (mid, meta), = events[1][1].items()
    expect("metadata node", "model", meta["metadata"]["langgraph_node"])
    partials = [data[0] for event, data in events if event == "messages/partial"]
    check("several partials", len(partials) >= 3, repr(partials))
    contents = [p["content"] for p in partials]
    check("each partial extends the one before",
          all(b.startswith(a) and len(b) > len(a) for a, b in zip(contents, contents[1:-1])),
          repr(contents))
    expect("the last partial", "You said: once more", contents[-1])
    check("partials are of the message", all(p["id"] == mid for p in partials))
    complete = [data[0] for event, data in events if event == "messages/complete"]
    if OURS:
        expect("a streamed message ends complete", ["You said: once more"],
               [m["content"] for m in complete])


async def store(client):
    # A fresh root label keeps the scenario's items apart from any other run's.
    root = "s" + uuid.uuid4().hex[:12]
    alice, notes, bob = [root, "alice"], [root, "alice", "notes"], [root, "bob"]
    await client.store.put_item(alice, "tea", {"text": "prefers green tea", "kind": "fact", "n": 3})
    await client.store.put_item(alice, "plan", {"text": "pro plan", "kind": "account", "n": 1})
    await client.store.put_item(notes, "coffee", {"text": "black coffee", "kind": "fact", "n": 2})
    await client.store.put_item(bob, "tea", {"text": "likes mint tea", "kind": "fact", "n": 5})

    got = await client.store.get_item(alice, "tea")
    expect("get namespace", alice, got["namespace"])
    expect("get key", "tea", got["key"])
    expect("get value", {"text": "prefers green tea", "kind": "fact", "n": 3}, got["value"])
    for field in ("created_at", "updated_at"):
        check(f"get {field} is RFC 3339", isinstance(got[field], str) and "T" in got[field],
              repr(got[field]))
    expect("get a missing key", None, await client.store.get_item(alice, "nope"))
    got = await client.store.get_item(alice, "tea", refresh_ttl=False)
    expect("get without refreshing", "tea", got["key"])

    # A second put replaces the value. It keeps the creation time on ours (and on
    # LangGraph's PostgresStore); `langgraph dev`'s in-memory store stamps a new one.
    first = got
    await client.store.put_item(alice, "tea", {"text": "prefers green tea", "kind": "fact", "n": 4})
    got = await client.store.get_item(alice, "tea")
    expect("put replaces the value", 4, got["value"]["n"])
    check("put moves updated_at on", got["updated_at"] >= first["updated_at"], repr(got))
    if OURS:
        expect("put keeps created_at", first["created_at"], got["created_at"])

    found = (await client.store.search_items([root]))["items"]
    expect("search under the root", {("alice", "tea"), ("alice", "plan"), ("notes", "coffee"),
                                      ("bob", "tea")},
           {(i["namespace"][-1], i["key"]) for i in found})
    check("search items have a score field", all("score" in i for i in found), repr(found))
    expect("no query, no score", {None}, {i["score"] for i in found})
    found = (await client.store.search_items(alice))["items"]
    expect("search under a prefix", {"tea", "plan", "coffee"}, {i["key"] for i in found})
    found = (await client.store.search_items([root], filter={"kind": "fact"}))["items"]
    expect("filter by equality", {("alice", "tea"), ("notes", "coffee"), ("bob", "tea")},
           {(i["namespace"][-1], i["key"]) for i in found})
    found = (await client.store.search_items([root], filter={"n": {"$gte": 4}}))["items"]
    expect("filter with $gte", {("alice", "tea"), ("bob", "tea")},
           {(i["namespace"][-1], i["key"]) for i in found})
    found = (await client.store.search_items([root], filter={"kind": {"$ne": "fact"}}))["items"]
    expect("filter with $ne", ["plan"], [i["key"] for i in found])
    page1 = (await client.store.search_items([root], limit=2))["items"]
    page2 = (await client.store.search_items([root], limit=2, offset=2))["items"]
    expect("pages of two", [2, 2], [len(page1), len(page2)])
    expect("pages cover all four", 4,
           len({(tuple(i["namespace"]), i["key"]) for i in page1 + page2}))
    found = (await client.store.search_items([root], query="coffee"))["items"]
    check("a query finds the item it names", any(i["key"] == "coffee" for i in found), repr(found))
    if OURS:
        # Without a vector index we rank by full text: only matching items, with a score.
        expect("full-text search keeps the matches", ["coffee"], [i["key"] for i in found])
        check("a ranked item has a score", isinstance(found[0]["score"], float), repr(found))

    listed = (await client.store.list_namespaces(prefix=[root]))["namespaces"]
    expect("namespaces under the root", [alice, notes, bob], listed)
    listed = (await client.store.list_namespaces(prefix=[root], max_depth=2))["namespaces"]
    expect("namespaces cut to depth 2", [alice, bob], listed)
    listed = (await client.store.list_namespaces(prefix=[root], suffix=["notes"]))["namespaces"]
    expect("namespaces by suffix", [notes], listed)
    listed = (await client.store.list_namespaces(prefix=[root, "*"], suffix=["tea"]))["namespaces"]
    expect("a suffix no namespace has", [], listed)
    listed = (await client.store.list_namespaces(prefix=[root], limit=1, offset=1))["namespaces"]
    expect("a page of namespaces", [notes], listed)

    await client.store.delete_item(alice, "plan")
    expect("deleted item is gone", None, await client.store.get_item(alice, "plan"))
    await client.store.delete_item(alice, "plan")  # deleting twice is no error
    await client.store.delete_item(bob, "tea")
    listed = (await client.store.list_namespaces(prefix=[root]))["namespaces"]
    if OURS:
        # `langgraph dev` lists a namespace whose last item was deleted; we list it no more.
        expect("an emptied namespace is not listed", [alice, notes], listed)

    await client.store.put_item(alice, "brief", {"text": "for a while"}, ttl=5, index=False)
    got = await client.store.get_item(alice, "brief", refresh_ttl=True)
    expect("an item with a TTL reads back", {"text": "for a while"}, got["value"])

    err = await expect_status("a namespace label with a dot", 422, client.http.put(
        "/store/items", json={"namespace": [root, "a.b"], "key": "k", "value": {}}))
    check("the 422 names the label", "a.b" in err.response.text, err.response.text)
    await expect_status("a value that is not an object", 422, client.http.put(
        "/store/items", json={"namespace": alice, "key": "k", "value": [1, 2]}))
    await expect_status("a put without a key", 422, client.http.put(
        "/store/items", json={"namespace": alice, "value": {}}))
    await expect_status("a namespace that is not a list", 422, client.http.post(
        "/store/namespaces", json={"prefix": root}))
    if OURS:
        # LangGraph answers an unknown filter operator 400 and an empty namespace 400.
        err = await expect_status("an unknown filter operator", 422, client.store.search_items(
            [root], filter={"n": {"$in": [1]}}))
        check("the 422 names the operator", "$in" in err.response.text, err.response.text)
        await expect_status("an empty namespace", 422, client.http.put(
            "/store/items", json={"namespace": [], "key": "k", "value": {}}))


SCENARIOS = {f.__name__: f for f in [
    threads, stream_values, stream_updates, stream_custom, stream_subgraphs, stream_error,
    interrupt_resume, fork, update_state, history, wait_join, context, cancel, reject_busy,
    enqueue, resume_stream, errors, reconnect, stream_messages, store, stream_debug,
]}


async def run(url, names):
    client = get_client(url=url)
    failures = []
    for name in names:
        try:
            await SCENARIOS[name](client)
        except Failed as err:
            failures.append(f"{name}: {err}")
        except Exception as err:  # an SDK error is a difference too
            failures.append(f"{name}: {type(err).__name__}: {err}")
    return failures


def main(argv):
    global OURS
    args = [a for a in argv[1:] if a != "--ours"]
    OURS = OURS or "--ours" in argv
    if len(args) != 2 or (args[1] != "all" and args[1] not in SCENARIOS):
        print(f"usage: client.py URL SCENARIO|all [--ours]; scenarios: {' '.join(SCENARIOS)}",
              file=sys.stderr)
        return 2
    names = list(SCENARIOS) if args[1] == "all" else [args[1]]
    failures = asyncio.run(run(args[0], names))
    for failure in failures:
        print(failure)
    print(f"python sdk: {len(names) - len(failures)}/{len(names)} scenarios passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
