"""Taking the candidate out of a reply: every way a reply can be unusable gets its exact reason."""

from __future__ import annotations

from openkernel.generate.extract import NO_CODE_BLOCK, UNCLOSED_CODE_BLOCK, Extracted, extract_candidate

GOOD = "import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    pass\n"


def test_one_python_block_with_intent_line() -> None:
    reply = f"Intent: fuse the softmax\n\nOne pass over the row.\n\n```python\n{GOOD}```\n"
    assert extract_candidate(reply) == Extracted(GOOD, "fuse the softmax", None)


def test_py_and_plain_fences_count_as_code() -> None:
    assert extract_candidate(f"Tile it.\n```py\n{GOOD}```") == Extracted(GOOD, "Tile it.", None)
    assert extract_candidate(f"Tile it.\n```\n{GOOD}```") == Extracted(GOOD, "Tile it.", None)


def test_blocks_in_other_languages_are_explanation() -> None:
    reply = f"**Intent:** vectorised loads\n```cuda\n__global__ void k() {{}}\n```\n```python\n{GOOD}```"
    assert extract_candidate(reply) == Extracted(GOOD, "vectorised loads", None)


def test_intent_falls_back_to_the_first_sentence_trimmed() -> None:
    plan = "I will rewrite the whole reduction as a two-stage tree with warp shuffles. Then."
    assert extract_candidate(f"# Plan\n{plan}\n```python\n{GOOD}```") == Extracted(GOOD, "Plan", None)
    reply = f"{plan}\n```python\n{GOOD}```"
    assert extract_candidate(reply) == Extracted(
        GOOD, "I will rewrite the whole reduction as a two-stage tree wi...", None
    )


def test_no_code_block() -> None:
    assert extract_candidate("Sorry, I cannot help.") == Extracted(None, "Sorry, I cannot help.", NO_CODE_BLOCK)
    assert extract_candidate("") == Extracted(None, "", NO_CODE_BLOCK)


def test_unclosed_code_block() -> None:
    reply = f"Intent: tiles\n```python\n{GOOD}"
    assert extract_candidate(reply) == Extracted(None, "tiles", UNCLOSED_CODE_BLOCK)


def test_two_code_blocks() -> None:
    reply = f"Intent: two tries\n```python\n{GOOD}```\nor\n```python\n{GOOD}```"
    error = "2 code blocks: reply with exactly one ```python fenced block holding the whole candidate file, not 2"
    assert extract_candidate(reply) == Extracted(None, "two tries", error)


def test_syntax_error_names_the_line() -> None:
    reply = "Intent: x\n```python\nimport torch\n\nclass ModelNew(:\n    pass\n```"
    assert extract_candidate(reply) == Extracted(None, "x", "syntax error at line 3: invalid syntax")


def test_class_model_instead_of_model_new() -> None:
    reply = "Intent: x\n```python\nclass Model:\n    pass\n```"
    error = "no class ModelNew: found class Model; rename it to ModelNew (same constructor and forward as Model)"
    assert extract_candidate(reply) == Extracted(None, "x", error)


def test_model_new_lookalike() -> None:
    reply = "Intent: x\n```python\nclass Model_New:\n    pass\n```"
    error = "no class ModelNew: found class Model_New; rename it to ModelNew (same constructor and forward as Model)"
    assert extract_candidate(reply) == Extracted(None, "x", error)


def test_no_class_at_all() -> None:
    reply = "Intent: x\n```python\ndef forward(x):\n    return x\n```"
    error = (
        "no class ModelNew: the candidate file must define class ModelNew(nn.Module) "
        "with the same constructor and forward as Model"
    )
    assert extract_candidate(reply) == Extracted(None, "x", error)
