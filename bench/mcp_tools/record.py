"""Record the tools/list of published MCP servers into bench/mcp_tools/ (test data).

Each server is started over stdio from its installed package and asked, with the
official MCP Python SDK, for its tool list; nothing is called. The package's name,
version and licence (its own LICENSE file) are written beside the tools, so the
data ships with what permits shipping it. Run again to refresh:

    npm install --prefix DIR <packages>            # and pip install the PyPI ones
    python bench/mcp_tools/record.py DIR [LICENCES]

Servers that need an account get a dummy credential: listing their tools does
not use it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp.client.stdio import stdio_client

from mcp import ClientSession, StdioServerParameters

HERE = Path(__file__).resolve().parent
DUMMY = "dummy-credential-for-listing-only"

#: (package, how to start it, environment). ``bin:NAME`` is ``DIR/node_modules/.bin/NAME``.
SERVERS: list[tuple[str, list[str], dict[str, str]]] = [
    ("@modelcontextprotocol/server-filesystem", ["bin:mcp-server-filesystem", "/tmp"], {}),
    ("@modelcontextprotocol/server-memory", ["bin:mcp-server-memory"], {}),
    ("@modelcontextprotocol/server-everything", ["bin:mcp-server-everything"], {}),
    ("@modelcontextprotocol/server-github", ["bin:mcp-server-github"],
     {"GITHUB_PERSONAL_ACCESS_TOKEN": DUMMY}),
    ("@modelcontextprotocol/server-gitlab", ["bin:mcp-server-gitlab"],
     {"GITLAB_PERSONAL_ACCESS_TOKEN": DUMMY}),
    ("@modelcontextprotocol/server-slack", ["bin:mcp-server-slack"],
     {"SLACK_BOT_TOKEN": DUMMY, "SLACK_TEAM_ID": "T0"}),
    ("@modelcontextprotocol/server-google-maps", ["bin:mcp-server-google-maps"],
     {"GOOGLE_MAPS_API_KEY": DUMMY}),
    ("@modelcontextprotocol/server-puppeteer", ["bin:mcp-server-puppeteer"], {}),
    ("@modelcontextprotocol/server-redis", ["bin:mcp-server-redis", "redis://127.0.0.1:1"], {}),
    ("@modelcontextprotocol/server-brave-search", ["bin:mcp-server-brave-search"],
     {"BRAVE_API_KEY": DUMMY}),
    ("@modelcontextprotocol/server-sequential-thinking",
     ["bin:mcp-server-sequential-thinking"], {}),
    ("@modelcontextprotocol/server-postgres",
     ["bin:mcp-server-postgres", "postgresql://127.0.0.1:1/x"], {}),
    ("@notionhq/notion-mcp-server", ["bin:notion-mcp-server"], {"NOTION_TOKEN": DUMMY}),
    ("@playwright/mcp", ["bin:playwright-mcp"], {}),
    ("@supabase/mcp-server-supabase", ["bin:mcp-server-supabase", "--access-token", DUMMY], {}),
    ("mcp-server-kubernetes", ["bin:mcp-server-kubernetes"], {}),
    ("@azure-devops/mcp", ["bin:mcp-server-azuredevops", "example-org"], {}),
    ("chrome-devtools-mcp", ["bin:chrome-devtools-mcp"], {}),
    ("@wonderwhy-er/desktop-commander", ["bin:desktop-commander"], {}),
    ("@zereight/mcp-gitlab", ["bin:zereight-mcp-gitlab"],
     {"GITLAB_PERSONAL_ACCESS_TOKEN": DUMMY, "USE_PIPELINE": "true", "USE_MILESTONE": "true",
      "USE_GITLAB_WIKI": "true"}),
    ("mongodb-mcp-server", ["bin:mongodb-mcp-server"], {}),
    ("@circleci/mcp-server-circleci", ["bin:mcp-server-circleci"], {"CIRCLECI_TOKEN": DUMMY}),
    ("@heroku/mcp-server", ["bin:heroku-mcp-server"], {"HEROKU_API_KEY": DUMMY}),
    ("airtable-mcp-server", ["bin:airtable-mcp-server"], {"AIRTABLE_API_KEY": DUMMY}),
    ("@hubspot/mcp-server", ["bin:mcp-hubspot"], {"PRIVATE_APP_ACCESS_TOKEN": DUMMY}),
    ("@cyanheads/git-mcp-server", ["bin:git-mcp-server"], {}),
    ("@executeautomation/playwright-mcp-server", ["bin:playwright-mcp-server"], {}),
    ("@stripe/mcp", ["bin:mcp", "--tools=all", f"--api-key=sk_test_{DUMMY}"], {}),
    ("@neondatabase/mcp-server-neon", ["bin:mcp-server-neon", "start", DUMMY], {}),
    ("firecrawl-mcp", ["bin:firecrawl-mcp"], {"FIRECRAWL_API_KEY": DUMMY}),
    ("tavily-mcp", ["bin:tavily-mcp"], {"TAVILY_API_KEY": DUMMY}),
    ("exa-mcp-server", ["bin:exa-mcp-server"], {"EXA_API_KEY": DUMMY}),
]
#: PyPI servers: (distribution, module to run).
PYPI: list[tuple[str, list[str], dict[str, str]]] = [
    ("mcp-server-git", ["py:mcp_server_git"], {}),
    ("mcp-server-fetch", ["py:mcp_server_fetch"], {}),
    ("mcp-server-time", ["py:mcp_server_time", "--local-timezone", "UTC"], {}),
]


async def _list(command: list[str], env: dict[str, str]) -> list[dict[str, Any]]:
    params = StdioServerParameters(command=command[0], args=command[1:],
                                   env={**os.environ, **env}, cwd="/tmp")
    tools: list[dict[str, Any]] = []
    with anyio.fail_after(60):
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            cursor = None
            while True:
                page = await s.list_tools(cursor=cursor) if cursor else await s.list_tools()
                tools += [t.model_dump(by_alias=True, exclude_none=True, mode="json")
                          for t in page.tools]
                cursor = page.next_cursor
                if not cursor:
                    return tools


def _licence(folder: Path) -> str | None:
    for name in ("LICENSE", "LICENSE.md", "LICENSE.txt", "LICENCE", "license", "LICENSE-MIT"):
        if (folder / name).is_file():
            return (folder / name).read_text(encoding="utf-8")
    return None


def _npm_meta(prefix: Path, package: str) -> tuple[str, str, str | None]:
    folder = prefix / "node_modules" / package
    meta = json.loads((folder / "package.json").read_text())
    return meta["version"], str(meta.get("license", "")), _licence(folder)


def _pypi_meta(distribution: str) -> tuple[str, str, str | None]:
    from importlib.metadata import distribution as dist

    found = dist(distribution)
    text = None
    for file in found.files or []:
        if file.name.upper().startswith("LICEN"):
            text = Path(str(found.locate_file(file))).read_text(encoding="utf-8")
    spdx = found.metadata.get("License-Expression") or found.metadata.get("License") or ""
    return found.version, spdx, text


#: Packages that do not ship their licence: the file of the repository that publishes
#: them, as of the commit named (the licence in force when the version was published).
#: ``python bench/mcp_tools/record.py DIR LICENCES`` reads ``LICENCES/<slug>.txt``.
_REFERENCE = "github.com/modelcontextprotocol/servers LICENSE at"
_MIT_ERA = f"{_REFERENCE} 37415258b914330d10ed0ea948d67ac8a410a384 (MIT)"
_APACHE_ERA = (f"{_REFERENCE} 6b36e3c22311faed9bd570547d0d90718846fc20 (Apache-2.0, MIT for"
               " contributions not relicensed)")
LICENCE_SOURCES = {
    **{f"@modelcontextprotocol/server-{name}": _MIT_ERA for name in (
        "github", "gitlab", "slack", "google-maps", "puppeteer", "redis", "brave-search",
        "postgres")},
    **{f"@modelcontextprotocol/server-{name}": _APACHE_ERA for name in (
        "filesystem", "memory", "everything", "sequential-thinking")},
}


def _slug(package: str) -> str:
    return package.lstrip("@").replace("/", "__")


def main(prefix: Path, licences: Path | None) -> int:
    out = HERE / "servers"
    out.mkdir(exist_ok=True)
    for package, command, env in [*SERVERS, *PYPI]:
        if command[0].startswith("bin:"):
            argv = [str(prefix / "node_modules" / ".bin" / command[0][4:]), *command[1:]]
            version, spdx, text = _npm_meta(prefix, package)
        else:
            argv = [sys.executable, "-m", command[0][3:], *command[1:]]
            version, spdx, text = _pypi_meta(package)
        source = "the package's own licence file"
        if text is None and licences is not None and package in LICENCE_SOURCES:
            text = (licences / f"{_slug(package)}.txt").read_text(encoding="utf-8")
            source = LICENCE_SOURCES[package]
        if text is None:
            print(f"skip {package}: ships no licence file", file=sys.stderr)
            continue
        try:
            tools = anyio.run(_list, argv, env)
        except BaseException as exc:
            print(f"skip {package}: {type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        (out / f"{_slug(package)}.json").write_text(json.dumps({
            "package": package, "registry": "npm" if command[0].startswith("bin:") else "pypi",
            "version": version, "license": spdx, "licenseSource": source, "licenseText": text,
            "tools": tools,
        }, indent=1, ensure_ascii=False, sort_keys=True) + "\n")
        print(f"{package} {version} ({spdx}): {len(tools)} tools", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None))
