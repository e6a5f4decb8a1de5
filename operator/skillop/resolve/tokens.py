"""What a tool costs a model's context, in tokens of a real BPE tokenizer.

A tool's count is what an LLM API is sent for it as a function: its name (the
``bindingName``, the name the model sees), its description and its input schema
as canonical JSON, each tokenized with OpenAI's ``cl100k_base`` encoding and
added up. The encoding's vocabulary ships inside the ``bpe-openai`` wheel (the
Rust ``bpe-openai`` crate), so counting needs no download. ``cl100k_base`` rather
than ``o200k_base``: it holds half the memory in every process that counts, and
counts tool definitions within a few percent of it (bench/disclosure.py); other
vendors' tokenizers are not public, so no count is exact for every model: it is
a stable, honest measure to budget with (docs/decisions.md).

Counting is memoized: the description and schema part per ToolDef (shared by
every actor that reaches it, and kept between resolutions), and every text in a
bounded cache. The tokenizer loads on first use, once per process (about 20 ms and 30 MiB,
most of a ``skillop validate``'s cost after pydantic's): ``token_bound`` lets the resolver
check what a count only bounds (the ToolSet's size) without it.
"""

from __future__ import annotations

import functools
import importlib
import importlib.machinery
import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import Any

from skillop.model.memo import Cell
from skillop.model.tooldef import ToolDef

#: The encoding every count uses; the ToolSet document names it.
ENCODING = "cl100k_base"
#: The definition's count (description and input schema), kept on its ToolDef.
DEFINITION_TOKENS: Cell[int] = Cell("tokens")


@functools.lru_cache(maxsize=4)
def encoding_counter(encoding: str) -> Callable[[str], int]:
    """A token counter for any encoding the package ships (``ENCODING`` for counts
    skillop writes; others to compare, bench/disclosure.py)."""
    count: Callable[[str], int] = _bindings().tokenizer_for_encoding(encoding).count
    return count


def counting() -> bool:
    """Whether this process has loaded the tokenizer: counts are then cheap."""
    return encoding_counter.cache_info().currsize > 0


def _counter() -> Callable[[str], int]:
    return encoding_counter(ENCODING)


def _bindings() -> Any:
    """The package's Rust binding (``bpe_openai._bindings``, typed by its .pyi), loaded
    by itself: the package's ``__init__`` decodes three vocabularies in Python for its
    tiktoken-compatible layer (about 1 s and 65 MiB), while the binding carries its
    own and builds a tokenizer in under 20 ms."""
    package = importlib.util.find_spec("bpe_openai")
    for folder in (package.submodule_search_locations or []) if package else []:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = Path(folder) / f"_bindings{suffix}"
            spec = importlib.util.spec_from_file_location("bpe_openai._bindings", path)
            if path.is_file() and spec is not None and spec.loader is not None:
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                return module
    return importlib.import_module("bpe_openai._bindings")


@functools.lru_cache(maxsize=1 << 16)
def count_tokens(text: str) -> int:
    """Tokens of ``text`` (special-token spellings count as plain text). Cached by
    text: small schemas (``{"type":"object"}``) and shared descriptions recur across
    thousands of tools, and hashing a string is far cheaper than tokenizing it."""
    if not text:
        return 0
    try:
        return _counter()(text)
    except UnicodeEncodeError:  # a lone surrogate (JSON allows "\\ud800"): as U+FFFD
        return _counter()(text.encode("utf-8", "replace").decode("utf-8"))


def definition_tokens(tool: ToolDef) -> int:
    """Tokens of the tool's description and input schema, computed once per ToolDef."""
    found = DEFINITION_TOKENS.get(tool.memo)
    if found is None:
        found = DEFINITION_TOKENS.put(tool.memo, count_tokens(tool.description)
                                      + count_tokens(tool.fragments()["inputSchema"]))
    return found


def tool_tokens(binding_name: str, tool: ToolDef) -> int:
    """What the model is sent for ``tool`` under ``binding_name``."""
    # ``DEFINITION_TOKENS.get``, inline: this runs for every tool of every Actor.
    found: int | None = tool.memo._tables.get(DEFINITION_TOKENS)
    if found is None:
        found = definition_tokens(tool)
    return count_tokens(binding_name) + found


#: The most UTF-8 bytes one character takes: a token is at least one byte.
_MAX_CHAR_BYTES = 4


def token_bound(binding_name: str, tool: ToolDef) -> int:
    """At least ``tool_tokens(binding_name, tool)``, without the tokenizer: every token
    is one byte or more of the texts' UTF-8 (a lone surrogate is counted as one)."""
    texts = (binding_name, tool.description, tool.fragments()["inputSchema"])
    return _MAX_CHAR_BYTES * sum(map(len, texts))
