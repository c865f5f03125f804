"""`planc lsp` on what a client should never send, and on inputs it cannot use: each gets
the protocol's error or a diagnostic, one line in the log, and the server keeps serving
(a later request is still answered)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pygls")

from lsp_session import Raw  # noqa: E402

PLAN = "plan p\nmesh(batch = auto, model = 2)\nmodel_parallel(batch = batch)\n" \
       'layout {\n  "w" -> (_, model)\n}\n'


def still_serving(raw: Raw) -> None:
    reply = raw.reply_to(raw.send("textDocument/hover", {
        "textDocument": {"uri": "file:///nowhere/p.kd"}, "position": {"line": 0,
                                                                    "character": 0}}))
    assert "result" in reply or "error" in reply


def open_doc(raw: Raw, path, text: str) -> str:
    uri = path.absolute().as_uri()
    raw.send("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "planc",
                                                       "version": 1, "text": text}},
             request=False)
    return uri


def errors(raw: Raw) -> list[dict]:
    return [m["error"] for m in raw.seen if "error" in m and m.get("id") is None]


def test_text_that_is_not_json_gets_a_parse_error_and_one_log_line(server):
    server.send_bytes(b'{"jsonrpc": "2.0", "id": 5, "method": ')
    still_serving(server)
    [err] = errors(server)
    assert err["code"] == -32700 and err["message"].startswith("Parse error")
    code, log = server.finish()
    assert code == 0 and len(log) == 1 and log[0].startswith("planc lsp: error: ")


@pytest.mark.parametrize("sent, error", [
    (b'{"jsonrpc": "2.0", "method": "x", "params": "\xff\xfe"}', -32700),
    (b"[1, 2, 3]", -32600),
], ids=["not-utf8-is-a-parse-error", "json-not-a-message-is-an-invalid-request"])
def test_a_message_the_server_cannot_take_gets_its_protocol_error(server, sent, error):
    server.send_bytes(sent)
    still_serving(server)
    [err] = errors(server)
    assert err["code"] == error
    code, log = server.finish()
    assert code == 0 and len(log) == 1


def test_a_request_with_malformed_params_gets_invalid_params_under_its_id(server):
    server.send_bytes(json.dumps({"jsonrpc": "2.0", "id": 99, "method": "textDocument/hover",
                                  "params": {"position": "here"}}).encode())
    still_serving(server)
    [err] = [m["error"] for m in server.seen if m.get("id") == 99]
    assert err["code"] == -32602 and errors(server) == []
    code, log = server.finish()
    assert code == 0 and len(log) == 1


def test_an_unknown_request_gets_method_not_found(server):
    reply = server.reply_to(server.send("planc/teleport", {}))
    assert reply["error"]["code"] == -32601
    still_serving(server)
    code, log = server.finish()
    assert code == 0 and len(log) == 1 and "planc/teleport" in log[0]


def test_an_unknown_notification_is_ignored(server):
    server.send("planc/somethingHappened", {"x": 1}, request=False)
    still_serving(server)
    code, log = server.finish()
    assert code == 0 and not errors(server)


def test_a_document_that_is_not_valid_unicode_is_a_p009_diagnostic(server, tmp_path):
    # JSON may escape half a surrogate pair, which no UTF-8 file can hold.
    uri = (tmp_path / "p.kd").as_uri()
    body = ('{"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": '
            '{"uri": "%s", "languageId": "planc", "version": 1, "text": "plan p\\n# \\ud800"}}}'
            % uri).encode()
    server.send_bytes(body)
    [d] = server.diagnostics_for(uri)
    assert d["code"] == "P009" and d["range"]["start"] == {"line": 1, "character": 2}
    assert "not valid Unicode" in d["message"]
    still_serving(server)
    assert server.finish()[0] == 0


def test_a_10_mb_document_is_a_p125_diagnostic_not_a_hang(server, tmp_path):
    rule = '  "block_%d/w" -> (_, model)\n'
    text = PLAN + "layout {\n" + "".join(rule % i for i in range(350_000)) + "}\n"
    assert len(text) > 10_000_000
    uri = open_doc(server, tmp_path / "big.kd", text)
    [d] = server.diagnostics_for(uri)
    assert d["code"] == "P125" and "larger than 1048576 bytes" in d["message"]
    still_serving(server)
    assert server.finish()[0] == 0


def test_an_unreadable_model_is_a_p701_diagnostic_and_one_log_line(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    raw = Raw()
    try:
        raw.initialize({"planc": {"model": str(tmp_path / "model.safetensors")}})
        uri = open_doc(raw, tmp_path / "p.kd", PLAN)
        first = raw.diagnostics_for(uri)
        second = raw.diagnostics_for(uri)
        [d] = [d for d in second if d["code"] == "P701"]
        assert not any(d["code"] == "P701" for d in first)
        assert d["severity"] == 2 and "model.safetensors" in d["message"]
        assert d["range"]["start"] == {"line": 0, "character": 0}
        still_serving(raw)
        code, log = raw.finish()
        assert code == 0 and len(log) == 1 and "model not read" in log[0]
    finally:
        if raw.proc.poll() is None:
            raw.proc.kill()


def test_a_model_that_cannot_be_found_is_a_diagnostic_too(tmp_path):
    raw = Raw()
    try:
        raw.initialize({"planc": {"model": str(tmp_path / "missing.safetensors")}})
        uri = open_doc(raw, tmp_path / "p.kd", PLAN)
        raw.diagnostics_for(uri)
        assert [d["code"] for d in raw.diagnostics_for(uri)] == ["P701"]
        still_serving(raw)
        assert raw.finish()[0] == 0
    finally:
        if raw.proc.poll() is None:
            raw.proc.kill()


def test_a_client_that_closes_its_end_stops_the_server(server):
    server.proc.stdin.close()
    assert server.proc.wait(30) is not None


def test_a_frame_shorter_than_its_header_says_does_not_lose_the_messages_after_it(server):
    # The header claims 2 bytes, the body has 8: the next header starts mid-line.
    server.proc.stdin.write(b'Content-Length: 2\r\n\r\n{"a": 1}')
    server.proc.stdin.flush()
    still_serving(server)
    still_serving(server)
    assert [e["code"] for e in errors(server)] == [-32700]
    code, log = server.finish()
    assert code == 0 and len(log) == 1


def test_a_message_larger_than_the_server_reads_gets_a_parse_error(server):
    from planc.lsp.stream import MAX_MESSAGE_BYTES

    n = MAX_MESSAGE_BYTES + 1
    server.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % n)
    for _ in range(n // (1 << 20)):
        server.proc.stdin.write(b" " * (1 << 20))
    server.proc.stdin.write(b" " * (n % (1 << 20)))
    server.proc.stdin.flush()
    still_serving(server)
    [err] = errors(server)
    assert err["code"] == -32700
    code, log = server.finish()
    assert code == 0 and len(log) == 1


def test_a_change_to_a_document_never_opened_is_ignored(server, tmp_path):
    uri = (tmp_path / "never.kd").as_uri()
    server.send("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                           "contentChanges": [{"text": "plan p\n"}]},
                request=False)
    still_serving(server)
    code, log = server.finish()
    assert code == 0 and len(log) <= 1


def test_a_position_past_the_end_of_the_document_is_answered(server, tmp_path):
    uri = open_doc(server, tmp_path / "p.kd", PLAN)
    server.diagnostics_for(uri)
    for method in ("textDocument/hover", "textDocument/definition",
                   "textDocument/completion"):
        reply = server.reply_to(server.send(method, {
            "textDocument": {"uri": uri}, "position": {"line": 900, "character": 900}}))
        assert "result" in reply, reply
    code, log = server.finish()
    assert code == 0 and log == []


def test_an_untitled_document_is_checked_too(server):
    uri = "untitled:Untitled-1"
    server.send("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "planc",
                                                          "version": 1, "text": "mseh(a = 2)\n"}},
                request=False)
    [d] = server.diagnostics_for(uri)
    assert d["code"] == "P006"
    still_serving(server)
    assert server.finish()[0] == 0


@pytest.mark.parametrize("position", [{"line": 2 ** 31, "character": 0},
                                      {"line": 0, "character": -5}])
def test_a_position_outside_lsps_types_is_answered_under_its_own_id_with_32602(server,
                                                                            tmp_path,
                                                                            position):
    uri = open_doc(server, tmp_path / "p.kd", PLAN)
    reply = server.reply_to(server.send("textDocument/hover", {
        "textDocument": {"uri": uri}, "position": position}))
    assert reply["error"]["code"] == -32602
    still_serving(server)
