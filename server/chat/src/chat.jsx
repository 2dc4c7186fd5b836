// The chat page `stategraph serve --ui` serves at /ui/: LangGraph's own `useStream` hook from
// @langchain/langgraph-sdk, talking to the server that served the page.
//
// Query parameters: `assistant` (default `guarded_chat`), `thread` (open this thread). The
// server's API key, if it has one, goes in the fragment, `#key=…`, which the browser never
// sends to a server or keeps in a request log; the page sends it as `x-api-key`.
//
// What it shows: the threads of the assistant (newest first), a thread's messages as they
// stream (`messages-tuple`), an interrupt with Approve / Reject buttons that resume the run,
// Stop while a run streams, and Edit on a human message, which runs again from the
// checkpoint before it (a new branch, as LangGraph's agent-chat-ui does).

import React, { useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import { useStream } from "@langchain/langgraph-sdk/react";

const params = new URLSearchParams(window.location.search);
const apiUrl = window.location.origin;
const assistantId = params.get("assistant") || "guarded_chat";
const apiKey = new URLSearchParams(window.location.hash.slice(1)).get("key") || undefined;

/** A message's text: its content string, or its text blocks joined. */
function textOf(message) {
  const content = message.content;
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter((block) => block && block.type === "text")
    .map((block) => block.text)
    .join("");
}

function Threads({ client, current, onPick, version }) {
  const [threads, setThreads] = useState([]);
  useEffect(() => {
    let live = true;
    client.threads
      .search({ metadata: { graph_id: assistantId }, limit: 50, sortBy: "created_at", sortOrder: "desc" })
      .then((found) => live && setThreads(found))
      .catch(() => live && setThreads([]));
    return () => {
      live = false;
    };
  }, [client, current, version]);
  return (
    <nav id="threads">
      <button id="new-thread" onClick={() => onPick(null)}>New chat</button>
      <ul>
        {threads.map((t) => (
          <li key={t.thread_id}>
            <a
              className={"thread" + (t.thread_id === current ? " current" : "")}
              data-thread={t.thread_id}
              data-status={t.status}
              onClick={() => onPick(t.thread_id)}
            >
              {t.thread_id.slice(0, 8)} · {t.status}
            </a>
          </li>
        ))}
      </ul>
    </nav>
  );
}

function Message({ message, onEdit, editable }) {
  const [editing, setEditing] = useState(false);
  const [draft, setDraft] = useState(textOf(message));
  if (editing) {
    return (
      <form
        className="message human editing"
        onSubmit={(e) => {
          e.preventDefault();
          setEditing(false);
          onEdit(draft);
        }}
      >
        <input className="edit-input" value={draft} onChange={(e) => setDraft(e.target.value)} />
        <button className="edit-send" type="submit">Send</button>
      </form>
    );
  }
  return (
    <div className={"message " + message.type} data-id={message.id}>
      <span className="text">{textOf(message)}</span>
      {editable && (
        <button className="edit" onClick={() => setEditing(true)}>Edit</button>
      )}
    </div>
  );
}

function Chat() {
  const [threadId, setThreadId] = useState(params.get("thread"));
  const [version, setVersion] = useState(0);
  const [draft, setDraft] = useState("");
  const stream = useStream({
    apiUrl,
    apiKey,
    assistantId,
    threadId,
    onThreadId: setThreadId,
    messagesKey: "messages",
    fetchStateHistory: true,
    onFinish: () => setVersion((v) => v + 1),
  });
  const messages = stream.messages;
  const interrupt = stream.interrupt;

  const send = (e) => {
    e.preventDefault();
    const text = draft.trim();
    if (!text) return;
    setDraft("");
    stream.submit(
      { messages: [{ type: "human", content: text }] },
      { optimisticValues: (prev) => ({ ...prev, messages: [...(prev.messages || []), { type: "human", content: text }] }) },
    );
  };

  const edit = (message, text) => {
    const meta = stream.getMessagesMetadata(message);
    const parent = meta?.firstSeenState?.parent_checkpoint;
    stream.submit({ messages: [{ type: "human", content: text }] }, { checkpoint: parent });
  };

  const resume = (answer) => stream.submit(undefined, { command: { resume: answer } });

  return (
    <div id="app">
      <Threads
        client={stream.client}
        current={threadId}
        version={version}
        onPick={(id) => {
          setThreadId(id);
          stream.switchThread(id);
        }}
      />
      <main>
        <header>
          <strong>{assistantId}</strong>
          <span id="status" data-loading={String(stream.isLoading)} data-thread={threadId || ""}>
            {stream.isLoading ? "streaming…" : threadId ? "thread " + threadId.slice(0, 8) : "new chat"}
          </span>
          <button id="stop" disabled={!stream.isLoading} onClick={() => stream.stop()}>Stop</button>
        </header>
        <div id="messages">
          {messages.map((m, i) => (
            <Message
              key={m.id || i}
              message={m}
              editable={m.type === "human" && !stream.isLoading}
              onEdit={(text) => edit(m, text)}
            />
          ))}
        </div>
        {interrupt && !stream.isLoading && (
          <div id="interrupt">
            <span className="question">{interrupt.value?.question ?? JSON.stringify(interrupt.value)}</span>
            <button id="approve" onClick={() => resume("yes")}>Approve</button>
            <button id="reject" onClick={() => resume("no")}>Reject</button>
          </div>
        )}
        {stream.error != null && <div id="error">{String(stream.error?.message ?? stream.error)}</div>}
        <form onSubmit={send}>
          <input
            id="input"
            placeholder="Say something (a message with “approve” asks first)"
            value={draft}
            onChange={(e) => setDraft(e.target.value)}
          />
          <button id="send" type="submit" disabled={stream.isLoading}>Send</button>
        </form>
      </main>
    </div>
  );
}

createRoot(document.getElementById("root")).render(<Chat />);
