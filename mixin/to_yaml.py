"""Writes the mixin's rule groups (JSON on stdin) as the YAML Prometheus loads, the way a
person would write it: rules with their name first, long text folded, expressions of
several lines as blocks. Used by mixin/render.sh."""
import json
import sys

import yaml

ORDER = ["name", "record", "alert", "expr", "for", "labels", "annotations", "summary", "description", "runbook_url"]


class Dumper(yaml.SafeDumper):
    # Sequences indented under their key, as the hand-written rules were.
    def increase_indent(self, flow=False, indentless=False):
        return super().increase_indent(flow, False)


def text(dumper, s):
    if "\n" in s:
        return dumper.represent_scalar("tag:yaml.org,2002:str", s, style="|")
    if len(s) > 80 and " " in s and not s.startswith(("{", "[", "*", "&", "!", "%", "@", "`", "'", '"')):
        return dumper.represent_scalar("tag:yaml.org,2002:str", s, style=">")
    return dumper.represent_scalar("tag:yaml.org,2002:str", s)


def ordered(dumper, d):
    keys = sorted(d, key=lambda k: (ORDER.index(k) if k in ORDER else len(ORDER), k))
    return dumper.represent_mapping("tag:yaml.org,2002:map", [(k, d[k]) for k in keys])


Dumper.add_representer(str, text)
Dumper.add_representer(dict, ordered)


sys.stdout.write(sys.argv[1] if len(sys.argv) > 1 else "")
yaml.dump(
    json.load(sys.stdin),
    sys.stdout,
    Dumper=Dumper,
    default_flow_style=False,
    sort_keys=False,
    width=88,
    allow_unicode=True,
)
