"""Operations with a name of their own, and the words a tool uses when it performs one.

gateway/actions.py reads an operation verb as a class (creating, deleting, updating,
...): "tag the release" asks for an update, which any tool that updates something
performs. Many operations are narrower than their class, and a user names them by a
verb of their own: rebase a branch, stash changes, archive a channel, invite someone,
schedule a meeting, cancel a workflow. A set whose closest tools never say any word
for that operation (in any of its forms: "archives", "archived", "archiving") does
not perform it, whatever else they update.

``FAMILIES`` maps each such verb to the words a tool's text says when it may perform
it: the verb itself, its near-synonyms in software's vocabulary, and the nouns of
what the operation makes or changes ("schedule": a calendar event, a cron job, a
reminder). They are written generously, from general knowledge of software
operations (version control, chat, ticketing, CI, databases, cloud, files and
documents, calendars, e-mail, CRM, payments), not from any tool set: a word missing
here makes the search refuse a request a tool could do, a word too many only lets
one through. Generic verbs that any tool may be said to do ("make", "do", "check",
"see", "handle", "run", "use", "set", "get", "open", "create", "update", ...) are
not listed: what they ask for is the class that gateway/actions.py reads, or nothing
sure. Nor are verbs that read or wait as often as they act ("pull", "watch", "follow",
"fetch", "track", "log", "print", "dump", "verify", "block" until done) or that mean
another thing as often ("leave a comment", "join two tables", "call an API", "sign
in", "link to a page").
"""

from __future__ import annotations

from collections.abc import Mapping

from skillop.gateway.verbforms import forms

#: "verb verb ...: word word ...": each verb on the left may be performed by a tool
#: whose text says one of the words on the right (or the verbs themselves). A
#: hyphenated word is also read joined ("cherry-pick": "cherry pick", "cherrypick").
_INVENTORY = """
rebase: rebase
stash unstash: stash shelve
cherrypick: cherry-pick backport
squash: squash merge
tag untag retag: tag label release version categorize category keyword update edit modify
checkout: checkout switch branch
bisect: bisect
blame: blame annotate history
amend: amend edit update modify change rewrite
fork: fork copy clone duplicate
clone: clone copy fork duplicate download checkout mirror
revert: revert undo rollback restore reset
rollback: rollback revert undo restore downgrade previous history
push: push upload publish sync commit notify notification
pin unpin: pin bookmark star favorite favourite
star unstar: star favorite favourite bookmark like pin
bookmark: bookmark favorite favourite star pin save
react: react reaction emoji
upvote downvote vote: vote upvote downvote like react reaction
like unlike: like favorite favourite star react reaction upvote
invite uninvite: invite invitation member collaborator join share enroll onboard access attendee
kick: kick ban remove member expel
ban unban: ban block kick suspend remove member
unblock: block unblock ban mute spam filter
mute unmute silence: mute silence snooze notification notifications quiet
snooze: snooze mute remind reminder defer later
archive unarchive: archive close hide deactivate disable
schedule reschedule: schedule cron calendar event meeting appointment book booking later
    delay timer recurring reminder
book: book booking reserve reservation schedule appointment calendar event order buy
    purchase ticket
remind: remind reminder schedule notify notification alert later todo task
decline: decline reject respond rsvp attendee invitation cancel
assign reassign unassign: assign assignee owner delegate allocate update edit modify
escalate: escalate escalation priority urgent page severity assign update edit
triage: triage label priority assign categorize update edit
prioritize: priority prioritize rank order update edit modify
transition: transition status state move workflow update edit
lock unlock: lock protect freeze restrict readonly permission
transfer: transfer move migrate assign owner ownership
cancel: cancel abort stop terminate kill halt interrupt delete remove end
retry rerun: retry rerun restart rebuild trigger run start execute launch dispatch
deploy redeploy: deploy deployment release rollout publish ship launch provision install
    apply upgrade
promote: promote deploy release publish advance
pause suspend: pause suspend stop disable halt hold freeze
resume unpause: resume unpause restart continue start enable
truncate: truncate delete empty clear purge drop
vacuum: vacuum analyze optimize compact maintenance
reindex: reindex index rebuild
migrate: migrate migration move transfer import export copy upgrade
replicate: replicate replica replication copy sync mirror
backup: backup snapshot dump export copy save archive
restore: restore recover undo revert import load rollback backup
grant revoke: grant revoke permission role access privilege share policy
shard reshard: shard partition split distribute
compact: compact compaction optimize vacuum
flush: flush clear purge invalidate cache
failover: failover switchover promote replica
scale autoscale: scale autoscale resize replica instance capacity size count
resize: resize scale size dimension crop width height expand grow shrink update modify
reboot: reboot restart start
drain cordon uncordon: drain cordon uncordon schedule evict
rotate: rotate rotation regenerate renew
renew: renew renewal extend rotate
mount unmount: mount unmount attach detach volume
attach detach: attach attachment detach mount connect link upload
encrypt decrypt: encrypt decrypt encryption cipher key
forward: forward send share redirect
redirect: redirect forward route
unsubscribe: unsubscribe subscription subscribe remove opt
subscribe: subscribe subscription follow watch notify notification
snapshot: snapshot backup image capture screenshot
export: export download dump save convert
import: import upload load ingest
convert: convert export transform format transcode
compress zip: compress zip archive pack
decompress unzip untar: decompress unzip untar extract unpack
translate: translate translation language
transcribe: transcribe transcription transcript speech
redact: redact redaction mask anonymize
refund: refund reverse return credit
charge: charge payment pay invoice bill
pay: pay payment charge invoice checkout
invoice bill: invoice bill billing payment
buy purchase: buy purchase order checkout cart
dedupe deduplicate: dedupe deduplicate duplicate merge
merge unmerge: merge combine consolidate join
unlink: link unlink relate relation associate connect attach
dial phone: call dial phone voice
sms: sms text message send
tweet retweet: tweet retweet post
"""


def _parsed(text: str) -> dict[str, frozenset[str]]:
    """Each verb of ``text`` (``_INVENTORY``'s lines) -> its words, the verbs with it."""
    out: dict[str, set[str]] = {}
    for line in text.replace("\n    ", " ").strip().splitlines():
        left, right = line.split(":")
        verbs = [verb.replace("-", "") for verb in left.split()]
        words = {word.replace("-", "") for word in right.split()}
        for verb in verbs:
            out.setdefault(verb, set()).update(words, verbs)
    return {verb: frozenset(words) for verb, words in out.items()}


#: Verb -> the words a tool says when it may perform it (base forms).
FAMILIES: Mapping[str, frozenset[str]] = _parsed(_INVENTORY)


def _inflected() -> dict[str, frozenset[str]]:
    """Verb -> every form of every word of its family."""
    return {verb: frozenset(form for word in words for form in forms(word))
            for verb, words in FAMILIES.items()}


#: Verb -> the forms of its family's words.
SAID: Mapping[str, frozenset[str]] = _inflected()
