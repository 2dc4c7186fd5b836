// Drives an Agent Server with LangGraph's JS SDK (@langchain/langgraph-sdk 1.x), one scenario
// a run; the JS twin of client.py.
//
//     node client.mjs URL SCENARIO [--ours]
//     node client.mjs URL all [--ours]
//
// Finding the SDK: .ci/sdk-clients.sh installs it under <dir>/js/node_modules, where <dir> is
// $STATEGRAPH_SDK_CLIENTS (the line that script prints last), or by default target/sdk-clients
// of the repository this file is in. The script reads the package's own package.json there
// and imports its ESM entry by file URL, so it runs from anywhere without a node_modules of
// its own.
//
// Exit status 0 when every check held; 1 otherwise, after printing each difference as
// `SCENARIO: WHAT: expected X, got Y`. Nothing else is printed but one summary line.
// `--ours` (or STATEGRAPH_SDK_OURS=1) turns on the few checks where stategraph deliberately
// answers otherwise than LangGraph's server (marked `if (OURS)`).

import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { isDeepStrictEqual } from "node:util";
import { randomUUID } from "node:crypto";

const here = dirname(fileURLToPath(import.meta.url));
const clientsDir =
  process.env.STATEGRAPH_SDK_CLIENTS || join(here, "..", "..", "..", "target", "sdk-clients");
const packageDir = join(clientsDir, "js", "node_modules", "@langchain", "langgraph-sdk");
const pkg = JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8"));
const { Client } = await import(pathToFileURL(join(packageDir, pkg.exports["."].import.default)).href);

let OURS = process.env.STATEGRAPH_SDK_OURS === "1";

class Failed extends Error {}

const show = (v) => JSON.stringify(v);

function expect(what, expected, got) {
  if (!isDeepStrictEqual(expected, got)) {
    throw new Failed(`${what}: expected ${show(expected)}, got ${show(got)}`);
  }
}

function check(what, cond, detail = "") {
  if (!cond) throw new Failed(detail ? `${what}: ${detail}` : what);
}

/** Awaits a call that must fail with HTTP `status`; returns the error. */
async function expectStatus(what, status, promise) {
  let got;
  try {
    got = await promise;
  } catch (err) {
    check(what, err?.status === status, `expected HTTP ${status}, got ${err?.status ?? err}`);
    return err;
  }
  throw new Failed(`${what}: expected HTTP ${status}, got success ${show(got)}`);
}

async function collect(stream) {
  const out = [];
  for await (const part of stream) out.push([part.event, part.data]);
  return out;
}

function metadataFirst(events) {
  check("stream is not empty", events.length > 0);
  const [event, data] = events[0];
  expect("first event", "metadata", event);
  check("metadata event has run_id", typeof data?.run_id === "string", show(data));
  return data.run_id;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function waitStatus(client, threadId, runId, wanted, timeoutMs = 10000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const run = await client.runs.get(threadId, runId);
    if (wanted.includes(run.status)) return run;
    if (Date.now() > deadline) {
      throw new Failed(`run ${runId} status: expected one of ${show(wanted)}, still ${run.status}`);
    }
    await sleep(50);
  }
}

const newThread = async (client, payload = {}) => (await client.threads.create(payload)).thread_id;
const ids = (threads) => threads.map((t) => t.thread_id);
const human = (text) => ({ type: "human", content: text });
const contents = (messages) => messages.map((m) => m.content);

// ---- threads --------------------------------------------------------------------------------

