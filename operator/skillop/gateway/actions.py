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

A tool that performs the class may still not act on what the query names: "create a
Slack channel" next to ``slack_post_message`` (it creates, but messages) and
``slack_list_channels`` (channels, but it lists). ``Objects.missed`` reads the
query's object, the words after its verb up to the first preposition, and says the
closest tools cannot do it when some of them name that object (so the set's words
for it are known), yet none that performs the class names it. A tool whose name is
its verb alone (``kubectl_delete``) acts on anything; a tool that names the object
with a verb the lexicon does not read (``lighthouse_audit``) may well do it.
"""

from __future__ import annotations

import functools
import itertools
import re
import threading
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import snowballstemmer

from skillop.gateway.lexical import ToolText
from skillop.gateway.memo import per_query
from skillop.gateway.thesaurus import GROUPS, SHORT_FORMS
from skillop.gateway.verbforms import inflected

_CLASSES: Mapping[str, str] = {
    # making something
    "create": "create", "make": "create update", "generate": "create", "register": "create",
    "build": "create", "initialize": "create", "init": "create", "new": "create",
    "insert": "create update", "add": "create update", "upload": "create update",
    "write": "create update", "set": "create update", "start": "start create",
    "save": "create update", "store": "create update", "remember": "create update",
    "record": "create update", "put": "create update", "install": "create update start",
    "commit": "create update", "provision": "create start",
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
    "configure": "update", "fix": "update", "resize": "update", "scale": "update",
    "promote": "update",
    "subscribe": "update", "upgrade": "update", "downgrade": "update",
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


#: Operations of their own, none of the classes above: a tool performs one only when
#: its words say so (pushing commits is not creating them; starring, pinning, muting a
#: thing is no edit of it; a file zipped is not written). Left out: verbs that mean
#: reading or waiting as often ("pull" the prices out of a page, "follow" the links,
#: "block" until it ends, "watch" a pod, "remind" me what I did).
_OWN: Mapping[str, str] = {
    # version control
    "push": "push", "stash": "stash", "cherrypick": "cherrypick",
    "squash": "merge update",
    # marking and following
    "star": "star", "unstar": "star", "pin": "pin", "unpin": "pin", "mute": "mute",
    "unmute": "mute", "snooze": "mute", "lock": "lock", "unlock": "lock", "protect": "lock",
    "unprotect": "lock",
    # people and their rights (granting one is also an update of who may do what:
    # a tool that adds a collaborator does it)
    "invite": "invite", "enroll": "invite", "grant": "grant update", "revoke": "grant update",
    # data spread over servers
    "shard": "shard", "reshard": "shard",
    # time
    "schedule": "schedule", "reschedule": "schedule", "book": "book", "reserve": "book",
    # files and their forms
    "zip": "compress", "compress": "compress", "unzip": "decompress",
    "decompress": "decompress", "untar": "decompress", "chmod": "permission",
    "chown": "permission", "symlink": "link", "print": "print", "export": "export",
    "import": "import", "download": "download", "backup": "backup", "snapshot": "backup",
    "encrypt": "encrypt", "decrypt": "encrypt", "translate": "translate",
    "convert": "convert",
    # money
    "pay": "pay", "charge": "pay", "refund": "pay", "buy": "buy", "purchase": "buy",
}

#: Verb -> the classes it can mean.
VERBS: Mapping[str, frozenset[str]] = {verb: _words(classes)
                                       for verb, classes in (*_CLASSES.items(), *_OWN.items())}
#: A tool that says it manages or handles something may do any of it.
_ANY = frozenset(("manage", "handle"))
#: The verbs that make a query ask for an operation when they lead it: the common,
#: unambiguous ones and every operation of its own (a noun as often as a verb,
#: "record", "label", "message", does not; a tool's text is still read with every verb
#: above).
TRIGGERS = _words("""
    create add make insert generate register build initialize upload write set start
    delete remove drop erase destroy purge forget trash discard unlink uninstall wipe clear
    update edit modify change rename patch replace alter amend adjust overwrite toggle
    enable disable assign cancel stop abort kill terminate halt pause interrupt suspend
    shutdown run execute trigger launch rerun retry restart resume invoke deploy spawn
    play send post publish notify reply comment share announce respond move copy clone
    duplicate transfer fork merge approve accept reject unapprove close archive resolve
    reopen restore undo revert rollback reset recover unarchive
    rebase tag install email provision fix""") | _OWN.keys()
#: "give" someone access (rights, a role, a permission) grants it, when one of these
#: words is among the few after the verb ("give @kim read access to ..."); "give me a
#: summary" still reads.
_RIGHTS = frozenset(("access", "permission", "permissions", "rights", "role", "roles"))
_RIGHTS_WITHIN = 5
#: Words before the verb of a request ("please", "can you", "I want to", "let's", "how
#: do I", "is there a way to"): skipped, so a question asking how to do it asks for it.
_LEAD = _words("""please pls plz kindly can could would you i we need want to like let
    lets let's go ahead just now help me us how do does is there a way it possible that
    hey ok okay also quickly then and""")
_WORD = re.compile(r"[A-Za-z']+(?:-[A-Za-z']+)*")
#: Command-line programs a request may start with, their own verb next ("git push",
#: "kubectl delete", "helm rollback").
_COMMANDS = _words("""git gh glab kubectl helm docker podman npm yarn pip terraform
    aws gcloud az heroku""")
#: Quoted text is what to write or call something, not what is acted on.
_QUOTED = re.compile(r"\"[^\"]*\"|“[^”]*”|`[^`]*`")
_LETTERS = re.compile(r"[a-z]+")
_NAME_WORD = re.compile(r"[a-z0-9]+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s|\n")
#: Whether an adverb before the verb ("permanently delete", "manually run") is
#: skipped like the words of ``_LEAD`` (bench/abstain_cv.py's ablation).
ADVERBS = True
#: Whether the abstention reads a tool's verbs by their forms, not their stems
#: (``performed``; bench/abstain_cv.py's ablation).
FORMS = True
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

#: Each form of each verb -> its classes (gateway/verbforms.py).
_BY_FORM = inflected({**VERBS, **dict.fromkeys(_ANY, frozenset().union(*VERBS.values()))})


@per_query(lambda: ADVERBS, chars=200)
def _request(query: str) -> tuple[str, tuple[str, ...]]:
    """The query's leading word after the words that lead a request ("please", "can
    you", "how do I") and adverbs ("permanently"), its hyphens dropped ("re-run",
    "cherry-pick"), and the words after it (lowercased, split at hyphens); ("", ())
    when there is none."""
    tokens = _WORD.findall(_QUOTED.sub(" ", query[:200]))
    start = next((i for i, token in enumerate(tokens)
                  if token.lower() not in _LEAD and not _adverb(token.lower())), len(tokens))
    if start < len(tokens) - 1 and tokens[start].lower() in _COMMANDS:
        start += 1  # "git push ...": the command's own verb
    if start == len(tokens):
        return "", ()
    rest = [word.lower() for token in tokens[start + 1:] for word in token.split("-")]
    if rest[:2] in (["for", "me"], ["for", "us"]):
        rest = rest[2:]  # "make for me a new channel"
    return tokens[start].lower().replace("-", ""), tuple(rest)


def _adverb(word: str) -> bool:
    """Whether ``word`` is an adverb in "-ly" ("permanently", "manually"), not a verb
    ("reply", "apply")."""
    return ADVERBS and len(word) > 4 and word.endswith("ly") and word not in VERBS


def leading(query: str) -> str:
    """The word that leads ``query``'s request (after "please", "I need to", ...):
    its verb when it is an imperative; "" when there is none."""
    return _request(query)[0]


def asked(query: str) -> frozenset[str]:
    """The classes of the operation ``query`` asks for: its leading verb's, when it
    is one of the ``TRIGGERS`` in its base form; else none (the query asks to find
    or read, or its verb says nothing sure)."""
    verb, rest = _request(query)
    if verb == "give" and not _RIGHTS.isdisjoint(rest[:_RIGHTS_WITHIN]):
        return VERBS["grant"]
    return VERBS[verb] if verb in TRIGGERS else frozenset()


@functools.lru_cache(maxsize=1 << 14)
def performed(name_words: str, title: str, description: str, *,
              forms: bool = False) -> frozenset[str]:
    """The classes of the operations a tool performs, as its name (split into words),
    its title and the first sentence of its description say (the rest of a
    description often names what the tool does not do, or what to call next). With
    ``forms``, a word counts only as one of a verb's forms, two in a row joined too
    ("cherry pick"): the abstention's reading; else by its stem (the ranking's)."""
    first = _SENTENCE_END.split(description.strip(), maxsplit=1)[0]
    found: set[str] = set()
    words = _LETTERS.findall(f"{name_words} {title} {first}".lower())
    for word in [*words, *map("".join, itertools.pairwise(words))] if forms else words:
        found |= (_BY_FORM.get(word, frozenset()) if forms
                  else _BY_TERM.get(_stem(word), frozenset()))
    return frozenset(found)


def phrase(skill: str) -> str:
    """A skill's name as a query says it: "google-maps" -> "google maps"."""
    return " ".join(_NAME_WORD.findall(skill.lower()))


