"""The SDK scenarios' test graphs, written for LangGraph.

`stategraph serve` serves graphs of the same names, state shapes and behaviours, so that
client.py and client.mjs can be checked against `langgraph dev` on this app and then run
unchanged against our server.
"""

import asyncio
import operator
import re
from dataclasses import dataclass
from typing import Annotated, Optional

from typing_extensions import TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langgraph.config import get_stream_writer
from langgraph.graph.message import add_messages
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt


class LogState(TypedDict):
    log: Annotated[list[str], operator.add]


def _append(name):
    def node(state: LogState):
        return {"log": [name]}

    node.__name__ = name
    return node


def _chain():
    builder = StateGraph(LogState)
    for name in ("a", "b", "c"):
        builder.add_node(name, _append(name))
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", "c")
    builder.add_edge("c", END)
    return builder.compile()


chain = _chain()


class AgentState(TypedDict):
    messages: Annotated[list, operator.add]


def model(state: AgentState):
    last = state["messages"][-1]
    return {"messages": [{"type": "ai", "content": "You said: " + last["content"]}]}


_agent = StateGraph(AgentState)
_agent.add_node("model", model)
_agent.add_edge(START, "model")
_agent.add_edge("model", END)
agent = _agent.compile()


class ApprovalState(TypedDict):
    log: Annotated[list[str], operator.add]
    decision: Optional[str]


def ask(state: ApprovalState):
    answer = interrupt({"question": "approve?"})
    return {"decision": answer, "log": ["asked"]}


def finish(state: ApprovalState):
    return {"log": ["finished"]}


_approval = StateGraph(ApprovalState)
_approval.add_node("ask", ask)
_approval.add_node("finish", finish)
_approval.add_edge(START, "ask")
_approval.add_edge("ask", "finish")
_approval.add_edge("finish", END)
approval = _approval.compile()


def work(state: LogState):
    write = get_stream_writer()
    for i in range(3):
        write({"progress": i})
    return {"log": ["worked"]}


_custom = StateGraph(LogState)
_custom.add_node("work", work)
_custom.add_edge(START, "work")
_custom.add_edge("work", END)
custom = _custom.compile()


class SlowState(TypedDict):
    log: Annotated[list[str], operator.add]
    steps: int
    delay_ms: int


async def tick(state: SlowState):
    await asyncio.sleep(state.get("delay_ms", 0) / 1000)
    return {"log": [f"tick{len(state.get('log', []))}"]}


def _again(state: SlowState):
    return "tick" if len(state.get("log", [])) < state.get("steps", 0) else END


_slow = StateGraph(SlowState)
_slow.add_node("tick", tick)
_slow.add_edge(START, "tick")
_slow.add_conditional_edges("tick", _again, ["tick", END])
slow = _slow.compile()


_nested = StateGraph(LogState)
_nested.add_node("child", chain)
_nested.add_node("after", _append("after"))
_nested.add_edge(START, "child")
_nested.add_edge("child", "after")
_nested.add_edge("after", END)
nested = _nested.compile()


def explode(state: LogState):
    if "ok" not in state["log"]:
        raise ValueError("boom")
    return {"log": ["survived"]}


_boom = StateGraph(LogState)
_boom.add_node("explode", explode)
_boom.add_edge(START, "explode")
_boom.add_edge("explode", END)
boom = _boom.compile()


@dataclass
class Caller:
    user: str = ""
    tier: int = 1


def greet_caller(state: LogState, runtime: Runtime[Caller]):
    caller = runtime.context
    if caller is None:
        return {"log": ["no caller"]}
    return {"log": [f"hello {caller.user} (tier {caller.tier})"]}


_greet = StateGraph(LogState, context_schema=Caller)
_greet.add_node("greet", greet_caller)
_greet.add_edge(START, "greet")
_greet.add_edge("greet", END)
greet = _greet.compile()


class EchoModel(BaseChatModel):
    """Answers `You said: <the last message's text>`, streamed word by word."""

    def _answer(self, messages):
        return "You said: " + (messages[-1].text if messages else "")

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self._answer(messages)))])

    def _stream(self, messages, stop=None, run_manager=None, **kwargs):
        for word in re.findall(r"\S+\s*", self._answer(messages)):
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=word))
            if run_manager:
                run_manager.on_llm_new_token(word, chunk=chunk)
            yield chunk

    @property
    def _llm_type(self):
        return "echo"


class ChatState(TypedDict):
    messages: Annotated[list, add_messages]


_echo = EchoModel()


def answer(state: ChatState):
    return {"messages": [_echo.invoke(state["messages"])]}


_chat = StateGraph(ChatState)
_chat.add_node("model", answer)
_chat.add_edge(START, "model")
_chat.add_edge("model", END)
chat = _chat.compile()
