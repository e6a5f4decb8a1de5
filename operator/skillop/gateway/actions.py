"""What operation a search asks for, and which operations a tool performs.

The sentence model places "delete a Slack message" next to ``slack_post_message``:
same service, same object, a high cosine. It cannot tell that the query asks for
an operation the tool does not perform, so a set with no deleting tool would
answer with the posting one as a good match. This module reads the operation
from the words: a query that starts with an operation verb ("delete ...",
"please cancel ...") asks for that operation's classes (CRUD and a few more); a
tool performs the classes its name, title and first sentence name. The search
(gateway/search.py) says nothing fits when none of the closest tools performs
any class the query asks for (when the query names a skill of the set, none of
that skill's closest: ``named``).

The lexicon is general English, not any set's: each verb maps to every class it
can mean (adding to or removing from something is also an update of it; "post"
creates as well as sends), so that a tool is not taken for unable when one
reading fits. A query asks only through its leading verb in its base form (an
imperative): a verb later in a long task, or "we changed ...", says nothing.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Collection, Mapping

import snowballstemmer

_CLASSES: Mapping[str, str] = {
    # making something
    "create": "create", "make": "create update", "generate": "create", "register": "create",
    "build": "create", "initialize": "create", "init": "create", "new": "create",
    "insert": "create update", "add": "create update", "upload": "create update",
    "write": "create update", "set": "create update", "start": "start create",
    "save": "create update", "store": "create update", "remember": "create update",
    "record": "create update", "put": "create update", "install": "create update start",
    "commit": "create update",
    # taking it away
    "delete": "delete", "remove": "delete update", "drop": "delete", "erase": "delete",
    "destroy": "delete", "purge": "delete", "forget": "delete update", "trash": "delete",
    "discard": "delete", "unlink": "delete", "uninstall": "delete", "wipe": "delete",
    "clear": "delete update",
    # changing it
    "update": "update", "edit": "update", "modify": "update", "change": "update",
    "rename": "update", "patch": "update", "replace": "update", "alter": "update",
    "amend": "update", "adjust": "update", "overwrite": "update", "toggle": "update",
    "enable": "update", "disable": "update", "assign": "update", "unassign": "update",
    "label": "update", "tag": "update create", "mark": "update", "apply": "update create",
    "configure": "update", "resize": "update", "scale": "update", "promote": "update",
    "lock": "update", "unlock": "update", "pin": "update", "star": "update",
    "unstar": "update", "subscribe": "update", "upgrade": "update", "downgrade": "update",
    # stopping what runs
    "cancel": "stop", "stop": "stop", "abort": "stop", "kill": "stop",
    "terminate": "stop delete", "halt": "stop", "pause": "stop", "interrupt": "stop",
    "suspend": "stop", "shutdown": "stop",
    # running it
    "run": "start", "execute": "start", "trigger": "start", "launch": "start",
    "rerun": "start", "retry": "start", "restart": "start stop", "resume": "start",
    "invoke": "start", "deploy": "start create update", "spawn": "start create",
    "play": "start",
    # telling someone
    "send": "send", "post": "send create", "publish": "send create", "notify": "send",
    "reply": "send create", "comment": "send create", "email": "send", "message": "send",
    "share": "send update", "announce": "send", "respond": "send create", "forward": "send",
    # moving or copying
    "move": "move update", "copy": "move create", "clone": "move create",
    "duplicate": "move create", "transfer": "move update", "fork": "move create",
    "merge": "merge update", "rebase": "merge update",
    # deciding, closing, undoing
    "approve": "approve update create", "unapprove": "approve update",
    "accept": "approve update", "reject": "approve update",
    "close": "close update", "archive": "close update", "resolve": "close update",
    "reopen": "close update",
    "restore": "restore update", "undo": "restore update", "revert": "restore update create",
    "rollback": "restore update", "reset": "restore update", "recover": "restore update",
    "unarchive": "restore update",
}


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Verb -> the classes it can mean.
VERBS: Mapping[str, frozenset[str]] = {verb: _words(classes)
                                       for verb, classes in _CLASSES.items()}
#: A tool that says it manages or handles something may do any of it.
_ANY = frozenset(("manage", "handle"))
#: The verbs that make a query ask for an operation when they lead it: the common,
#: unambiguous ones (a noun as often as a verb, "record", "label", "message", does
#: not; a tool's text is still read with every verb above).
TRIGGERS = _words("""
    create add make insert generate register build initialize upload write set start
    delete remove drop erase destroy purge forget trash discard unlink uninstall wipe clear
    update edit modify change rename patch replace alter amend adjust overwrite toggle
    enable disable assign cancel stop abort kill terminate halt pause interrupt suspend
    shutdown run execute trigger launch rerun retry restart resume invoke deploy spawn
    play send post publish notify reply comment share announce respond move copy clone
    duplicate transfer fork merge approve accept reject unapprove close archive resolve
    reopen restore undo revert rollback reset recover unarchive""")
#: Words before the verb of a request ("please", "can you", "I want to", "let's").
_LEAD = _words("""please can could would you i we need want to like let lets let's go
    ahead just now help me us""")
_WORD = re.compile(r"[A-Za-z']+")
_LETTERS = re.compile(r"[a-z]+")
_NAME_WORD = re.compile(r"[a-z0-9]+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s|\n")
_STEMMER = snowballstemmer.stemmer("english")
#: A stemmer keeps the word it works on in itself: searches run in worker threads.
_STEMMING = threading.Lock()


@functools.lru_cache(maxsize=1 << 14)
def _stem(word: str) -> str:
    with _STEMMING:
        stem: str = _STEMMER.stemWord(word)
    return stem


def _stemmed() -> dict[str, frozenset[str]]:
    """Each verb's stem -> its classes (so "deletes", "deleting" read as "delete")."""
    everything = frozenset().union(*VERBS.values())
    out: dict[str, set[str]] = {}
    for verb, classes in (*VERBS.items(), *((verb, everything) for verb in _ANY)):
        out.setdefault(_stem(verb), set()).update(classes)
    return {stem: frozenset(classes) for stem, classes in out.items()}


_BY_TERM = _stemmed()


def asked(query: str) -> frozenset[str]:
    """The classes of the operation ``query`` asks for: its leading verb's, when it
    is one of the ``TRIGGERS`` in its base form; else none (the query asks to find
    or read, or its verb says nothing sure)."""
    for word in _WORD.findall(query[:200]):
        lower = word.lower()
        if lower not in _LEAD:
            return VERBS[lower] if lower in TRIGGERS else frozenset()
    return frozenset()


@functools.lru_cache(maxsize=1 << 14)
def performed(name_words: str, title: str, description: str) -> frozenset[str]:
    """The classes of the operations a tool performs, as its name (split into words),
    its title and the first sentence of its description say (the rest of a
    description often names what the tool does not do, or what to call next)."""
    first = _SENTENCE_END.split(description.strip(), maxsplit=1)[0]
    found: set[str] = set()
    for word in _LETTERS.findall(f"{name_words} {title} {first}".lower()):
        found |= _BY_TERM.get(_stem(word), frozenset())
    return frozenset(found)


def phrase(skill: str) -> str:
    """A skill's name as a query says it: "google-maps" -> "google maps"."""
    return " ".join(_NAME_WORD.findall(skill.lower()))


def named(query: str, skills: Collection[str]) -> list[str]:
    """The ``skills`` (each a ``phrase``) that ``query`` names, as whole words."""
    text = f" {phrase(query[:1000])} "
    return [skill for skill in skills if f" {skill} " in text]