async function threads(client) {
  const suite = randomUUID();
  const t1 = await client.threads.create({ metadata: { suite, kind: "a" } });
  const tid = t1.thread_id;
  expect("created thread metadata", { suite, kind: "a" }, t1.metadata);
  expect("created thread status", "idle", t1.status);
  const got = await client.threads.get(tid);
  expect("get thread id", tid, got.thread_id);
  const upd = await client.threads.update(tid, { metadata: { extra: 1 } });
  expect("patched metadata merges", { suite, kind: "a", extra: 1 }, upd.metadata);
  expect("patched metadata persists", { suite, kind: "a", extra: 1 },
    (await client.threads.get(tid)).metadata);

  const t2 = await newThread(client, { metadata: { suite, kind: "b" } });
  expect("search by metadata", [t2, tid].sort(),
    ids(await client.threads.search({ metadata: { suite } })).sort());
  expect("search by two metadata keys", [tid],
    ids(await client.threads.search({ metadata: { suite, kind: "a" } })));
  expect("search by a metadata value nobody has", [],
    await client.threads.search({ metadata: { suite, kind: "c" } }));
  const page1 = await client.threads.search({ metadata: { suite }, limit: 1 });
  const page2 = await client.threads.search({ metadata: { suite }, limit: 1, offset: 1 });
  const page3 = await client.threads.search({ metadata: { suite }, limit: 1, offset: 2 });
  expect("search page sizes", [1, 1, 0], [page1.length, page2.length, page3.length]);
  expect("pages cover both", [t2, tid].sort(), [...ids(page1), ...ids(page2)].sort());

  await client.runs.wait(t2, "approval", { input: { log: [] } });
  expect("search by status interrupted", [t2],
    ids(await client.threads.search({ metadata: { suite }, status: "interrupted" })));
  expect("search by status idle", [tid],
    ids(await client.threads.search({ metadata: { suite }, status: "idle" })));
  const stamped = (await client.threads.get(t2)).metadata;
  expect("run stamps graph_id", "approval", stamped.graph_id);
  check("run stamps assistant_id", typeof stamped.assistant_id === "string", show(stamped));

  await client.threads.delete(tid);
  await expectStatus("get deleted thread", 404, client.threads.get(tid));
  await client.threads.delete(t2);
}

// ---- streaming ------------------------------------------------------------------------------

async function stream_values(client) {
  const tid = await newThread(client);
  const created = []; // the SDK reads the run from the Content-Location header
  const events = await collect(client.runs.stream(tid, "chain", {
    input: { log: [] }, streamMode: "values", onRunCreated: (meta) => created.push(meta),
  }));
  const runId = metadataFirst(events);
  expect("run from Content-Location", [[runId, tid]],
    created.map((c) => [c.run_id, c.thread_id]));
  expect("values events", [
    ["values", { log: [] }],
    ["values", { log: ["a"] }],
    ["values", { log: ["a", "b"] }],
    ["values", { log: ["a", "b", "c"] }],
  ], events.slice(1));
  expect("run status after the stream closed", "success",
    (await client.runs.get(tid, runId)).status);
}

async function stream_updates(client) {
  const tid = await newThread(client);
  const events = await collect(
    client.runs.stream(tid, "chain", { input: { log: [] }, streamMode: "updates" }));
  metadataFirst(events);
  expect("updates events", [
    ["updates", { a: { log: ["a"] } }],
    ["updates", { b: { log: ["b"] } }],
    ["updates", { c: { log: ["c"] } }],
  ], events.slice(1));
}

async function stream_custom(client) {
  const tid = await newThread(client);
  let events = await collect(
    client.runs.stream(tid, "custom", { input: { log: [] }, streamMode: "custom" }));
  metadataFirst(events);
  expect("custom events", [
    ["custom", { progress: 0 }],
    ["custom", { progress: 1 }],
    ["custom", { progress: 2 }],
  ], events.slice(1));
  events = await collect(
    client.runs.stream(tid, "custom", { input: { log: [] }, streamMode: ["values", "custom"] }));
  metadataFirst(events);
  expect("values and custom events", [
    ["values", { log: ["worked"] }],
    ["custom", { progress: 0 }],
    ["custom", { progress: 1 }],
    ["custom", { progress: 2 }],
    ["values", { log: ["worked", "worked"] }],
  ], events.slice(1));
}

