"""Kinds of service a query may name by what they are, not by their product's name.

"Ask the team chat who is on call" means the set's Slack (or Discord, or Mattermost)
tools, though it names none: neither its words nor, reliably, the sentence model say
that Slack is a team chat. Each kind below pairs the generic words people use for it
("team chat", "wiki", "crm", "spreadsheet") with the products and services of that
kind whose name a tool's skill or name would carry. A query that says a kind's words
makes the tools of that kind's products candidates the fusion may lift
(gateway/fusion.py, ``kind_named``).

Where the list comes from: written from general knowledge of the kinds of software a
tool set serves (chat, code hosting, notes, spreadsheets, CRM, issue tracking, CI,
clusters, browsers, web search, maps, an assistant's memory, files, version
control, databases, mail, calendars, storage, payments, monitoring), several products
each, not from any query line. A kind's words are index terms (gateway/lexical.py:
stemmed, stop words dropped) matched as a run of the query's terms; a product's are
matched against the terms of a tool's skill and name, all of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from skillop.gateway.lexical import terms

#: Kind -> (what people call it, comma-separated; its products, comma-separated).
KINDS: dict[str, tuple[str, str]] = {
    "team chat": (
        "team chat, chat, chat room, chatroom, workspace chat, instant message, instant"
        " messaging, direct message, dm, group chat, chat channel",
        "slack, discord, mattermost, microsoft teams, zulip, rocketchat, rocket chat,"
        " gitter, telegram, whatsapp, webex, google chat, matrix chat, element chat"),
    "code hosting": (
        "code host, code hosting, forge, hosted repository, remote repository, repo host,"
        " merge request, pull request, code review",
        "github, gitlab, bitbucket, gitea, forgejo, codeberg, sourcehut, azure repos"),
    "notes and wiki": (
        "wiki, knowledge base, notes app, team docs, workspace page, doc page, notebook,"
        " handbook, intranet",
        "notion, confluence, coda, obsidian, evernote, onenote, gitbook, quip, outline"),
    "spreadsheets and no-code tables": (
        "spreadsheet, sheet, base, grid, no code database, tracker sheet",
        "airtable, google sheets, smartsheet, excel, baserow, nocodb, seatable, coda"),
    "crm": (
        "crm, customer records, customer relationship, sales pipeline, deal, lead,"
        " prospect, marketing automation",
        "hubspot, salesforce, pipedrive, zoho crm, attio, close crm, copper crm,"
        " freshsales, dynamics 365"),
    "issue tracking": (
        "issue tracker, bug tracker, ticket, backlog, sprint board, kanban",
        "jira, linear, youtrack, github, gitlab, trello, asana, clickup, redmine"),
    "continuous integration": (
        "ci, continuous integration, build server, build pipeline, test run, nightly"
        " build",
        "circleci, jenkins, travis, buildkite, github actions, gitlab ci, teamcity,"
        " drone ci, bamboo ci"),
    "container clusters": (
        "cluster, container orchestrator, orchestration, pod, workload, node pool",
        "kubernetes, kubectl, helm, openshift, rancher, nomad"),
    "browsers": (
        "browser, web page, tab, headless, website, web app",
        "playwright, puppeteer, selenium, chrome devtools, devtools, browserbase"),
    "web search": (
        "web search, search the web, internet, online, search engine, the web",
        "brave search, tavily, exa, serpapi, bing search, duckduckgo, perplexity,"
        " firecrawl, kagi, google search"),
    "maps and places": (
        "map, directions, route, geocode, nearby, address, place, travel time",
        "google maps, mapbox, openstreetmap, here maps, tomtom"),
    "assistant memory": (
        "memory, long term memory, knowledge graph, remember, recall, what you know",
        "memory, mem0, zep memory, knowledge graph"),
    "files on disk": (
        "disk, local file, folder, directory, file system, my machine, home folder",
        "filesystem, file system, desktop commander"),
    "local version control": (
        "working copy, local repo, staging area, working tree, commit, branch",
        "git"),
    "databases": (
        "database, db, table, collection, query, sql, schema",
        "postgres, postgresql, mysql, mongodb, mongo, neon, supabase, sqlite, redis,"
        " dynamodb, planetscale, cockroachdb, snowflake, bigquery"),
    "mail": (
        "mail, email, inbox, mailbox",
        "gmail, outlook, fastmail, protonmail, sendgrid, mailgun, mailchimp"),
    "calendars": (
        "calendar, meeting, appointment, schedule, event",
        "google calendar, outlook calendar, calendly, cal com"),
    "cloud storage": (
        "cloud storage, bucket, file share, shared drive, cloud drive",
        "dropbox, google drive, onedrive, box com, s3, sharepoint"),
    "payments": (
        "payment, invoice, subscription, billing, charge, refund",
        "stripe, paypal, braintree, adyen, square payments, paddle, chargebee"),
    "monitoring and incidents": (
        "monitoring, error tracking, incident, alert, on call, uptime, apm",
        "sentry, datadog, new relic, pagerduty, opsgenie, grafana, honeycomb"),
}


def _phrases(text: str) -> tuple[tuple[str, ...], ...]:
    """Comma-separated phrases as runs of index terms (empty ones dropped)."""
    return tuple(run for part in text.split(",") if (run := tuple(terms(part))))


#: Each kind's words and products, as index terms.
_KINDS: tuple[tuple[tuple[tuple[str, ...], ...], tuple[tuple[str, ...], ...]], ...] = tuple(
    (_phrases(words), _phrases(products)) for words, products in KINDS.values())


#: The most terms of a kind's phrase.
_WIDEST = max(len(phrase) for words, _ in _KINDS for phrase in words)


def _parts(run: Sequence[str]) -> frozenset[tuple[str, ...]]:
    """Every contiguous part of ``run`` as long as a kind's phrase may be: a phrase is
    looked up, not slid along a long query (a task of a hundred words)."""
    return frozenset(tuple(run[i:i + width]) for width in range(1, _WIDEST + 1)
                     for i in range(len(run) - width + 1))


def asked_products(query: str) -> frozenset[tuple[str, ...]]:
    """The products (as index terms) of every kind whose generic words ``query`` says."""
    run = terms(query)
    if not run:
        return frozenset()
    said = _parts(run)
    return frozenset(product for words, products in _KINDS
                     if not said.isdisjoint(words) for product in products)


def service_terms(skill: str, name: str) -> frozenset[str]:
    """The terms a product is looked for in: a tool's skill's and name's."""
    return frozenset(terms(skill)) | frozenset(terms(name))


def of_kind(service: frozenset[str], products: Iterable[tuple[str, ...]]) -> bool:
    """Whether a tool whose skill and name have the terms ``service`` is one of
    ``products`` (every term of one of them in it)."""
    return any(service.issuperset(product) for product in products)
