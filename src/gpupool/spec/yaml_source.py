"""Reading a job spec file: the raw mapping plus the line of every key, for error messages.

The file is composed into YAML nodes and walked by hand instead of `yaml.safe_load`, for
two reasons. Nodes carry line numbers. And every scalar comes back as the text the user
typed, so a file value means what the same text means as a CLI flag: YAML 1.1 would
otherwise read `time: 1:30:00` as the base-60 integer 5400 (then taken as minutes),
`env: {X: 010}` as 8, `{DEBUG: yes}` as True and `gpu_type: 4090` as an int.
"""

from __future__ import annotations

import os

from gpupool.spec.errors import FieldError, SpecError

# Not typing.TYPE_CHECKING: importing typing costs every CLI command ~2 ms (gpupool/__init__.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_NULL_TAG = "tag:yaml.org,2002:null"
# Aliases can make a tiny file expand exponentially ("billion laughs") or refer to
# themselves; a job spec is a few dozen nodes, so bound the walk.
_MAX_NODES = 100_000
_MAX_DEPTH = 32


def load_spec_file(path: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, int]]:
    """The raw mapping in a spec file and each key's 1-based line ("env.NAME" for env entries).

    Raises SpecError (source = the path) when the file cannot be read, is not YAML, has a
    top level that is not a mapping, or repeats a key. Values are not checked here.
    """
    name = os.fspath(path)
    try:
        with open(name, "rb") as file:  # not pathlib: `gpupool submit` imports this module
            raw = file.read()
    except OSError as e:
        raise SpecError([FieldError("", f"cannot read {name}: {e.strerror or e}")], name) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        msg = f"cannot read {name}: not UTF-8 text (bad byte at offset {e.start})"
        raise SpecError([FieldError("", msg)], name) from None
    return load_spec_text(text, source=name)


def load_spec_text(text: str, source: str | None = None) -> tuple[dict[str, Any], dict[str, int]]:
    """As load_spec_file, for text already read (stdin, a test)."""
    import yaml  # lazily: `import gpupool.spec` must stay cheap for the CLI

    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None or node.tag == _NULL_TAG:
            # Empty, only comments, or a bare "---": no settings. Not an error, since flags
            # may give everything; build_spec reports a missing command.
            return {}, {}
        if not isinstance(node, yaml.MappingNode):
            kind = "a list" if isinstance(node, yaml.SequenceNode) else "a single value"
            msg = f"the top level must be a mapping of keys to values (command: ...), got {kind}"
            raise SpecError([FieldError("", msg, node.start_mark.line + 1)], source)
        return _Walker(loader, source).top(node)
    except yaml.MarkedYAMLError as e:
        raise SpecError([_yaml_error(e)], source) from None
    except yaml.YAMLError as e:  # reader errors (e.g. control characters) carry no mark
        raise SpecError([FieldError("", f"invalid YAML: {e}")], source) from None
    finally:
        loader.dispose()


def _yaml_error(e: Any) -> FieldError:
    mark = e.problem_mark or e.context_mark
    text = f"invalid YAML: {e.problem or e.context or 'syntax error'}"
    if mark is not None:
        text += f" (column {mark.column + 1})"
    # For an unclosed bracket or quote the problem is found far below where it started.
    cm, pm = e.context_mark, e.problem_mark
    if e.problem and e.context and cm and pm and cm.line != pm.line:
        text += f", {e.context} started on line {cm.line + 1}"
    return FieldError("", text, mark.line + 1 if mark is not None else None)


class _Walker:
    def __init__(self, loader: Any, source: str | None) -> None:
        import yaml

        self._yaml = yaml
        self._loader = loader
        self._source = source
        self._budget = _MAX_NODES

    def top(self, node: Any) -> tuple[dict[str, Any], dict[str, int]]:
        data: dict[str, Any] = {}
        lines: dict[str, int] = {}
        errors: list[FieldError] = []
        for key_node, value_node in self._pairs(node):
            key = self._key(key_node)
            if self._repeated(key, key_node, lines, errors):
                continue
            data[key] = self._plain(value_node, 1)
            if key == "env" and isinstance(value_node, self._yaml.MappingNode):
                for env_key_node, _ in self._pairs(value_node):
                    field = f"env.{self._key(env_key_node)}"
                    self._repeated(field, env_key_node, lines, errors)
        if errors:
            raise SpecError(errors, self._source)
        return data, lines

    @staticmethod
    def _repeated(
        field: str, key_node: Any, lines: dict[str, int], errors: list[FieldError]
    ) -> bool:
        # safe_load silently keeps the last of two `gpus:` lines; a spec that says two
        # different things is refused instead.
        line = key_node.start_mark.line + 1
        if field in lines:
            errors.append(FieldError(field, f"given twice (first on line {lines[field]})", line))
            return True
        lines[field] = line
        return False

    def _pairs(self, node: Any) -> list[tuple[Any, Any]]:
        self._loader.flatten_mapping(node)  # applies YAML merge keys (<<: *defaults)
        return list(node.value)

    def _key(self, node: Any) -> str:
        if isinstance(node, self._yaml.ScalarNode):
            return str(node.value)
        line = node.start_mark.line + 1
        raise SpecError(
            [FieldError("", "keys must be plain names, not lists or mappings", line)], self._source
        )

    def _plain(self, node: Any, depth: int) -> Any:
        """Strings (as typed), None, lists and dicts: no YAML type guessing."""
        self._budget -= 1
        if self._budget < 0 or depth > _MAX_DEPTH:
            msg = "too large or too deeply nested (check for recursive aliases)"
            raise SpecError([FieldError("", msg, node.start_mark.line + 1)], self._source)
        if isinstance(node, self._yaml.ScalarNode):
            return None if node.tag == _NULL_TAG else node.value
        if isinstance(node, self._yaml.SequenceNode):
            return [self._plain(item, depth + 1) for item in node.value]
        return {self._key(k): self._plain(v, depth + 1) for k, v in self._pairs(node)}