async function stream_subgraphs(client) {
  const tid = await newThread(client);
  const events = await collect(client.runs.stream(tid, "nested", {
    input: { log: [] }, streamMode: ["values", "updates"], streamSubgraphs: true,
  }));
  metadataFirst(events);
  const namespaces = new Set();
  const normalised = events.slice(1).map(([event, data]) => {
    const [mode, ...ns] = event.split("|");
    if (ns.length === 0) return [event, data];
    check("subgraph namespace is child:<task id>", ns.length === 1 && /^child:.+/.test(ns[0]), event);
    namespaces.add(ns[0]);
    return [`${mode}|child`, data];
  });
  expect("one subgraph namespace", 1, namespaces.size);
  expect("parent and subgraph events", [
    ["values", { log: [] }],
    ["values|child", { log: [] }],
    ["updates|child", { a: { log: ["a"] } }],
    ["values|child", { log: ["a"] }],
    ["updates|child", { b: { log: ["b"] } }],
    ["values|child", { log: ["a", "b"] }],
    ["updates|child", { c: { log: ["c"] } }],
    ["values|child", { log: ["a", "b", "c"] }],
    ["updates", { child: { log: ["a", "b", "c"] } }],
    ["values", { log: ["a", "b", "c"] }],
    ["updates", { after: { log: ["after"] } }],
    ["values", { log: ["a", "b", "c", "after"] }],
  ], normalised);
}

async function stream_error(client) {
  const tid = await newThread(client);
  const events = await collect(
    client.runs.stream(tid, "boom", { input: { log: [] }, streamMode: "values" }));
  const runId = metadataFirst(events);
  expect("events of a failing run", [
    ["values", { log: [] }],
    // A node's failure has no Python exception class on our server: it is a NodeError.
    ["error", { error: OURS ? "NodeError" : "ValueError", message: "boom" }],
  ], events.slice(1));
  expect("failed run status", "error", (await client.runs.get(tid, runId)).status);
  expect("failed run's thread status", "error", (await client.threads.get(tid)).status);
}

// ---- interrupts, forks, state ---------------------------------------------------------------

async function interrupt_resume(client) {
  const tid = await newThread(client);
  let events = await collect(
    client.runs.stream(tid, "approval", { input: { log: [] }, streamMode: "values" }));
  metadataFirst(events);
  expect("event names up to the interrupt", ["values", "values"], events.slice(1).map((e) => e[0]));
  const last = events.at(-1)[1];
  const interrupts = last.__interrupt__;
  check("last values event carries __interrupt__",
    Array.isArray(interrupts) && interrupts.length === 1, show(last));
  expect("interrupt value", { question: "approve?" }, interrupts[0].value);
  check("interrupt has an id", typeof interrupts[0].id === "string", show(interrupts[0]));
  const interruptId = interrupts[0].id;

  expect("thread status", "interrupted", (await client.threads.get(tid)).status);
  let state = await client.threads.getState(tid);
  expect("state next", ["ask"], state.next);
  expect("state tasks", ["ask"], state.tasks.map((t) => t.name));
  expect("task interrupt", [[interruptId, { question: "approve?" }]],
    state.tasks[0].interrupts.map((i) => [i.id, i.value]));

  events = await collect(
    client.runs.stream(tid, "approval", { command: { resume: "yes" }, streamMode: "values" }));
  metadataFirst(events);
  expect("final values", ["values", { log: ["asked", "finished"], decision: "yes" }], events.at(-1));
  state = await client.threads.getState(tid);
  expect("state next after resume", [], state.next);
  expect("thread status after resume", "idle", (await client.threads.get(tid)).status);
}

