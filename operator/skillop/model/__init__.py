"""Typed models of skillop's CRDs, their names and references, and problems.

Import what you use from its module (``skillop.model.manifest``, ``.specs``,
``.names``, ...): the package imports none of them, so that a module that needs
one light module (``model.settings`` for a CLI flag, ``model.visible`` for a
printed line) does not load pydantic and every model with it.
"""
