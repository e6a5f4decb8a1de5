"""Regenerate the chart's CRD templates from the models.

    python helm/sync_crds.py           # write helm/skillop/templates/crds/*.yaml
    python helm/sync_crds.py --check   # exit 1 if they differ from the models

Each template is the CRD exactly as ``python -m skillop.model.crd`` renders it,
wrapped in ``{{- if .Values.crds.enabled }}`` and with a
``helm.sh/resource-policy: keep`` annotation behind ``.Values.crds.keep``.
CRDs live under ``templates/`` rather than ``crds/`` so that they are upgraded
with the chart and can be switched off.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

CHART_CRDS = Path(__file__).resolve().parent / "skillop" / "templates" / "crds"
HEADER = ("{{- /* Generated from skillop.model by `python helm/sync_crds.py`; do not edit. */}}\n"
          "{{- if .Values.crds.enabled }}\n")
KEEP = ("  {{- if .Values.crds.keep }}\n"
        "  annotations:\n"
        "    helm.sh/resource-policy: keep\n"
        "  {{- end }}\n")
FOOTER = "{{- end }}\n"


def template(doc: dict[str, object]) -> str:
    """The chart template for one CRD document."""
    import yaml

    if "annotations" in doc["metadata"]:  # type: ignore[operator]
        raise ValueError("the models' CRDs carry no annotations; merging them is not supported")
    body = yaml.safe_dump(doc, sort_keys=False, width=100)
    # Go templates would read "{{" in a description as an action: print it literally.
    body = body.replace("{{", "{{ `{{` }}")
    lines = body.splitlines(keepends=True)
    # Insert the annotations at the end of the top-level metadata block.
    start = lines.index("metadata:\n")
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith(" "))
    return HEADER + "".join(lines[:end]) + KEEP + "".join(lines[end:]) + FOOTER


def expected() -> dict[str, str]:
    from skillop.model.crd import all_crds

    return {name: template(doc) for name, doc in all_crds().items()}


def drift(directory: Path = CHART_CRDS) -> list[str]:
    """File names under ``directory`` that are missing, stale or unexpected."""
    want = expected()
    have = {p.name: p.read_text("utf-8") for p in directory.glob("*.yaml")}
    return sorted(name for name in want.keys() | have.keys() if want.get(name) != have.get(name))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python helm/sync_crds.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true",
                        help="report drift and exit 1 instead of writing")
    args = parser.parse_args(argv)
    if args.check:
        stale = drift()
        for name in stale:
            print(f"{CHART_CRDS / name}: out of date; run python helm/sync_crds.py",
                  file=sys.stderr)
        return 1 if stale else 0
    CHART_CRDS.mkdir(parents=True, exist_ok=True)
    want = expected()
    for path in CHART_CRDS.glob("*.yaml"):
        if path.name not in want:
            path.unlink()
    for name, text in want.items():
        (CHART_CRDS / name).write_text(text, "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