async function stream_debug(client) {
  // The checkpoints, tasks and debug modes through an interrupt and its resume.
  const tid = await newThread(client);
  const streamMode = ["checkpoints", "tasks", "debug"];
  let events = await collect(
    client.runs.stream(tid, "approval", { input: { log: [] }, streamMode }));
  metadataFirst(events);
  let frames = events.slice(1);
  let cps = frames.filter((e) => e[0] === "checkpoints").map((e) => e[1]);
  expect("checkpoint steps", [-1, 0], cps.map((c) => c.metadata.step));
  expect("checkpoint next", [["__start__"], ["ask"]], cps.map((c) => c.next));
  expect("parents chain", cps[0].config.configurable.checkpoint_id,
    cps[1].parent_config.configurable.checkpoint_id);
  const announced = cps[1].tasks[0].id;
  const starts = frames.filter((e) => e[0] === "tasks" && "input" in e[1]).map((e) => e[1]);
  expect("task started", [["ask", announced, ["branch:to:ask"]]],
    starts.map((d) => [d.name, d.id, d.triggers]));
  const debug = frames.filter((e) => e[0] === "debug").map((e) => [e[1].type, e[1].step]);
  expect("debug frames",
    [["checkpoint", -1], ["checkpoint", 0], ["task", 1], ["task_result", 1]], debug);

  events = await collect(
    client.runs.stream(tid, "approval", { command: { resume: "yes" }, streamMode }));
  frames = events.slice(1);
  cps = frames.filter((e) => e[0] === "checkpoints").map((e) => e[1]);
  expect("resumed from the head, then two steps", [0, 1, 2], cps.map((c) => c.metadata.step));
  expect("the head's task carries its interrupt", [{ question: "approve?" }],
    cps[0].tasks[0].interrupts.map((i) => i.value));
  const results = frames.filter((e) => e[0] === "tasks" && "result" in e[1])
    .map((e) => [e[1].name, e[1].result]);
  expect("task results after the resume",
    [["ask", { decision: "yes", log: ["asked"] }], ["finish", { log: ["finished"] }]], results);
}

async function fork(client) {
  const tid = await newThread(client);
  await client.runs.wait(tid, "agent", { input: { messages: [human("hello")] } });
  await client.runs.wait(tid, "agent", { input: { messages: [human("again")] } });
  const history = await client.threads.getHistory(tid, { limit: 100 });
  const oldHead = history[0].checkpoint;
  const firstSeen = history
    .filter((s) => (s.values.messages ?? []).some((m) => m.content === "again"))
    .at(-1);
  const parent = firstSeen.parent_checkpoint;
  check("first state with the message has a parent", parent != null, show(firstSeen));
  const forked = await client.runs.wait(tid, "agent", {
    input: { messages: [human("edited")] }, checkpoint: parent,
  });
  expect("contents after the fork", ["hello", "You said: hello", "edited", "You said: edited"],
    contents(forked.messages));
  const after = await client.threads.getHistory(tid, { limit: 100 });
  check("history grew", after.length > history.length, `${history.length} -> ${after.length}`);
  const old = await client.threads.getState(tid, oldHead);
  expect("the old branch stays reachable", ["hello", "You said: hello", "again", "You said: again"],
    contents(old.values.messages));
}

async function update_state(client) {
  const tid = await newThread(client, { graphId: "chain" });
  const res = await client.threads.updateState(tid, { values: { log: ["x"] }, asNode: "a" });
  check("update_state answers a checkpoint", typeof res?.checkpoint === "object", show(res));
  const state = await client.threads.getState(tid);
  expect("values after update_state", { log: ["x"] }, state.values);
  expect("next after update_state as a", ["b"], state.next);
  expect("a run goes on from b", { log: ["x", "b", "c"] },
    await client.runs.wait(tid, "chain", { input: null }));
}

async function history(client) {
  const tid = await newThread(client);
  await client.runs.wait(tid, "chain", { input: { log: [] } });
  const items = await client.threads.getHistory(tid, { limit: 10 });
  expect("history values, newest first",
    [{ log: ["a", "b", "c"] }, { log: ["a", "b"] }, { log: ["a"] }, { log: [] }, { log: [] }],
    items.map((s) => s.values));
  expect("history next", [[], ["c"], ["b"], ["a"], ["__start__"]], items.map((s) => s.next));
  const cpIds = (list) => list.map((s) => s.checkpoint.checkpoint_id);
  const before = await client.threads.getHistory(tid, {
    limit: 10, before: { configurable: { checkpoint_id: items[1].checkpoint.checkpoint_id } },
  });
  expect("before", cpIds(items.slice(2)), cpIds(before));
  expect("limit 2", cpIds(items.slice(0, 2)), cpIds(await client.threads.getHistory(tid, { limit: 2 })));
  expect("metadata filter", [items[2].checkpoint.checkpoint_id],
    cpIds(await client.threads.getHistory(tid, { metadata: { step: 1 } })));
}

