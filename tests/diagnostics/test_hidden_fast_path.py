"""`has_hidden`'s shortcuts (a printable ASCII text is answered without its regex) give
the answer of the one test every character goes through, `hidden`."""

from planc.diagnostics.text import _BLANK, has_hidden, hidden


def slow_has_hidden(text: str, allowed: str = "") -> bool:
    return any(hidden(c) for c in text if c not in allowed)


def test_every_blank_character_is_past_ascii():
    assert not any(c.isascii() for c in _BLANK)


def test_has_hidden_agrees_with_hidden_on_each_character_around_the_shortcuts():
    samples = [chr(c) for c in range(0x300)] + sorted(_BLANK) + [
        "\u202e", "\u200b", "\u00a0", "\u2028", "\ud800", "\U0010ffff", "é", "中"]
    for ch in samples:
        for text in (ch, f"abc {ch} def", f"layout {{ \"{ch}\" -> (_, model) }}\n"):
            assert has_hidden(text) == slow_has_hidden(text), repr(text)
            assert has_hidden(text, allowed="\n\t") == slow_has_hidden(text, "\n\t"), repr(text)


def test_plain_ascii_plan_text_holds_nothing_hidden_but_its_tabs_and_newlines():
    text = 'mesh(batch = auto)\n\tlayout { ".*" -> (_, batch) }  # a comment\n'
    assert not has_hidden(text, allowed="\n\t")
    assert has_hidden(text)