def named(query: str, skills: Collection[str]) -> list[str]:
    """The ``skills`` (each a ``phrase``) that ``query`` names, as whole words."""
    text = f" {phrase(query[:1000])} "
    return [skill for skill in skills if f" {skill} " in text]


#: Words that end a verb's object ("delete *the table* from the base"); one right
#: after the verb means it has none ("comment on the page").
_ENDS = _words("""to in into on onto from at for with by about as via called named that
    which who so and or than like under over across through between without within
    inside against per toward towards""")
#: Particles of a phrasal verb ("wipe out a pod"), skipped before its object.
_PARTICLES = _words("out up off down back away")
#: Words that name nothing acted on: determiners, pronouns, "of" ("the status of the
#: page": both are), "new" (what is created is new), and "get" (a tool that "gets" a
#: sum computes it; the search drops it too).
_DETERMINERS = _words("""a an the my our your his her its their this that these those
    some any all every each me us it i you them there of new get whole entire anyone
    anybody anything everything everyone someone something nobody nothing both""")
#: A word of a tool's name or first sentence that reads: with no class, the tool does
#: not act on its object.
_READS = frozenset(map(_stem, _words("""list retrieve read describe search find
    show fetch view check count query lookup look inspect""")))
#: A word is the service's own, not an object, when at least this share of the
#: service's tool names (of at least ``_SERVICE_TOOLS``) has it ("kubectl", "browser").
_SHARED = 0.5
_SERVICE_TOOLS = 4