// ---- runs -----------------------------------------------------------------------------------

async function wait_join(client) {
  const tid = await newThread(client);
  expect("runs.wait values", { log: ["a", "b", "c"] },
    await client.runs.wait(tid, "chain", { input: { log: [] } }));
  const run = await client.runs.create(tid, "chain", { input: { log: [] } });
  expect("runs.join values", { log: ["a", "b", "c", "a", "b", "c"] },
    await client.runs.join(tid, run.run_id));
  expect("joined run status", "success", (await client.runs.get(tid, run.run_id)).status);
  const runs = await client.runs.list(tid);
  expect("runs.list", [run.run_id, "success", "success"],
    [runs[0].run_id, ...runs.map((r) => r.status)]);
  expect("stateless runs.wait values", { log: ["a", "b", "c"] },
    await client.runs.wait(null, "chain", { input: { log: [] } }));
}

async function context(client) {
  const tid = await newThread(client);
  expect("a run's context reaches its node", { log: ["hello user-7f3a9c (tier 2)"] },
    await client.runs.wait(tid, "greet",
      { input: { log: [] }, context: { user: "user-7f3a9c", tier: 2 } }));
  expect("a field the context leaves out takes its default",
    { log: ["hello user-7f3a9c (tier 2)", "hello bo (tier 1)"] },
    await client.runs.wait(tid, "greet", { input: { log: [] }, context: { user: "bo" } }));
  expect("a run without context gets the default one", { log: ["hello  (tier 1)"] },
    await client.runs.wait(null, "greet", { input: { log: [] } }));
  const state = await client.threads.getState(tid);
  check("the context is not in the thread's metadata",
    !JSON.stringify(state.metadata).includes("user-7f3a9c"), show(state.metadata));
  if (OURS) {
    // LangGraph passes a context that does not fit its schema to the run; we refuse it.
    await expectStatus("a context that does not fit", 422, client.runs.create(tid, "greet",
      { input: { log: [] }, context: { user: "ada", tier: "gold" } }));
  }
}

async function cancel(client) {
  const tid = await newThread(client);
  const run = await client.runs.create(tid, "slow", { input: { steps: 50, delay_ms: 100 } });
  await waitStatus(client, tid, run.run_id, ["running"]);
  await sleep(300);
  await client.runs.cancel(tid, run.run_id, true);
  expect("cancelled run status", "interrupted", (await client.runs.get(tid, run.run_id)).status);
  expect("thread status after cancel", "interrupted", (await client.threads.get(tid)).status);
  const ticks = (await client.threads.getState(tid)).values.log.length;
  check("the cancelled run stopped early", ticks > 0 && ticks < 50, `${ticks} ticks`);
  const done = await client.runs.wait(tid, "slow", { input: { steps: 0, delay_ms: 0 } });
  expect("a run after the cancel", ticks + 1, done.log.length);
}

async function reject_busy(client) {
  const tid = await newThread(client);
  const run = await client.runs.create(tid, "slow", { input: { steps: 50, delay_ms: 100 } });
  await waitStatus(client, tid, run.run_id, ["running"]);
  expect("thread status while running", "busy", (await client.threads.get(tid)).status);
  await expectStatus("second run with reject", 409, client.runs.create(tid, "chain", {
    input: { log: [] }, multitaskStrategy: "reject",
  }));
  // Without a multitask_strategy the server queues the run (LangGraph's default: enqueue).
  const queued = await client.runs.create(tid, "slow", { input: { steps: 0, delay_ms: 0 } });
  expect("default multitask_strategy", "enqueue", queued.multitask_strategy);
  expect("default strategy queues the run", "pending",
    (await client.runs.get(tid, queued.run_id)).status);
  await client.runs.cancel(tid, queued.run_id, true);
  await client.runs.cancel(tid, run.run_id, true);
  expect("statuses after cancelling both", ["interrupted", "interrupted"],
    (await client.runs.list(tid)).map((r) => r.status));
}

