"""The official Python A2A SDK (a2a-sdk 1.3.0) talking to agent-host: card, streamed task,
approval answered, blocking send, get, cancel.

    pip install "a2a-sdk==1.3.0"          # or: tests/clients/.venv from tests/clients/run.sh
    agent-host serve &                    # the demo agent on http://127.0.0.1:41242
    python examples/python_client.py http://127.0.0.1:41242
"""

import asyncio
import sys
import uuid

import httpx
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.types import CancelTaskRequest, GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState


def request(text, task_id=None):
    msg = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
    if task_id:
        msg.task_id = task_id
    return SendMessageRequest(message=msg)


async def main(base):
    async with httpx.AsyncClient(timeout=120) as http:
        card = await A2ACardResolver(http, base).get_agent_card()
        print("agent:", card.name, "-", [(i.protocol_binding, i.protocol_version) for i in card.supported_interfaces])
        streaming = await create_client(card, ClientConfig(streaming=True, httpx_client=http))

        # A streamed task that asks for approval ("approval" makes the demo agent ask).
        task_id = None
        async for ev in streaming.send_message(request("List the files; approval please")):
            kind = ev.WhichOneof("payload")
            if kind == "task":
                task_id = ev.task.id
            elif kind == "status_update":
                st = ev.status_update.status
                if st.state == TaskState.TASK_STATE_INPUT_REQUIRED:
                    print("asks:", " ".join(p.text for p in st.message.parts if p.text))
            elif kind == "artifact_update":
                print("".join(p.text for p in ev.artifact_update.artifact.parts), end="", flush=True)
        # Approve it: a message with the same task id.
        async for ev in streaming.send_message(request("yes", task_id)):
            if ev.WhichOneof("payload") == "artifact_update" and ev.artifact_update.artifact.name == "result":
                print("\nresult:", "".join(p.text for p in ev.artifact_update.artifact.parts))

        # Blocking send, get, and cancel of a task that hangs.
        blocking = await create_client(card, ClientConfig(streaming=False, httpx_client=http))
        async for ev in blocking.send_message(request("hello")):
            print("send ->", TaskState.Name(ev.task.status.state))
            got = await blocking.get_task(GetTaskRequest(id=ev.task.id))
            print("get ->", TaskState.Name(got.status.state))
        req = request("hang")
        req.configuration.return_immediately = True
        async for ev in blocking.send_message(req):
            canceled = await blocking.cancel_task(CancelTaskRequest(id=ev.task.id))
            print("cancel ->", TaskState.Name(canceled.status.state))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:41242"))
