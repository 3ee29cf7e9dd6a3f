use super::*;

/// Error texts as the CLIs printed them in the recorded runs (tests/fixtures/transcripts).
#[test]
fn recorded_error_texts_get_their_kind() {
    let cases = [
        // codex-exec-auth-401.jsonl
        ("unexpected status 401 Unauthorized: Incorrect API key provided: sk-test., url: http://127.0.0.1:39057/v1/responses", AUTH),
        // opencode-auth-401.jsonl (error.data.message), opencode-server-500, connection-refused
        ("Incorrect API key provided: sk-test.", AUTH),
        ("Cannot connect to API: Unable to connect. Is the computer able to access the url?", NETWORK),
        // gemini-auth-400.jsonl: a 400 whose reason is API_KEY_INVALID
        (r#"[API Error: {"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}]"#, AUTH),
        // gemini-server-500.stderr.txt
        (r#"Attempt 1 failed with status 500. Retrying with backoff... _ApiError: {"error":{"code":500,"message":"Internal error encountered.","status":"INTERNAL"}}"#, MODEL),
        // aider-auth-401.txt (the pty's last lines)
        ("litellm.AuthenticationError: AuthenticationError: OpenAIException - Incorrect \nAPI key provided: sk-test.", AUTH),
        // aider-server-error-500.txt (the line the aider adapter fails on)
        ("litellm.InternalServerError: InternalServerError: OpenAIException - Scripted ", MODEL),
        // qwen's result line error.message (issue 17)
        ("[API Error: 401 Incorrect API key provided: sk-bad.]", AUTH),
        ("[API Error: 500 The server had an error]", MODEL),
        // claude-code-resume-unknown-id.stderr.txt
        ("No conversation found with session ID: 99999999-2222-4333-8444-555555555555", SESSION_NOT_FOUND),
        // Gemini ACP session/load
        ("session/load failed: Internal error (No previous sessions found for this project.)", SESSION_NOT_FOUND),
        ("Error: HTTP 401: Unauthorized", AUTH),
        ("429 Too Many Requests", RATE_LIMIT),
    ];
    for (text, kind) in cases {
        assert_eq!(of_text(text), Some(kind), "{text}");
    }
    assert_eq!(of_text("the build printed 4010 warnings"), None);
    assert_eq!(of_text("Traceback: ValueError"), None);
}

#[test]
fn a_specific_parser_kind_wins_and_a_generic_one_gives_way() {
    assert_eq!(kind_of(Some("max_turns"), "Incorrect API key"), MAX_TURNS);
    assert_eq!(kind_of(Some("rate_limit"), ""), RATE_LIMIT);
    assert_eq!(kind_of(Some("server_error"), "HTTP 500"), MODEL);
    assert_eq!(kind_of(Some("connection"), ""), NETWORK);
    assert_eq!(kind_of(Some("permission"), "401"), PERMISSION);
    // Qwen's error_during_execution with a 401 in error.message.
    assert_eq!(
        kind_of(
            Some("execution"),
            "[API Error: 401 Incorrect API key provided]"
        ),
        AUTH
    );
    assert_eq!(kind_of(Some("api"), "Cannot connect to API"), NETWORK);
    assert_eq!(kind_of(Some("api"), "something odd"), MODEL);
    assert_eq!(kind_of(None, "segfault"), EXECUTION);
    assert_eq!(kind_of(Some(""), ""), EXECUTION);
}