def stems(words: Iterable[str]) -> frozenset[str]:
    """The stems of ``words`` that may name a thing (not "a", "my", "every", "new")."""
    return frozenset(_stem(word) for word in words
                     if len(word) > 1 and word not in _DETERMINERS)


def _thesaurus() -> dict[str, frozenset[str]]:
    """Each stem of the thesaurus (gateway/thesaurus.py) -> its groups' stems."""
    out: dict[str, set[str]] = {}
    for group in GROUPS:
        words = stems(group)
        for stem in words:
            out.setdefault(stem, set()).update(words)
    return {stem: frozenset(others) for stem, others in out.items()}


_SAME = _thesaurus()


def sought(said: frozenset[str]) -> frozenset[str]:
    """The stems ``said`` and the thesaurus's words for them."""
    return frozenset().union(said, *(_SAME.get(stem, ()) for stem in said))


def objects(query: str, *, adverbs: bool = True) -> frozenset[str]:
    """The stems of what ``query``'s leading operation verb acts on: the words after
    it, up to the first preposition or conjunction; none when the verb has no direct
    object ("comment on ...") or acts on an activity ("stop placing ..."). Without
    ``adverbs``, the words in "-ly" ("erase Carol completely") are left out: the
    abstention's reading (the ranking's features keep them)."""
    verb, after = _request(query)
    if verb not in TRIGGERS:
        return frozenset()
    rest = list(itertools.dropwhile(_PARTICLES.__contains__, after))
    if not rest or rest[0] in _ENDS or rest[0].endswith("ing"):
        return frozenset()
    if not adverbs:  # the abstention's: "of that X" names X ("that" no conjunction)
        rest = [w for n, w in enumerate(rest) if not (n and rest[n - 1] == "of" and w == "that")]
    said = itertools.takewhile(lambda word: word not in _ENDS, rest)
    return stems(full for word in said if adverbs or not _adverb(word)
                 for full in SHORT_FORMS.get(word, (word,)))


def _reading(tool: ToolText) -> bool:
    """Whether ``tool``'s name or the first sentence of its description (of three words
    or more: a heading is none) says it reads ("This tool retrieves ... a specific
    workflow": ``hubspot-get-workflow``; "get" alone may compute: "get-sum")."""
    sentences = (_LETTERS.findall(part.lower()) for part in _SENTENCE_END.split(tool.description))
    first = next((words for words in sentences if len(words) > 2), [])  # not "Purpose: 1."
    return not _READS.isdisjoint(map(_stem, [*tool.name_words().split(), *first]))


