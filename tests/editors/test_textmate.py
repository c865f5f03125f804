"""The TextMate grammar of the VS Code extension (editors/vscode/syntaxes): its patterns
compile, every reserved word of the language gets a keyword scope, and each keyword,
string, comment and number of every plan in the repository gets the scope it should,
by VS Code's own engine (vscode-textmate on Oniguruma, installed by `make test` with npm)
and by a small engine here on Python's `re`, whose syntax the grammar keeps to."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from planc.syntax.keywords import CONTEXTUAL, RESERVED

from .plans import CONSTANT_WORDS, PLANS, ROOT, lexable_text, lexes, planc_tokens

VSCODE = ROOT / "editors" / "vscode"
GRAMMAR = json.loads((VSCODE / "syntaxes" / "planc.tmLanguage.json").read_text())
# Oniguruma syntax that Python's `re` reads otherwise, or not at all: the grammar avoids
# it, so the Python engine below means what VS Code's does.
ONIGURUMA_ONLY = (r"\h", r"\H", r"\G", r"\K", r"\z", r"\Z", r"\p{", r"\x{", "(?~", "[:",
                  "*+", "++", "?+", "(?<name>")


def rules(grammar=GRAMMAR):
    """The grammar's `match` rules in the order TextMate tries them: (scope, regex)."""
    out = []

    def walk(patterns):
        for p in patterns:
            if "include" in p:
                walk([grammar["repository"][p["include"].lstrip("#")]])
            elif "patterns" in p:
                walk(p["patterns"])
            else:
                assert set(p) <= {"name", "match"}, f"only match rules: {p}"
                out.append((p["name"], p["match"]))
    walk(grammar["patterns"])
    return out


def tokenize_line(line: str, compiled) -> list[tuple[int, int, str]]:
    """TextMate's rule on one line: from the current position, the rule whose match
    starts first wins (the earlier rule on a tie); unmatched text keeps the base scope."""
    out, pos = [], 0
    while pos < len(line):
        best = None
        for scope, rx in compiled:
            m = rx.search(line, pos)
            if m and (best is None or m.start() < best[0].start()):
                best = (m, scope)
        if best is None:
            break
        m, scope = best
        out.append((m.start(), m.end(), scope))
        pos = m.end() if m.end() > pos else pos + 1
    return out


def expected_scope(kind: str, value: str, reserved) -> str | None:
    if kind == "COMMENT":
        return "comment.line."
    if kind == "STRING":
        return "string.quoted.double."
    if kind in ("INT", "SIZE"):
        return "constant.numeric."
    if value in CONSTANT_WORDS and value in reserved:
        return "constant.language."
    if value in reserved or kind in ("MODEL", "STATE"):
        return "keyword."
    return None


def lark_tokens(text: str):
    """(line index, column in code points, type, value) of what planc's lexer reads."""
    return [(tok.line - 1, tok.column - 1, tok.type, str(tok)) for tok in planc_tokens(text)]


def test_every_pattern_compiles_and_keeps_to_the_syntax_both_engines_read_alike():
    found = rules()
    assert len(found) >= 10
    for scope, pattern in found:
        re.compile(pattern)
        assert scope.endswith(".planc"), scope
        for construct in ONIGURUMA_ONLY:
            assert construct not in pattern, (scope, construct)


def test_every_reserved_word_of_the_grammar_gets_a_keyword_scope():
    compiled = [(s, re.compile(p)) for s, p in rules()]
    for word in RESERVED:
        [(start, end, scope)] = tokenize_line(word, compiled)
        want = "constant.language." if word in CONSTANT_WORDS else "keyword."
        assert (start, end) == (0, len(word)) and scope.startswith(want), (word, scope)
    for word, lookahead in CONTEXTUAL:
        # What follows the word where it is a keyword: a string (`model`), a `{` (`state`,
        # `axes`), a `(` (`stages`).
        after = next(a for a in ('"x"', "{", "(")
                     if re.match(word + lookahead, f"{word} {a}"))
        assert tokenize_line(f"{word} {after}", compiled)[0] == (0, len(word),
                                                                 "keyword.other.planc")
        assert tokenize_line(f"{word} = 2", compiled)[0][2] == "variable.other.planc"


@pytest.mark.parametrize("path", PLANS, ids=lambda p: str(p.relative_to(ROOT)))
def test_each_token_of_every_plan_gets_its_scope(path):
    text = lexable_text(path)
    compiled = [(s, re.compile(p)) for s, p in rules()]
    lines = text.split("\n")
    ours = {(i, start): (end, scope) for i, line in enumerate(lines)
            for start, end, scope in tokenize_line(line, compiled)}
    check_scopes(path, text, ours, utf16=False)


def check_scopes(path, text, ours, *, utf16: bool):
    lines = text.split("\n")
    checked = 0
    for line, col, kind, value in lark_tokens(text):
        want = expected_scope(kind, value, RESERVED)
        if want is None:
            continue
        start, width = col, len(value)
        if utf16:  # JavaScript counts UTF-16 units
            before = lines[line][:col]
            start = len(before.encode("utf-16-le")) // 2
            width = len(value.encode("utf-16-le")) // 2
        end, scope = ours.get((line, start), (None, None))
        assert (end, scope is not None and scope.startswith(want)) == (start + width, True), \
            (str(path), line + 1, value, want, scope)
        checked += 1
    assert checked > 0


def _vscode_engine_ready() -> bool:
    return shutil.which("node") is not None and \
        (VSCODE / "node_modules" / "vscode-textmate").is_dir() and \
        (VSCODE / "node_modules" / "vscode-oniguruma").is_dir()


@pytest.mark.skipif(not _vscode_engine_ready(),
                    reason="node and editors/vscode/node_modules (make test installs them)")
def test_vscode_s_own_engine_gives_every_plan_the_same_scopes():
    plans = [p for p in PLANS if lexes(p)]
    proc = subprocess.run(["node", str(VSCODE / "test" / "tokenize.js"), *map(str, plans)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    for path in plans:
        ours = {(line, start): (end, scope) for line, start, end, scope in result[str(path)]}
        check_scopes(path, path.read_text(encoding="utf-8"), ours, utf16=True)


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
def test_the_extension_s_client_is_valid_javascript():
    for script in ("extension.js", "test/tokenize.js"):
        proc = subprocess.run(["node", "--check", str(VSCODE / script)], capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr


def test_the_extension_manifest_names_files_that_exist():
    manifest = json.loads((VSCODE / "package.json").read_text())
    [lang] = manifest["contributes"]["languages"]
    [grammar] = manifest["contributes"]["grammars"]
    assert lang["extensions"] == [".kd"] and grammar["language"] == lang["id"] == "planc"
    assert grammar["scopeName"] == GRAMMAR["scopeName"] == "source.planc"
    assert (VSCODE / grammar["path"]).is_file() and (VSCODE / lang["configuration"]).is_file()
    assert (VSCODE / manifest["main"]).is_file()
    settings = manifest["contributes"]["configuration"]["properties"]
    assert settings["planc.command"]["default"] == ["planc", "lsp"]
    assert {"planc.model", "planc.devices"} <= set(settings)
    config = json.loads((VSCODE / "language-configuration.json").read_text())
    assert config["comments"]["lineComment"] == "#"
