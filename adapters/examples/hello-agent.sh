#!/usr/bin/env bash
# hello-agent.sh: a minimal agent speaking agent-host's native line protocol
# (agent-host-jsonl, see adapters/README.md). It greets, repeats the prompt, and, when the
# prompt contains the word "ask", first asks for permission and waits for the answer on stdin.
#
#   hello-agent.sh [--session-id ID] [--resume ID] [--model M] PROMPT
#
# Every line it prints on stdout is one JSON object. Anything on stderr goes to the host log
# (and the last lines into the failure message if it exits without "done").
set -u

# A JSON string literal for $1: escapes backslash, quote and the control characters a prompt
# is likely to hold.
json_str() {
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}
  s=${s//$'\r'/\\r}
  s=${s//$'\t'/\\t}
  printf '"%s"' "$s"
}

session_id="" resumed="" model="hello-model"
while [ $# -gt 1 ]; do
  case $1 in
    --session-id) session_id=$2; shift 2 ;;
    --resume) session_id=$2; resumed=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --) shift; break ;;  # the host puts `--` before the prompt (end_of_options)
    *) shift ;;
  esac
done
prompt=${1:-}
[ -n "$session_id" ] || session_id="hello-$$-$RANDOM"

# 1. Who we are. The host remembers session_id for the context (and passes it back with
#    --resume when the adapter has resume_args).
printf '{"type":"init","session_id":%s,"model":%s,"cwd":%s,"tools":["greet"]}\n' \
  "$(json_str "$session_id")" "$(json_str "$model")" "$(json_str "$PWD")"

loud=no
case " $prompt " in
  *[[:space:]]ask[[:space:]]*)
    # 2. Ask and wait: the task goes input-required until the client answers.
    printf '{"type":"tool_use","id":"t1","name":"greet","input":{"volume":"loud"}}\n'
    printf '{"type":"approval_required","id":"a1","kind":"permission","target":"greet loudly","detail":"May I shout the greeting?","options":[{"id":"allow","label":"Shout"},{"id":"deny","label":"Whisper"}]}\n'
    # The host writes one line: {"decision":"allow"|"deny","id":"a1","type":"approval_response",...}
    if ! IFS= read -r answer; then
      printf '{"type":"error","message":"stdin closed while waiting for permission","kind":"stdin_closed"}\n'
      exit 2
    fi
    case $answer in
      *'"decision":"allow"'*) loud=yes
        printf '{"type":"tool_result","id":"t1","output":"permission granted","is_error":false}\n' ;;
      *) printf '{"type":"tool_result","id":"t1","output":"permission denied","is_error":true}\n' ;;
    esac
    ;;
esac

# 3. The answer, streamed in chunks (delta defaults to true).
if [ "$loud" = yes ]; then greeting="HELLO! "; else greeting="Hello! "; fi
[ -z "$resumed" ] || printf '{"type":"text","text":%s}\n' "$(json_str "(session $resumed again) ")"
printf '{"type":"text","text":%s}\n' "$(json_str "$greeting")"
sleep 0.2
printf '{"type":"text","text":%s}\n' "$(json_str "You said: $prompt")"
echo "hello-agent: done" >&2

# 4. Tokens, then the end of the turn. Without "result" the host uses the streamed text.
printf '{"type":"usage","input_tokens":%d,"output_tokens":3}\n' "${#prompt}"
printf '{"type":"done","is_error":false}\n'
