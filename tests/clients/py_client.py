#!/usr/bin/env python3
"""Drive agent-host with the official Python A2A SDK (a2a-sdk 1.3.0).

Usage: python py_client.py BASE_URL VERSION [BINDING]
       (VERSION: 1.0 or 0.3; BINDING: JSONRPC (default), HTTP+JSON or GRPC (1.0 only; the
       SDK's gRPC transport, a2a-sdk[grpc], on the card's GRPC interface))

The protocol version and binding are pinned by keeping only the card's
supportedInterfaces of that version and binding, so the SDK picks its native
v1.0 transport or its v0.3 compat transport of that binding. Each step prints one line; any deviation exits non-zero with a
message saying what was expected and what came back. Every network await is
bounded by a timeout so a misbehaving server cannot hang CI.
"""

import asyncio
import os
import subprocess
import sys
import tempfile
import uuid

import grpc
import httpx
from a2a.client import A2ACardResolver, ClientConfig, create_client
from google.protobuf.json_format import MessageToDict
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)

TIMEOUT = 30.0  # seconds, for every single await / whole stream


class Deviation(Exception):
    pass


def state_name(state):
    try:
        return TaskState.Name(state)
    except ValueError:
        return f'<unknown state {state}>'


def check(cond, what):
    if not cond:
        raise Deviation(what)


async def bounded(awaitable, what):
    try:
        return await asyncio.wait_for(awaitable, TIMEOUT)
    except asyncio.TimeoutError:
        raise Deviation(f'{what}: no answer within {TIMEOUT:.0f} s') from None


async def drain(agen, what):
    """Collect every event of an SDK stream, bounded as a whole."""

    async def run():
        return [ev async for ev in agen]

    return await bounded(run(), what)


def step(name, detail):
    print(f'{name:<10} ok  {detail}', flush=True)


def message(text, task_id=None):
    msg = Message(
        message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)]
    )
    if task_id:
        msg.task_id = task_id
    return msg


def artifact_text(task):
    return ''.join(p.text for a in task.artifacts for p in a.parts if p.text)


async def check_change(client, version, binding):
    repo = os.environ.get('CHANGES_REPO')
    check(repo, 'change: CHANGES_REPO (a git repository the server may work in) is not set')
    name = f'from-sdk-{uuid.uuid4().hex[:8]}.txt'
    msg = message(f'edit={name}')
    msg.metadata.update({'cwd': repo})
    events = await drain(client.send_message(SendMessageRequest(message=msg)), 'change')
    check(len(events) == 1 and events[0].HasField('task'), f'change: expected a task, got {[describe(e) for e in events]}')
    task = events[0].task
    check(
        task.status.state == TaskState.TASK_STATE_COMPLETED,
        f'change: expected TASK_STATE_COMPLETED, got {state_name(task.status.state)}',
    )
    changes = [a for a in task.artifacts if a.artifact_id == 'changes']
    check(changes, f'change: no changes artifact among {[a.artifact_id for a in task.artifacts]}')
    parts = changes[0].parts
    data = next((MessageToDict(p.data) for p in parts if p.HasField('data')), None)
    check(data, 'change: the changes artifact has no data part')
    files = [(f.get('path'), f.get('status')) for f in data.get('files', [])]
    check((name, 'added') in files, f'change: the data part does not name {name} as added: {files}')
    patch = next((p.raw for p in parts if p.filename == 'changes.patch'), b'')
    check(patch, 'change: no changes.patch file part')
    if version == '0.3' and binding == 'HTTP+JSON':
        # a2a-sdk's v0.3 HTTP+JSON transport takes a file part's `fileWithBytes` (base64 of the
        # bytes, as protobuf's JSON has it and the JS SDK reads it) for base64 of base64 text
        # (a2a/compat/v0_3/proto_utils.py) and decodes it twice: no file part arrives intact
        # over that one binding. The data part above did.
        step('change', f'{files}; the patch is not readable through this SDK binding (see docs/workspaces.md)')
        return
    with tempfile.TemporaryDirectory() as clean:
        subprocess.run(['git', 'clone', '-q', repo, clean], check=True, timeout=TIMEOUT)
        applied = subprocess.run(
            ['git', '-C', clean, 'apply', '-'], input=patch, capture_output=True, timeout=TIMEOUT
        )
        check(applied.returncode == 0, f'change: git apply refused the patch: {applied.stderr.decode()}')
        check(os.path.isfile(os.path.join(clean, name)), f'change: {name} is not there after git apply')
    check(not os.path.exists(os.path.join(repo, name)), 'change: the source repository was changed')
    step('change', f'{files}, patch {len(patch)} bytes applied with git apply')