async function enqueue(client) {
  const tid = await newThread(client);
  const first = await client.runs.create(tid, "slow", { input: { steps: 3, delay_ms: 200 } });
  const second = await client.runs.create(tid, "slow", {
    input: { steps: 5, delay_ms: 0 }, multitaskStrategy: "enqueue",
  });
  expect("queued run status while the first runs", "pending",
    (await client.runs.get(tid, second.run_id)).status);
  expect("first run's values", ["tick0", "tick1", "tick2"],
    (await client.runs.join(tid, first.run_id)).log);
  expect("second run's values", ["tick0", "tick1", "tick2", "tick3", "tick4"],
    (await client.runs.join(tid, second.run_id)).log);
}

async function resume_stream(client) {
  const tid = await newThread(client);
  const seen = [];
  const stream = client.runs.stream(tid, "slow", {
    input: { steps: 6, delay_ms: 200 }, streamMode: "values", streamResumable: true,
    onDisconnect: "continue",
  });
  for await (const part of stream) {
    check("resumable frames carry an id", part.id != null, show(part));
    seen.push(part);
    if (seen.length === 3) break;
  }
  expect("first events", ["metadata", "values", "values"], seen.map((p) => p.event));
  const runId = seen[0].data.run_id;
  const rest = [];
  for await (const part of client.runs.joinStream(tid, runId, { lastEventId: seen.at(-1).id })) {
    rest.push(part);
  }
  const all = [...seen, ...rest];
  expect("no event id repeats", all.length, new Set(all.map((p) => p.id)).size);
  const expected = [];
  for (let n = 0; n <= 6; n += 1) {
    expected.push({ steps: 6, delay_ms: 200, log: Array.from({ length: n }, (_, i) => `tick${i}`) });
  }
  expect("every values event once", expected,
    all.filter((p) => p.event === "values").map((p) => p.data));
  expect("run status at the stream's end", "success", (await client.runs.get(tid, runId)).status);
}

async function errors(client) {
  const missing = randomUUID();
  await expectStatus("unknown assistant id", 404, client.assistants.get(missing));
  const tid = await newThread(client);
  await expectStatus("run on an unknown graph name", 422,
    client.runs.create(tid, "no_such_graph", { input: {} }));
  await expectStatus("run on an unknown assistant id", 404,
    client.runs.create(tid, missing, { input: {} }));
  await expectStatus("unknown thread", 404, client.threads.get(missing));
  await expectStatus("unknown run", 404, client.runs.get(tid, missing));
  if (OURS) {
    const err = await expectStatus("wrong type in input", 422,
      client.runs.wait(tid, "chain", { input: { log: 5 } }));
    check("the 422 names the field", String(err.message).includes("log"), err.message);
  }
}

