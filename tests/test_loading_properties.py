"""Property tests: whatever a user writes, validation answers with a Fleet or a ConfigError
whose every issue points into the config they wrote — never a crash or a traceback."""
from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings, strategies as st

from modelplane.api import ConfigError, load_fleet
from modelplane.api.stackfile import read_stack_file
from builders import REPO

BASES = [read_stack_file(REPO / "stacks" / f"Pulumi.{name}.yaml").config for name in ("demo", "cloud")]

scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 2**64), st.floats(allow_nan=True),
                    st.text(max_size=12), st.sampled_from(["", "80Gi", "NoExecute", "DRA", "Kind", "-1", "engine"]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                      max_leaves=6)


def paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for k, v in node.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from paths(v, prefix + (i,))


def replace(config, path, value):
    config = copy.deepcopy(config)
    node = config
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return config


def exists(config, path) -> bool:
    node = config
    for part in path:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return False
    return True


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_mutation_is_valid_or_reported_inside_the_config(data):
    base = data.draw(st.sampled_from(BASES))
    path = data.draw(st.sampled_from([p for p in paths(base) if p]))
    config = replace(base, path, data.draw(values))
    try:
        load_fleet(config)
    except ConfigError as error:
        assert error.issues
        for issue in error.issues:
            # The issue's path, or its parent (a missing or unknown field), is in what the user wrote.
            assert exists(config, issue.path) or exists(config, issue.path[:-1]), str(issue)