def describe(ev):
    kind = ev.WhichOneof('payload')
    if kind == 'task':
        return f'task({state_name(ev.task.status.state)})'
    if kind == 'status_update':
        return f'status_update({state_name(ev.status_update.status.state)})'
    return kind or '<empty>'


def check_stream(events, what, task_id=None):
    """First event a task, then updates, last status COMPLETED; returns the task id."""
    kinds = [describe(e) for e in events]
    check(events, f'{what}: the stream ended without any event')
    check(
        events[0].WhichOneof('payload') == 'task',
        f'{what}: expected the first event to be a task, got {kinds}',
    )
    tid = events[0].task.id
    check(tid, f'{what}: the first task event has an empty id')
    if task_id:
        check(tid == task_id, f'{what}: the stream is about task {tid}, expected {task_id}')
    for e in events[1:]:
        k = e.WhichOneof('payload')
        check(
            k in ('status_update', 'artifact_update'),
            f'{what}: expected only status/artifact updates after the task, got {kinds}',
        )
        ev_tid = getattr(e, k).task_id
        check(ev_tid == tid, f'{what}: {k} for task {ev_tid!r}, expected {tid!r}')
    statuses = [e.status_update.status.state for e in events if e.HasField('status_update')]
    last = statuses[-1] if statuses else events[0].task.status.state
    check(
        last == TaskState.TASK_STATE_COMPLETED,
        f'{what}: expected the last status to be TASK_STATE_COMPLETED, got {state_name(last)} (events {kinds})',
    )
    return tid, kinds