async function stream_messages(client) {
  const tid = await newThread(client);
  let events = await collect(client.runs.stream(tid, "chat", {
    input: { messages: [human("hello there")] }, streamMode: ["messages-tuple", "values"],
  }));
  metadataFirst(events);
  const names = events.slice(1).map(([event]) => event);
  const tuples = events.filter(([event]) => event === "messages").map(([, data]) => data);
  check("several chunks", tuples.length >= 3, show(tuples));
  check("chunks come between the input's values and the answer's",
    names[0] === "values" && names[names.length - 1] === "values" &&
      names.slice(1, -1).every((n) => n === "messages"), show(names));
  for (const [chunk, meta] of tuples) {
    expect("chunk type", "AIMessageChunk", chunk.type);
    expect("chunk node", "model", meta.langgraph_node);
    expect("chunk step", 1, meta.langgraph_step);
    check("chunk namespace names the node's task", meta.langgraph_checkpoint_ns.startsWith("model:"),
      show(meta));
  }
  const ids = [...new Set(tuples.map(([chunk]) => chunk.id))];
  expect("one message id across the chunks", 1, ids.length);
  expect("joined chunks", "You said: hello there", tuples.map(([c]) => c.content).join(""));
  expect("the last chunk says so", "last", tuples[tuples.length - 1][0].chunk_position);
  const final = events[events.length - 1][1].messages;
  expect("message kinds", ["human", "ai"], final.map((m) => m.type));
  expect("answer", "You said: hello there", final[final.length - 1].content);
  expect("the streamed id is the id the thread keeps", ids[0], final[final.length - 1].id);

  // As agent-chat-ui sends a message: the role form, content as a list of blocks.
  const said = { role: "user", content: [{ type: "text", text: "once more" }] };
  events = await collect(client.runs.stream(tid, "chat", {
    input: { messages: [said] }, streamMode: "messages",
  }));
  metadataFirst(events);
  expect("first event after metadata", "messages/metadata", events[1][0]);
  const [[mid, meta]] = Object.entries(events[1][1]);
  expect("metadata node", "model", meta.metadata.langgraph_node);
  const partials = events.filter(([e]) => e === "messages/partial").map(([, data]) => data[0]);
  check("several partials", partials.length >= 3, show(partials));
  const contents = partials.map((p) => p.content);
  check("each partial extends the one before",
    contents.slice(0, -1).every((a, i) => i === 0 || (a.startsWith(contents[i - 1]) && a.length > contents[i - 1].length)),
    show(contents));
  expect("the last partial", "You said: once more", contents[contents.length - 1]);
  check("partials are of the message", partials.every((p) => p.id === mid));
  const complete = events.filter(([e]) => e === "messages/complete").map(([, data]) => data[0]);
  if (OURS) {
    expect("a streamed message ends complete", ["You said: once more"], complete.map((m) => m.content));
  }
}

