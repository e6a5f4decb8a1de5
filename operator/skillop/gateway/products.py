"""Well-known products and services a query may name, and which of them a set serves.

"Create a Jira ticket" is close, for the sentence model, to GitLab's ``create_issue``:
the same purpose, another product. When a query names a product that appears nowhere
in the set's tool texts (its skills' names, tools' names, titles, descriptions,
tags, parameters), no tool of the set reaches it, and the search says nothing fits
(gateway/search.py).

Where the list comes from: written from general knowledge of the software market, by
category (the categories below), before it was run against any query set, and
committed alone. Left out on purpose, whatever their fame:

* names that are common English words, first names or surnames, or places ("Linear",
  "Box", "Square", "Zoom", "Teams", "Jenkins", "Ford", "Amazon", "Cypress"): only
  their unambiguous phrases are listed ("microsoft teams", "travis ci"); the product
  names among them count when capitalised inside a sentence (``CAPITALISED``), and
  Jenkins as self-hosted software (``SELF_HOSTED``: a surname too, a known risk);
* search engines, web browsers, public web sites and encyclopedias (Google, Bing,
  Chrome, Firefox, Wikipedia, Stack Overflow): a web search or fetch tool reaches
  them whatever its name;
* programming languages, operating systems, libraries, file formats and protocols
  (Python, Linux, React, PDF, FTP): they name how, not where;
* software one installs and runs rather than a service one has an account with:
  databases and queues (Redis, MySQL, Kafka), monitoring and infrastructure tools
  (Prometheus, Grafana, Terraform), self-hosted CI and version control (Jenkins,
  Gitea, Subversion), desktop applications (Excel, Photoshop): a set's cluster or
  shell tools install, deploy and run them ("put redis on the cluster from the
  bitnami chart"). This exclusion was made after the first version of the list (its
  own commit) was run on the seen query sets, where such names were asked of the
  Kubernetes tools; "contentful" was dropped then too ("largest contentful paint").
  They are listed apart (``SELF_HOSTED``) and count only in a query that says
  nothing of where software runs and does not make it a topic.

A name is lowercase words ([a-z0-9]+), one to three of them.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Sequence

#: Category -> its products, comma-separated.
CATEGORIES: dict[str, str] = {
    "issue trackers and project management": """
        jira, atlassian, trello, asana, clickup, wrike, youtrack, bugzilla, redmine,
        pivotal tracker, azure devops, azure boards, basecamp, smartsheet, zenhub,
        targetprocess, teamwork projects, microsoft project, ms project, microsoft
        planner, monday board, height app, linear app, shortcut app""",
    "chat and video calls": """
        discord, microsoft teams, ms teams, telegram, whatsapp, mattermost, rocketchat,
        webex, skype, wechat, viber, zulip, gitter, google chat, hangouts, facebook
        messenger, imessage, google meet, gotomeeting, zoom meeting, zoom call, jitsi,
        whereby, signal app""",
    "social networks and media": """
        twitter, tweet, retweet, facebook, instagram, linkedin, tiktok, reddit,
        subreddit, pinterest, snapchat, mastodon, bluesky, tumblr, youtube, twitch,
        vimeo, substack, product hunt, spotify, soundcloud, deezer, apple music,
        netflix, hulu, disney plus, prime video, audible, flickr""",
    "cloud storage and file transfer": """
        dropbox, google drive, onedrive, icloud, s3, amazon s3, aws s3, google cloud
        storage, gcs, azure blob, backblaze, pcloud, sharepoint, cloudflare r2,
        wetransfer, icloud drive, box com""",
    "cloud platforms and hosting": """
        aws, amazon web services, azure, gcp, google cloud, digitalocean, linode,
        heroku, vercel, netlify, cloudflare, firebase, ec2, aws lambda, cloudformation,
        ibm cloud, oracle cloud, alibaba cloud, hetzner, ovh, vultr, cloudwatch,
        route53, route 53, elastic beanstalk, ecs, eks, gke, aks, fargate, cloud run,
        app engine, azure functions, cloudfront, fly io""",
    "payments, billing and finance": """
        stripe, paypal, braintree, adyen, klarna, venmo, apple pay, google pay,
        razorpay, mollie, authorize net, revolut, plaid, coinbase, cash app, zelle,
        chargebee, recurly, lemon squeezy, gocardless, payoneer, alipay, wechat pay,
        quickbooks, xero, freshbooks, netsuite, expensify, brex, bill com, bamboohr,
        rippling, deel, binance, robinhood, etrade, metamask, etherscan, yahoo finance,
        alpha vantage""",
    "crm and customer support": """
        salesforce, hubspot, pipedrive, zoho, zoho crm, microsoft dynamics, dynamics
        365, freshsales, insightly, sugarcrm, keap, activecampaign, attio, zendesk,
        freshdesk, intercom, help scout, helpscout, servicenow, kayako, livechat,
        gorgias, olark, front app""",
    "marketing, mail delivery and analytics": """
        mailchimp, sendgrid, mailgun, amazon ses, klaviyo, constant contact, brevo,
        sendinblue, convertkit, campaign monitor, marketo, pardot, mixpanel, google
        analytics, hotjar, optimizely, launchdarkly, braze, semrush, ahrefs, google ads,
        facebook ads, meta ads, google search console, heap analytics, posthog,
        plausible analytics""",
    "mail": """
        gmail, microsoft outlook, outlook com, outlook calendar, yahoo mail, protonmail,
        proton mail, fastmail, zoho mail, icloud mail, apple mail, hotmail, microsoft
        exchange""",
    "calendars and scheduling": """
        google calendar, calendly, apple calendar, icloud calendar, acuity scheduling,
        microsoft bookings, savvycal, cal com""",
    "documents, notes, design and forms": """
        google docs, google sheets, google slides, google forms, google keep, onenote,
        evernote, confluence, quip, dropbox paper, roam research, apple notes, todoist,
        ticktick, microsoft to do, wunderlist, miro, figma, canva, lucidchart,
        whimsical, invision, adobe xd, adobe acrobat, typeform, surveymonkey, jotform,
        qualtrics, docusign, adobe sign, hellosign, pandadoc, gitbook, document360,
        grammarly""",
    "identity and secrets": """
        1password, lastpass, bitwarden, dashlane, okta, auth0, onelogin, ping identity,
        azure ad, entra id, aws secrets manager, azure key vault, doppler secrets""",
    "source hosting, ci/cd and code quality": """
        bitbucket, azure repos, sourcehut, codeberg, travis ci, travisci, github
        actions, bitbucket pipelines, azure pipelines, buildkite, codebuild,
        codepipeline, google cloud build, semaphore ci, appveyor, sonarcloud, snyk,
        dependabot, codecov, coveralls, docker hub, dockerhub, artifactory, jfrog, quay
        io, github copilot, vercel deployments, testflight, google play console, app
        store connect, browserstack, sauce labs, lambdatest, testrail""",
    "databases, search and data warehouses": """
        dynamodb, cosmos db, cosmosdb, firestore, snowflake, bigquery, redshift,
        databricks, planetscale, supabase, faunadb, pinecone, algolia, dbt cloud,
        fivetran, looker, tableau, power bi""",
    "queues, streaming and messaging apis": """
        amazon sqs, sqs, sns, google pubsub, azure service bus, event hubs, kinesis,
        twilio, vonage, nexmo, messagebird, plivo, sinch, pusher, ably, onesignal,
        firebase cloud messaging""",
    "monitoring, logging and incidents": """
        datadog, new relic, newrelic, splunk, sumo logic, sentry, dynatrace,
        appdynamics, pingdom, uptimerobot, stackdriver, papertrail, loggly, logdna,
        better stack, pagerduty, opsgenie, victorops, statuspage, incident io, bugsnag,
        rollbar, raygun, honeybadger""",
    "commerce, sites and content": """
        shopify, woocommerce, bigcommerce, etsy, ebay, wix, squarespace, wordpress,
        webflow, prismic, storyblok, hubspot cms, gumroad, patreon""",
    "travel, delivery, places and maps": """
        mapbox, here maps, openstreetmap, waze, apple maps, bing maps, tomtom, uber,
        lyft, airbnb, booking com, expedia, skyscanner, tripadvisor, google flights,
        yelp, opentable, doordash, grubhub, uber eats, ubereats, instacart, deliveroo,
        just eat, fedex, ups tracking, dhl, usps, openweathermap, accuweather""",
    "ai services": """
        openai, chatgpt, anthropic, hugging face, huggingface, stability ai, midjourney,
        dall e, dalle, wandb, weights and biases, replicate ai, elevenlabs, deepl,
        google translate""",
    "smart home and devices": """
        philips hue, google home, smartthings, ecobee, sonos, amazon alexa, apple
        homekit, homekit, fitbit, garmin connect, strava, peloton""",
    "hr and recruiting": """
        bamboo hr, workday hcm, greenhouse io, lever co, glassdoor, gusto payroll, adp
        payroll""",
}

_WORD = re.compile(r"[a-z0-9]+")
#: Software one installs and runs (the list's exclusion above), by category, written
#: from general knowledge; names that are common English words are left out ("chef",
#: "puppet", "vault", "bamboo", "apache"). Such a name counts only in a query that
#: says nothing of where software runs (``_RUNS``): "get the key session:1 from
#: Redis" asks Redis itself; "put redis on the cluster" asks the set's cluster tools.
SELF_HOSTED: dict[str, str] = {
    "databases, caches and queues": """
        redis, mysql, mariadb, postgresql, cassandra, couchdb, couchbase, elasticsearch,
        opensearch, memcached, clickhouse, influxdb, neo4j, kafka, rabbitmq, activemq,
        zookeeper, minio""",
    "monitoring and logging": """
        prometheus, grafana, kibana, logstash, jaeger, zipkin, nagios, zabbix,
        alertmanager""",
    "ci, version control and delivery": """
        jenkins, gitea, gogs, subversion, svn, teamcity, argocd, argo cd, spinnaker,
        sonarqube, nexus repository""",
    "infrastructure, servers and directories": """
        terraform, ansible, pulumi, hashicorp vault, consul, nginx, haproxy, traefik,
        tomcat, keycloak, active directory, ldap, openldap, airflow, metabase,
        superset""",
    "desktop applications": """
        microsoft excel, excel, powerpoint, microsoft word, photoshop, adobe
        illustrator, outlook desktop, libreoffice, keynote app""",
}
#: Words that say where software runs or how it is put there: a query with one asks
#: the set's cluster or shell tools, not the software's own service.
_RUNS = frozenset(_WORD.findall("""cluster clusters kubernetes k8s kubectl helm chart
    charts release releases pod pods container containers docker image images namespace namespaces
    deployment deployments deploy deployed install installed installing uninstall
    statefulset daemonset service services node nodes replica replicas port forward
    ingress volume configmap operator manifest manifests yaml shell terminal command
    locally localhost vm host compose"""))
#: Words that make software the topic of a question, not the thing acted on ("what
#: do I know about kafka", "find docs on redis streams"): a search or memory tool
#: may answer it.
_TOPIC = frozenset(_WORD.findall("""about regarding related docs documentation tutorial
    tutorials guide guides article articles paper papers notes news learn explain compare versus
    vs research"""))
#: Whether self-hosted software counts as a product (bench/abstain_cv.py's ablation).
SELF_HOSTED_PRODUCTS = True

#: The longest name, in words.
_LONGEST = 3
#: What in a query is not a name of a service: file names, paths, addresses, handles
#: and channels ("report.xlsx", "src/app", "https://...", "@ana", "#releases"), and
#: quoted text (a message's or a title's own words).
_NOT_NAMES = re.compile(r"\"[^\"]*\"|“[^”]*”|`[^`]*`"
                        r"|[^\s\"]*[A-Za-z0-9][./\\][A-Za-z0-9][^\s\"]*|[@#][^\s\"]+")


def _names() -> frozenset[tuple[str, ...]]:
    return frozenset(tuple(_WORD.findall(name.lower()))
                     for products in CATEGORIES.values() for name in products.split(","))


def _self_hosted() -> frozenset[tuple[str, ...]]:
    return frozenset(tuple(_WORD.findall(name.lower()))
                     for names in SELF_HOSTED.values() for name in names.split(","))


#: The self-hosted software's names (``SELF_HOSTED``).
SELF = _self_hosted() - {()}
#: Every product's name as a tuple of words, the self-hosted software's among them.
NAMES = (_names() - {()}) | SELF


def _number(word: str) -> str | None:
    """``word`` in the other number ("sheets" -> "sheet", "doc" -> "docs"), or None
    when that is not a plain "s" away."""
    if not word.isalpha() or len(word) < 3:
        return None
    if word.endswith("s"):
        return word[:-1] if len(word) >= 4 and not word.endswith(("ss", "us", "is")) else None
    return f"{word}s"


def _spellings() -> dict[tuple[str, ...], tuple[str, ...]]:
    """Each way a query may say a name -> the name: the name itself, and a name of
    several words with its last word in the other number ("a Google Sheet" is Google
    Sheets; a one-word name is not inflected: "stripes" is no product)."""
    out = {name: name for name in NAMES}
    for name in NAMES:
        other = _number(name[-1]) if len(name) > 1 else None
        if other is not None:
            out.setdefault((*name[:-1], other), name)
    return out


_SPELLINGS = _spellings()
#: The first word of every spelling (a text's words are looked up from them only).
_FIRST = frozenset(spelling[0] for spelling in _SPELLINGS)


def _grams(words: Sequence[str]) -> Iterator[tuple[int, tuple[str, ...]]]:
    """Each (position, name of the list) in ``words``, the longest first at a
    position, however spelt (``_SPELLINGS``)."""
    for at, word in enumerate(words):
        if word in _FIRST:
            for size in range(_LONGEST, 0, -1):
                gram = tuple(words[at:at + size])
                if len(gram) == size and gram in _SPELLINGS:
                    yield at, _SPELLINGS[gram]
                    break


def said_in(text: str) -> frozenset[tuple[str, ...]]:
    """The names of the list that occur in ``text`` (a tool's text: what it serves),
    as whole words, case ignored (a ``CAPITALISED`` name in any case: a tool that
    says the word may serve it)."""
    words = _WORD.findall(text.lower())
    return frozenset((*(gram for _, gram in _grams(words)),
                      *((word,) for word in CAPITALISED.intersection(words))))


def mentioned(query: str) -> list[tuple[str, ...]]:
    """The names of the list ``query`` says, in order, each read once (the longest at
    a position: "aws s3", not "aws" and "s3"), outside file names, paths,
    addresses, handles and quotes."""
    words = _WORD.findall(_NOT_NAMES.sub(" ", query[:1000]).lower())
    out: list[tuple[str, ...]] = []
    end = 0
    for at, gram in _grams(words):
        if at >= end:
            out.append(gram)
            end = at + len(gram)
    out += _capitalised(_NOT_NAMES.sub(" ", query[:1000]))
    if SELF_HOSTED_PRODUCTS and not (_RUNS | _TOPIC).intersection(words):
        return out
    return [name for name in out if name not in SELF]


#: Products whose names are common words (left out of ``CATEGORIES``), read only
#: when capitalised inside a sentence of lowercase words ("create a Linear issue"),
#: written from general knowledge.
CAPITALISED = frozenset(_WORD.findall("""linear zoom box square height shortcut front
    lever greenhouse signal teams"""))
#: Whether ``CAPITALISED`` is read (bench/abstain_cv.py's ablation).
CAPITALISED_PRODUCTS = True
_TOKEN = re.compile(r"\S+")


def _capitalised(text: str) -> list[tuple[str, ...]]:
    """The ``CAPITALISED`` names written with a capital after a word in lowercase
    (not a sentence's first word, nor a title's words)."""
    if not CAPITALISED_PRODUCTS:
        return []
    tokens = _TOKEN.findall(text)
    out: list[tuple[str, ...]] = []
    for before, token in itertools.pairwise(tokens):
        word = token.strip(",.;:!?()'\"")
        if (word.lower() in CAPITALISED and word[:1].isupper() and word[1:].islower()
                and before.islower() and not before.endswith((".", "!", "?", ":"))):
            out.append((word.lower(),))
    return out