async def main(base, version, binding):
    http = httpx.AsyncClient(timeout=TIMEOUT)
    try:
        # 1. card, pinned to one protocol version
        card = await bounded(A2ACardResolver(http, base).get_agent_card(), 'card')
        check(card.name, 'card: name is empty')
        check(card.capabilities.streaming, 'card: capabilities.streaming is not true')
        keep = [
            i
            for i in card.supported_interfaces
            if i.protocol_version == version and i.protocol_binding == binding
        ]
        check(
            keep,
            f'card: no supportedInterfaces entry with protocolVersion {version!r} and binding {binding!r} '
            f'(have {[(i.protocol_binding, i.protocol_version) for i in card.supported_interfaces]})',
        )
        del card.supported_interfaces[:]
        card.supported_interfaces.extend(keep)

        def config(streaming):
            return ClientConfig(
                streaming=streaming,
                supported_protocol_bindings=[binding],
                httpx_client=http,
                # gRPC interface URLs are host:port targets (no TLS on loopback).
                grpc_channel_factory=grpc.aio.insecure_channel,
            )

        plain = await create_client(card, config(False))
        streaming = await create_client(card, config(True))
        step('card', f'{card.name!r} via {type(plain._transport).__name__} {version} {binding}')

        # 2. blocking send
        events = await drain(plain.send_message(SendMessageRequest(message=message('hello'))), 'send')
        check(len(events) == 1, f'send: expected one result, got {[describe(e) for e in events]}')
        check(events[0].HasField('task'), f'send: expected a task, got {describe(events[0])}')
        task = events[0].task
        check(
            task.status.state == TaskState.TASK_STATE_COMPLETED,
            f'send: expected TASK_STATE_COMPLETED for a blocking send, got {state_name(task.status.state)}',
        )
        check(task.artifacts, 'send: the completed task has no artifacts')
        check(artifact_text(task).strip(), 'send: the artifacts have no text')
        step('send', f'task {task.id} {state_name(task.status.state)}, artifact text {artifact_text(task)[:40]!r}')

        # 3. get task with history_length=1
        got = await bounded(plain.get_task(GetTaskRequest(id=task.id, history_length=1)), 'get')
        check(got.id == task.id, f'get: asked for {task.id}, got {got.id}')
        check(
            got.status.state == TaskState.TASK_STATE_COMPLETED,
            f'get: expected TASK_STATE_COMPLETED, got {state_name(got.status.state)}',
        )
        check(len(got.history) <= 1, f'get: history_length=1 but {len(got.history)} messages came back')
        step('get', f'{state_name(got.status.state)}, history {len(got.history)}')

        # 4. list tasks (v1.0 only: v0.3 has no tasks/list)
        if version == '1.0':
            listed = await bounded(plain.list_tasks(ListTasksRequest()), 'list')
            ids = [t.id for t in listed.tasks]
            check(task.id in ids, f'list: task {task.id} is not among the {len(ids)} listed tasks')
            step('list', f'{len(ids)} task(s), ours included')
        else:
            print(f'{"list":<10} --  skipped (no tasks/list in v0.3)', flush=True)

        # 5. non-blocking send of a hanging prompt, then cancel it
        req = SendMessageRequest(
            message=message('please hang'),
            configuration=SendMessageConfiguration(return_immediately=True),
        )
        events = await drain(plain.send_message(req), 'send-nb')
        check(len(events) == 1 and events[0].HasField('task'), f'send-nb: expected a task, got {[describe(e) for e in events]}')
        hung = events[0].task
        check(
            hung.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING),
            f'send-nb: expected SUBMITTED or WORKING right after a non-blocking send, got {state_name(hung.status.state)}',
        )
        step('send-nb', f'task {hung.id} {state_name(hung.status.state)}')

        canceled = await bounded(plain.cancel_task(CancelTaskRequest(id=hung.id)), 'cancel')
        check(canceled.id == hung.id, f'cancel: asked for {hung.id}, got {canceled.id}')
        check(
            canceled.status.state == TaskState.TASK_STATE_CANCELED,
            f'cancel: expected TASK_STATE_CANCELED, got {state_name(canceled.status.state)}',
        )
        step('cancel', state_name(canceled.status.state))

        # 6. streaming send
        events = await drain(streaming.send_message(SendMessageRequest(message=message('hello'))), 'stream')
        _, kinds = check_stream(events, 'stream')
        check(
            any(e.HasField('status_update') for e in events),
            f'stream: expected at least one status update, got {kinds}',
        )
        check(
            any(e.HasField('artifact_update') for e in events),
            f'stream: expected at least one artifact update, got {kinds}',
        )
        step('stream', f'{len(events)} events: {kinds[0]}, ..., {kinds[-1]}')

        # 7. non-blocking "slow" send, then subscribe to it
        req = SendMessageRequest(
            message=message('slow hello'),
            configuration=SendMessageConfiguration(return_immediately=True),
        )
        events = await drain(plain.send_message(req), 'send-slow')
        check(len(events) == 1 and events[0].HasField('task'), f'send-slow: expected a task, got {[describe(e) for e in events]}')
        slow = events[0].task
        check(
            slow.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING),
            f'send-slow: expected SUBMITTED or WORKING, got {state_name(slow.status.state)}',
        )
        events = await drain(streaming.subscribe(SubscribeToTaskRequest(id=slow.id)), 'subscribe')
        _, kinds = check_stream(events, 'subscribe', task_id=slow.id)
        step('subscribe', f'{len(events)} events: {kinds[0]}, ..., {kinds[-1]}')

        # 8. the change: a task that edits a file in a git repository carries a `changes`
        #    artifact (a data part naming the file, a file part changes.patch), and the
        #    patch applies onto a clean clone of the repository with git apply.
        await check_change(plain, version, binding)
    finally:
        await http.aclose()


if __name__ == '__main__':
    if (
        len(sys.argv) not in (3, 4)
        or sys.argv[2] not in ('1.0', '0.3')
        or (len(sys.argv) == 4 and sys.argv[3] not in ('JSONRPC', 'HTTP+JSON', 'GRPC'))
    ):
        sys.exit('usage: py_client.py BASE_URL 1.0|0.3 [JSONRPC|HTTP+JSON|GRPC]')
    base_url, ver = sys.argv[1].rstrip('/'), sys.argv[2]
    bnd = sys.argv[3] if len(sys.argv) == 4 else 'JSONRPC'
    try:
        asyncio.run(main(base_url, ver, bnd))
    except Deviation as e:
        print(f'FAIL py {ver} {bnd}: {e}', file=sys.stderr, flush=True)
        sys.exit(1)
    except Exception as e:  # SDK errors: show type and message, not just a traceback
        print(f'FAIL py {ver} {bnd}: {type(e).__name__}: {e}', file=sys.stderr, flush=True)
        sys.exit(1)
    print(f'PASS py {ver} {bnd}', flush=True)