async function store(client) {
  // A fresh root label keeps the scenario's items apart from any other run's.
  const root = `s${randomUUID().replaceAll("-", "").slice(0, 12)}`;
  const alice = [root, "alice"];
  const notes = [root, "alice", "notes"];
  const bob = [root, "bob"];
  await client.store.putItem(alice, "tea", { text: "prefers green tea", kind: "fact", n: 3 });
  await client.store.putItem(alice, "plan", { text: "pro plan", kind: "account", n: 1 });
  await client.store.putItem(notes, "coffee", { text: "black coffee", kind: "fact", n: 2 });
  await client.store.putItem(bob, "tea", { text: "likes mint tea", kind: "fact", n: 5 });

  let got = await client.store.getItem(alice, "tea");
  expect("get namespace", alice, got.namespace);
  expect("get key", "tea", got.key);
  expect("get value", { text: "prefers green tea", kind: "fact", n: 3 }, got.value);
  check("get created_at is RFC 3339", typeof got.created_at === "string" && got.created_at.includes("T"),
    show(got));
  expect("the SDK's camelCase copy", got.updated_at, got.updatedAt);
  expect("get a missing key", null, await client.store.getItem(alice, "nope"));
  got = await client.store.getItem(alice, "tea", { refreshTtl: false });
  expect("get without refreshing", "tea", got.key);

  // A second put replaces the value; ours keeps the creation time (see client.py).
  const first = got;
  await client.store.putItem(alice, "tea", { text: "prefers green tea", kind: "fact", n: 4 });
  got = await client.store.getItem(alice, "tea");
  expect("put replaces the value", 4, got.value.n);
  if (OURS) expect("put keeps created_at", first.created_at, got.created_at);

  const where = (items) => items.map((i) => `${i.namespace[i.namespace.length - 1]}/${i.key}`).sort();
  let found = (await client.store.searchItems([root])).items;
  expect("search under the root", ["alice/plan", "alice/tea", "bob/tea", "notes/coffee"], where(found));
  expect("no query, no score", [null], [...new Set(found.map((i) => i.score))]);
  found = (await client.store.searchItems(alice)).items;
  expect("search under a prefix", ["alice/plan", "alice/tea", "notes/coffee"], where(found));
  found = (await client.store.searchItems([root], { filter: { kind: "fact" } })).items;
  expect("filter by equality", ["alice/tea", "bob/tea", "notes/coffee"], where(found));
  found = (await client.store.searchItems([root], { filter: { n: { $gte: 4 } } })).items;
  expect("filter with $gte", ["alice/tea", "bob/tea"], where(found));
  found = (await client.store.searchItems([root], { filter: { kind: { $ne: "fact" } } })).items;
  expect("filter with $ne", ["alice/plan"], where(found));
  const page1 = (await client.store.searchItems([root], { limit: 2 })).items;
  const page2 = (await client.store.searchItems([root], { limit: 2, offset: 2 })).items;
  expect("pages cover all four", ["alice/plan", "alice/tea", "bob/tea", "notes/coffee"],
    where([...page1, ...page2]));
  found = (await client.store.searchItems([root], { query: "coffee" })).items;
  check("a query finds the item it names", found.some((i) => i.key === "coffee"), show(found));
  if (OURS) {
    expect("full-text search keeps the matches", ["notes/coffee"], where(found));
    check("a ranked item has a score", typeof found[0].score === "number", show(found));
  }

  let listed = (await client.store.listNamespaces({ prefix: [root] })).namespaces;
  expect("namespaces under the root", [alice, notes, bob], listed);
  listed = (await client.store.listNamespaces({ prefix: [root], maxDepth: 2 })).namespaces;
  expect("namespaces cut to depth 2", [alice, bob], listed);
  listed = (await client.store.listNamespaces({ prefix: [root], suffix: ["notes"] })).namespaces;
  expect("namespaces by suffix", [notes], listed);
  listed = (await client.store.listNamespaces({ prefix: [root], limit: 1, offset: 1 })).namespaces;
  expect("a page of namespaces", [notes], listed);

  await client.store.deleteItem(alice, "plan");
  expect("deleted item is gone", null, await client.store.getItem(alice, "plan"));
  await client.store.deleteItem(alice, "plan");

  await client.store.putItem(alice, "brief", { text: "for a while" }, { ttl: 5, index: false });
  got = await client.store.getItem(alice, "brief", { refreshTtl: true });
  expect("an item with a TTL reads back", { text: "for a while" }, got.value);

  const raw = (method, path, json) => client.store.fetch(path, { method, json });
  const err = await expectStatus("a namespace label with a dot", 422,
    raw("PUT", "/store/items", { namespace: [root, "a.b"], key: "k", value: {} }));
  check("the 422 names the label", String(err.message).includes("a.b"), err.message);
  await expectStatus("a value that is not an object", 422,
    raw("PUT", "/store/items", { namespace: alice, key: "k", value: [1, 2] }));
  await expectStatus("a namespace that is not a list", 422,
    raw("POST", "/store/namespaces", { prefix: root }));
  if (OURS) {
    await expectStatus("an unknown filter operator", 422,
      client.store.searchItems([root], { filter: { n: { $in: [1] } } }));
  }
}

const SCENARIOS = {
  threads, stream_values, stream_updates, stream_custom, stream_subgraphs, stream_error,
  interrupt_resume, fork, update_state, history, wait_join, context, cancel, reject_busy,
  enqueue, resume_stream, errors, stream_messages, store, stream_debug,
};

async function main(argv) {
  OURS = OURS || argv.includes("--ours");
  const args = argv.filter((a) => a !== "--ours");
  if (args.length !== 2 || (args[1] !== "all" && !(args[1] in SCENARIOS))) {
    console.error(`usage: client.mjs URL SCENARIO|all [--ours]; scenarios: ${Object.keys(SCENARIOS).join(" ")}`);
    return 2;
  }
  const names = args[1] === "all" ? Object.keys(SCENARIOS) : [args[1]];
  const client = new Client({ apiUrl: args[0] });
  const failures = [];
  for (const name of names) {
    try {
      await SCENARIOS[name](client);
    } catch (err) {
      failures.push(`${name}: ${err instanceof Failed ? err.message : `${err?.name}: ${err?.message}`}`);
    }
  }
  for (const failure of failures) console.log(failure);
  console.log(`js sdk: ${names.length - failures.length}/${names.length} scenarios passed`);
  return failures.length ? 1 : 0;
}

process.exitCode = await main(process.argv.slice(2));
