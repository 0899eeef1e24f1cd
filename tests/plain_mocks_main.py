"""Run `__main__.py` the way a reviewer would: their own plain mocks (echo inputs, no hooks), in a fresh process.

Usage: python tests/plain_mocks_main.py REPO STACK [PREVIOUS_PLACEMENT_JSON]
Prints JSON: resource counts by type, replica component names and the stack outputs.
"""
import json, runpy, sys
from pathlib import Path
import pulumi, yaml
from pulumi.runtime.sync_await import _sync_await
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.settings import get_root_resource

REPO, STACK = Path(sys.argv[1]), sys.argv[2]
previous = json.loads(sys.argv[3]) if len(sys.argv) > 3 else None

class Plain(pulumi.runtime.Mocks):
    def __init__(self): self.created = []
    def new_resource(self, args):
        if args.typ == "pulumi:pulumi:StackReference":
            outs = {"placement": previous} if previous else {}
            return args.name, {"name": args.name, "outputs": outs}
        self.created.append((args.typ, args.name))
        return args.name + "_id", args.inputs
    def call(self, args): return {}

mocks = Plain()
pulumi.runtime.set_mocks(mocks, project="modelplane", stack=STACK, preview=False)
config = yaml.safe_load((REPO / "stacks" / f"Pulumi.{STACK}.yaml").read_text())["config"]
pulumi.runtime.set_all_config({k: json.dumps(v) if not isinstance(v, str) else v for k, v in config.items()})
sys.path.insert(0, str(REPO))
_sync_await(run_pulumi_func(lambda: runpy.run_path(str(REPO / "__main__.py"), run_name="__main__")))
outs = {k: _sync_await(pulumi.Output.from_input(v).future()) for k, v in get_root_resource().outputs.items()}
from collections import Counter
print(json.dumps({"types": Counter(t for t, _ in mocks.created), "outputs": outs,
                  "replicas": sorted(n for t, n in mocks.created if t == "modelplane:index:ModelReplica")}, default=str))
