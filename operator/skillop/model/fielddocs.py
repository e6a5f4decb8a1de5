"""Each model field's attribute docstring: the CRDs' field descriptions.

The string literal under a field is its documentation (``kubectl explain``
shows it). It is read from the source only when a CRD is generated
(``skillop.model.crd``): pydantic's ``use_attribute_docstrings`` reads the
source of every model class when it is defined, which cost each CLI run and the
operator's start-up a noticeable share of their time for text only the
generated CRDs carry.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from functools import cache
from itertools import pairwise

from pydantic import BaseModel


def field_docs(model: type[BaseModel]) -> dict[str, str]:
    """Field name -> its attribute docstring, own or inherited (a subclass's wins)."""
    docs: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if isinstance(cls, type) and issubclass(cls, BaseModel) and cls is not BaseModel:
            docs.update(_own_docs(cls))
    return {name: text for name, text in docs.items() if name in model.model_fields}


@cache
def _own_docs(cls: type[BaseModel]) -> dict[str, str]:
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    (node,) = ast.parse(source).body
    assert isinstance(node, ast.ClassDef)
    docs: dict[str, str] = {}
    for stmt, following in pairwise(node.body):
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)):
            docs[stmt.target.id] = inspect.cleandoc(following.value.value)
    return docs
