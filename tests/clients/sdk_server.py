"""An A2A server made with the official Python SDK (a2a-sdk 1.3.0), for testing our client
library against a server that is not ours: JSON-RPC and HTTP+JSON, v1.0 and v0.3 (compat on).

Usage: sdk_server.py PORT

The agent: a message containing "hang" starts a task that stays working until canceled; a
message containing "ask" asks for input (input-required), and the answer completes the task;
anything else works briefly and completes with a text artifact "echo: <text>".
"""

import asyncio
import sys
import uuid

import uvicorn
from starlette.applications import Starlette

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
)


def agent_message(text, task_id, context_id):
    return Message(message_id=str(uuid.uuid4()), role=Role.ROLE_AGENT, parts=[Part(text=text)],
                   task_id=task_id, context_id=context_id)


class Executor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        task_id, context_id = context.task_id, context.context_id
        if context.current_task is None:
            await event_queue.enqueue_event(Task(
                id=task_id, context_id=context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=[context.message]))
        updater = TaskUpdater(event_queue, task_id, context_id)
        await updater.start_work()
        if "hang" in text:
            await asyncio.sleep(3600)
            return
        if "ask" in text and context.current_task is None:
            await updater.requires_input(agent_message("Which file?", task_id, context_id))
            return
        await asyncio.sleep(0.2)
        await updater.add_artifact([Part(text=f"echo: {text}")], name="result")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel()


def main():
    port = int(sys.argv[1])
    base = f"http://127.0.0.1:{port}"
    interfaces = [
        AgentInterface(url=f"{base}/", protocol_binding=b, protocol_version=v)
        if b == "JSONRPC" else
        AgentInterface(url=f"{base}/a2a/rest", protocol_binding=b, protocol_version=v)
        for v in ("1.0", "0.3") for b in ("JSONRPC", "HTTP+JSON")
    ]
    card = AgentCard(
        name="sdk-test-agent", description="a2a-sdk server for agent-host's client tests",
        version="1.0.0", supported_interfaces=interfaces,
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"], default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="echo", description="echoes", tags=["test"])],
    )
    handler = DefaultRequestHandler(agent_executor=Executor(), task_store=InMemoryTaskStore(),
                                    agent_card=card)
    routes = (create_agent_card_routes(card)
              + create_jsonrpc_routes(handler, "/", enable_v0_3_compat=True)
              + create_rest_routes(handler, enable_v0_3_compat=True, path_prefix="/a2a/rest"))
    uvicorn.run(Starlette(routes=routes), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