def ending(query: str) -> str:
    """The preposition that ends ``query``'s object ("remove it *from* ..."), or ""."""
    return next((word for word in _request(query)[1] if word in _ENDS), "")


def telling(skill: str) -> bool:
    """Whether a skill's name (a ``phrase``) tells the skill in a query: not when its
    words name nothing ("everything", "all")."""
    return bool(stems(skill.split()))


#: The word that leads a query's request, "" when none (the abstention's name for it).
verb = leading


@dataclass(frozen=True, slots=True)
class Objects:
    """The words of a set's tool names that name no object: each service's own
    (``shared``) and its name (``services``)."""

    shared: Mapping[str, frozenset[str]]
    services: frozenset[str]

    @classmethod
    def of(cls, tools: Iterable[tuple[str, str]]) -> Objects:
        """From each tool's (skill, name words)."""
        counts: dict[str, Counter[str]] = {}
        sizes: Counter[str] = Counter()
        for skill, name_words in tools:
            counts.setdefault(skill, Counter()).update(stems(name_words.split()))
            sizes[skill] += 1
        shared = {skill: frozenset(stem for stem, n in counted.items()
                                   if n >= _SHARED * sizes[skill] >= _SHARED * _SERVICE_TOOLS)
                  for skill, counted in counts.items()}
        return cls(shared, frozenset().union(*(stems(_LETTERS.findall(skill.lower()))
                                               for skill in counts)))

    def named_by(self, tool: ToolText) -> frozenset[str]:
        """The objects ``tool``'s name says it acts on (its verb among them)."""
        own = self.shared.get(tool.skill, frozenset())
        service = stems(_LETTERS.findall(tool.skill.lower()))
        return stems(tool.name_words().split()) - service - own

    def unable(self, query: str, wanted: frozenset[str], closest: Sequence[ToolText], *,
               naming: frozenset[str] | None = None) -> bool:
        """Whether none of the ``closest`` tools performs a class ``wanted`` (on what
        ``query`` acts on: ``missed``)."""
        return (not any(wanted & performed(tool.name_words(), tool.title, tool.description,
                                           forms=FORMS)
                        for tool in closest)
                or self.missed(query, wanted, closest, naming=naming))

    def missed(self, query: str, wanted: frozenset[str], closest: Sequence[ToolText], *,
               naming: frozenset[str] | None = None) -> bool:
        """Whether the ``closest`` tools name what ``query`` acts on, yet none that
        performs a class ``wanted`` (``naming`` if given, as they name it) acts on it."""
        wanted_objects = sought(objects(query, adverbs=False) - self.services)
        names = [self.named_by(tool) for tool in closest]
        if not any(name & wanted_objects for name in names):
            return False
        for tool, name in zip(closest, names, strict=True):
            does = performed(tool.name_words(), tool.title, tool.description, forms=FORMS)
            if ((does & (wanted if naming is None else naming) and name & wanted_objects)
                    or (does & wanted and len(name) <= 1 and name <= _BY_TERM.keys())):
                return False
            if name & wanted_objects and not does and not _reading(tool):
                return False
        return True


class ObjectsByView:
    """A set's ``Objects`` as a caller sees it: tools hidden from the caller count
    for nothing (a service's own words and the services' names are those of the
    visible tools alone), so whether a query gets "nothing fits" never depends on
    what the caller may not see. Each view is made once (about 15 ms at 5,000
    tools) and kept, a few of them: a gateway's callers see few distinct views."""

    _KEPT = 16

    def __init__(self, tools: Sequence[tuple[str, str]]) -> None:
        self._tools = tools
        self._views: dict[frozenset[int], Objects] = {frozenset(): Objects.of(tools)}
        # Searches run in worker threads (gateway/search_tool.py): a view is made and
        # the oldest let go under the lock, never while another thread walks the views.
        self._lock = threading.Lock()

    def without(self, hidden: Collection[int]) -> Objects:
        """The ``Objects`` of the tools whose numbers are not in ``hidden``."""
        key = frozenset(hidden)
        view = self._views.get(key)
        if view is not None:
            return view
        with self._lock:
            view = self._views.get(key)
            if view is None:
                view = Objects.of(tool for n, tool in enumerate(self._tools) if n not in key)
                if len(self._views) >= self._KEPT:
                    del self._views[next(k for k in self._views if k)]
                self._views[key] = view
        return view

