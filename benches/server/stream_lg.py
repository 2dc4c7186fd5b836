"""LangGraph's side of the `stream` workload: a one-node graph whose LangChain chat model
streams N one-word chunks, streamed in process with `stream_mode="messages"`, every chunk read.

    python stream_lg.py N

Prints one JSON line: {"chunks": N, "chunks_per_s": ...} (the median of three runs, after a
warm-up run of 1,000 chunks).
"""

import json
import statistics
import sys
import time
from typing import Annotated

from typing_extensions import TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages


class Words(BaseChatModel):
    chunks: int

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        return ChatResult(generations=[ChatGeneration(message=AIMessage("w " * self.chunks))])

    def _stream(self, messages, stop=None, run_manager=None, **kwargs):
        for _ in range(self.chunks):
            chunk = ChatGenerationChunk(message=AIMessageChunk(content="w "))
            if run_manager:
                run_manager.on_llm_new_token("w ", chunk=chunk)
            yield chunk

    @property
    def _llm_type(self):
        return "words"


class Talk(TypedDict):
    messages: Annotated[list, add_messages]


def graph(n):
    model = Words(chunks=n)
    builder = StateGraph(Talk)
    builder.add_node("model", lambda state: {"messages": [model.invoke(state["messages"])]})
    builder.add_edge(START, "model")
    builder.add_edge("model", END)
    return builder.compile()


def rate(n):
    g = graph(n)
    t0 = time.perf_counter()
    seen = sum(1 for _ in g.stream({"messages": [("user", "go")]}, stream_mode="messages"))
    wall = time.perf_counter() - t0
    if seen < n:
        raise SystemExit(f"stream_lg.py: {seen} messages for {n} chunks")
    return n / wall


def main():
    n = int(sys.argv[1])
    rate(1000)
    rates = [rate(n) for _ in range(3)]
    print(json.dumps({"chunks": n, "chunks_per_s": statistics.median(rates)}))


if __name__ == "__main__":
    main()
