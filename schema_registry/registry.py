"""The operations of Confluent's REST API over the store: what each endpoint does and
which of Confluent's errors it answers. Requests arrive decoded (rest.py); answers are
JSON-ready values."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from . import errors, protobuf
from .compatibility import DEFAULT_LEVEL, LEVELS, check
from .errors import RegistryError
from .schema_types import (
    AVRO,
    PROTOBUF,
    SCHEMA_TYPES,
    ParsedSchema,
    Reference,
    Resolver,
    SchemaText,
    parse,
    parse_references,
)
from .store import (
    RegistryState,
    SchemaStore,
    SchemaVersion,
    config_key,
    delete_subject_key,
    mode_key,
    schema_key,
    schema_value,
)

MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
MAX_VERSION = 2**31 - 1
# A schema id is the 4-byte big-endian integer of Confluent's wire format: 1..2^31-1.
MAX_ID = 2**31 - 1


def parse_version(text: str) -> int | None:
    """A version in a path: 1..2^31-1, or "latest" / -1 (None); else 42202."""
    if text == "latest" or text == "-1":
        return None
    if text.isdigit() and 1 <= int(text) <= MAX_VERSION:
        return int(text)
    raise errors.invalid_version(text)


# Parsed versions kept for compatibility checks: a version's text and references never
# change, so its parse does not either.
_PARSED_KEPT = 4096
# Stored schemas a reader on the loop may note for parsing at once (one console page's).
_WANTED_KEPT = 64
# The parses done off the event loop for the request being served (`prepare`): each
# request has its own (rest.py starts it), so no other request can push them out.
_PREPARED: ContextVar[dict[tuple[SchemaText, bool], _Prepared]] = ContextVar("ottla_registry_prepared")


def start_request() -> None:
    """Start a request's own set of parses (rest.py, before each request)."""
    _PREPARED.set({})


def _request_prepared() -> dict[tuple[SchemaText, bool], _Prepared]:
    found = _PREPARED.get(None)
    if found is None:
        found = {}
        _PREPARED.set(found)
    return found


class NotPrepared(Exception):
    """A handler met a schema not parsed off the event loop for this request: rest.py
    parses it in the registry's worker (`prepare_schema`) and runs the handler again."""

    def __init__(self, schema: SchemaText, normalize: bool) -> None:
        super().__init__(schema.schema_type)
        self.schema = schema
        self.normalize = normalize


@dataclass
class _Prepared:
    """A schema parsed off the event loop: the outcome, and what each reference resolved
    to then. The handler uses it only if every reference still resolves the same way."""
    resolved: dict[Reference, SchemaText | None]
    outcome: ParsedSchema | RegistryError


class SchemaRegistry:
    def __init__(self, store: SchemaStore) -> None:
        self.store = store
        self._parsed: dict[SchemaText, ParsedSchema] = {}
        self._unparsable: dict[SchemaText, RegistryError] = {}
        self._wanted: set[SchemaText] = set()  # see stored_parse
        # Parsing runs here, never on the event loop, and never in a pool another part of
        # the broker waits on (the log's fsyncs have their own: broker/durability.py).
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ottla-registry")

    @property
    def state(self) -> RegistryState:
        return self.store.state

    # --- reading ------------------------------------------------------------------------

    def _versions(self, subject: str, deleted: bool = False) -> list[SchemaVersion]:
        found = self.state.versions.get(subject, {})
        return [found[v] for v in sorted(found) if deleted or not found[v].deleted]

    def _live_versions_or_404(self, subject: str, deleted: bool = False) -> list[SchemaVersion]:
        versions = self._versions(subject, deleted)
        if not versions:
            raise errors.subject_not_found(subject)
        return versions

    def _version(self, subject: str, version_text: str, deleted: bool = False) -> SchemaVersion:
        version = parse_version(version_text)
        versions = self._live_versions_or_404(subject, deleted)
        if version is None:
            return versions[-1]
        for entry in versions:
            if entry.version == version:
                return entry
        raise errors.version_not_found(version)

    def subjects(self, deleted: bool = False, prefix: str = "") -> list[str]:
        return sorted(s for s in self.state.versions if s.startswith(prefix) and self._versions(s, deleted))

    def versions(self, subject: str, deleted: bool = False) -> list[int]:
        return [entry.version for entry in self._live_versions_or_404(subject, deleted)]

    def get_version(self, subject: str, version: str, deleted: bool = False, fmt: str | None = None) -> dict[str, Any]:
        entry = self._version(subject, version, deleted)
        return _describe(entry, self._formatted(entry.schema, fmt))

    def _formatted(self, schema: SchemaText, fmt: str | None) -> str:
        """The schema's text in the format a client asks for: `serialized` is a PROTOBUF
        schema as a base64 FileDescriptorProto (what confluent-kafka's deserializers ask
        for); every other type, and every other format, is the canonical text."""
        if fmt != "serialized" or schema.schema_type != PROTOBUF:
            return schema.text
        compiled = self._stored_parsed(schema).parsed
        assert isinstance(compiled, protobuf.ProtobufSchema)
        return protobuf.serialized(compiled)

    def get_version_schema(self, subject: str, version: str, deleted: bool = False) -> str:
        return self._version(subject, version, deleted).schema.text

    def referenced_by(self, subject: str, version: str) -> list[int]:
        entry = self._version(subject, version, deleted=True)
        return sorted({other.schema_id for versions in self.state.versions.values() for other in versions.values()
                       if not other.deleted and any(r.subject == entry.subject and r.version == entry.version
                                                    for r in other.schema.references)})

    def schema_by_id(self, schema_id: int, fmt: str | None = None) -> dict[str, Any]:
        schema = self.state.schema_by_id(schema_id)
        if schema is None:
            raise errors.schema_not_found(schema_id)
        answer: dict[str, Any] = {}
        if schema.schema_type != AVRO:
            answer["schemaType"] = schema.schema_type
        if schema.references:
            answer["references"] = [r.to_json() for r in schema.references]
        answer["schema"] = self._formatted(schema, fmt)
        return answer

    def schema_text_by_id(self, schema_id: int) -> str:
        schema = self.state.schema_by_id(schema_id)
        if schema is None:
            raise errors.schema_not_found(schema_id)
        return schema.text

    def id_versions(self, schema_id: int, deleted: bool = False) -> list[dict[str, Any]]:
        found = [{"subject": e.subject, "version": e.version}
                 for subject in sorted(self.state.versions) for e in self._versions(subject, True)
                 if e.schema_id == schema_id and (deleted or not e.deleted)]
        if not found and self.state.schema_by_id(schema_id) is None:
            raise errors.schema_not_found(schema_id)
        return found

    def id_subjects(self, schema_id: int, deleted: bool = False) -> list[str]:
        return sorted({item["subject"] for item in self.id_versions(schema_id, deleted)})

    @staticmethod
    def schema_types() -> list[str]:
        return list(SCHEMA_TYPES)

    # --- config and mode ----------------------------------------------------------------

    def _config(self, subject: str | None) -> dict[str, object]:
        found = self.state.configs.get(subject) if subject is not None else None
        return found or self.state.configs.get(None) or {"compatibilityLevel": DEFAULT_LEVEL}

    def level(self, subject: str) -> str:
        return str(self._config(subject).get("compatibilityLevel", DEFAULT_LEVEL))

    def normalizes(self, subject: str) -> bool:
        return bool(self._config(subject).get("normalize", False))

    def get_config(self, subject: str | None, default_to_global: bool = False) -> dict[str, object]:
        if subject is not None and subject not in self.state.configs:
            if not default_to_global:
                raise errors.subject_config_not_found(subject)
        config = dict(self._config(subject))
        config.setdefault("compatibilityLevel", DEFAULT_LEVEL)
        return config

    def put_config(self, subject: str | None, body: object) -> dict[str, object]:
        if not isinstance(body, dict):
            raise errors.unprocessable("the request body must be a JSON object")
        self._require_writable(subject)
        level = body.get("compatibility", body.get("compatibilityLevel"))
        if not isinstance(level, str) or level.upper() not in LEVELS:
            raise errors.invalid_compatibility_level(level)
        value: dict[str, object] = {"compatibilityLevel": level.upper()}
        answer: dict[str, object] = {"compatibility": level.upper()}
        if "normalize" in body:
            if not isinstance(body["normalize"], bool):
                raise errors.unprocessable("normalize must be true or false")
            value["normalize"] = answer["normalize"] = body["normalize"]
        self.store.write([(config_key(subject), value)])
        return answer

    def delete_config(self, subject: str | None) -> dict[str, object]:
        self._require_writable(subject)
        if subject is not None and subject not in self.state.configs:
            if subject not in self.state.versions:
                raise errors.subject_not_found(subject)
            raise errors.subject_config_not_found(subject)
        previous = self.get_config(subject, default_to_global=True)
        self.store.write([(config_key(subject), None)])
        return previous

    def mode(self, subject: str | None) -> str:
        if subject is not None and subject in self.state.modes:
            return self.state.modes[subject]
        return self.state.modes.get(None, "READWRITE")

    def get_mode(self, subject: str | None, default_to_global: bool = False) -> dict[str, str]:
        if subject is not None and subject not in self.state.modes and not default_to_global:
            raise errors.subject_mode_not_found(subject)
        return {"mode": self.mode(subject)}

    def put_mode(self, subject: str | None, body: object, force: bool = False) -> dict[str, str]:
        if not isinstance(body, dict):
            raise errors.unprocessable("the request body must be a JSON object")
        mode = body.get("mode")
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise errors.invalid_mode(mode)
        mode = mode.upper()
        if mode == "IMPORT" and not force:
            has_schemas = self._versions(subject, True) if subject is not None else self.state.versions
            if has_schemas:
                raise errors.operation_not_permitted("Cannot import since found existing subjects")
        self.store.write([(mode_key(subject), {"mode": mode})])
        return {"mode": mode}

    def delete_mode(self, subject: str) -> dict[str, str]:
        if subject not in self.state.modes:
            raise errors.subject_mode_not_found(subject)
        previous = {"mode": self.state.modes[subject]}
        self.store.write([(mode_key(subject), None)])
        return previous

    def _require_writable(self, subject: str | None) -> None:
        if self.mode(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise errors.operation_not_permitted(f"Subject {subject} is in read-only mode" if subject is not None
                                                 else "The registry is in read-only mode")

    # --- schemas ------------------------------------------------------------------------

    def _resolve(self, reference: Reference) -> SchemaText | None:
        entry = self.state.versions.get(reference.subject, {}).get(reference.version)
        return entry.schema if entry is not None else None

    @staticmethod
    def _requested_schema(body: object) -> SchemaText:
        """The schema a register, lookup or compatibility request sends; 42201 or 422 if
        the body holds none."""
        if not isinstance(body, dict):
            raise errors.unprocessable("the request body must be a JSON object")
        text = body.get("schema")
        if not isinstance(text, str):
            raise errors.invalid_schema("null: the request has no schema (a string)")
        schema_type = body.get("schemaType") or AVRO
        if not isinstance(schema_type, str):
            raise errors.invalid_schema(f"of unknown schema type {schema_type!r}")
        return SchemaText(schema_type.upper(), text, parse_references(body.get("references")))

    def _parse_request(self, subject: str, body: object, normalize: bool) -> tuple[ParsedSchema, dict[str, Any]]:
        schema = self._requested_schema(body)
        assert isinstance(body, dict)
        return self._parse(schema, normalize or self.normalizes(subject)), body

    async def prepare(self, subject: str | None, body: object, normalize: bool) -> None:
        """Parse, in the registry's worker thread, what the request's handler is about to
        parse: the schema it sends and the subject's versions not parsed yet (a
        compatibility check compares with them). A schema of megabytes, or protoc's round
        trip to its own process, then holds no other client's request on the event loop;
        the handler, which stays on the loop, takes the outcome (`_parse`). A body that
        holds no schema is left to the handler to refuse."""
        wanted: list[tuple[SchemaText, bool]] = []
        try:
            wanted.append((self._requested_schema(body), normalize or (subject is not None
                                                                       and self.normalizes(subject))))
        except RegistryError:
            pass
        if subject is not None:
            wanted += [(entry.schema, False) for entry in self._versions(subject) if entry.schema not in self._parsed]
        for schema, normalized in wanted:
            await self.prepare_schema(schema, normalized)

    async def prepare_schema(self, schema: SchemaText, normalize: bool) -> None:
        """Parse `schema` in the registry's worker thread, for the request being served."""
        resolved: dict[Reference, SchemaText | None] = {}
        outcome: ParsedSchema | RegistryError
        try:
            outcome = await asyncio.get_running_loop().run_in_executor(
                self._worker, parse, schema, self._recording_resolver(resolved), normalize)
        except RegistryError as exc:
            outcome = exc
        _request_prepared()[(schema, normalize)] = _Prepared(resolved, outcome)

    def stored_parse(self, schema: SchemaText) -> ParsedSchema | RegistryError | None:
        """A stored schema's parse for a reader that stays on the event loop (the console's
        decoder): what is kept of it, or None, the schema then noted for `parse_wanted`."""
        found = self._parsed.get(schema) or self._unparsable.get(schema)
        if found is None or (isinstance(found, ParsedSchema) and not _readable(found)):
            if len(self._wanted) < _WANTED_KEPT:
                self._wanted.add(schema)
            return None
        return found

    async def parse_wanted(self) -> bool:
        """Parse, in the registry's worker, the stored schemas readers noted (and keep
        the outcomes); whether there were any."""
        wanted, self._wanted = self._wanted, set()
        loop = asyncio.get_running_loop()
        for schema in wanted:
            kept = self._parsed.get(schema)
            try:
                if kept is not None:  # parsed for a compatibility check: the descriptors are what is missing
                    await loop.run_in_executor(self._worker, _make_readable, kept)
                    continue
                parsed = await loop.run_in_executor(self._worker, _parse_to_read, schema, self._resolve)
            except Exception as exc:  # a stored schema that no longer parses (a reference deleted for good)
                if len(self._unparsable) >= _PARSED_KEPT:
                    self._unparsable.clear()
                self._unparsable[schema] = exc if isinstance(exc, RegistryError) else errors.invalid_schema(
                    f"{type(exc).__name__}: {exc}")
            else:
                self._keep(schema, parsed)
        return bool(wanted)

    def close(self) -> None:
        """At shutdown: a parse still queued is dropped, one running ends on its own (the
        walk and the parse are bounded: schema_types.MAX_REFERENCED_*)."""
        self._worker.shutdown(wait=False, cancel_futures=True)

    def _recording_resolver(self, resolved: dict[Reference, SchemaText | None]) -> Resolver:
        """`_resolve`, noting in `resolved` what each reference resolved to."""
        def resolve(reference: Reference) -> SchemaText | None:
            resolved[reference] = found = self._resolve(reference)
            return found
        return resolve

    def _parse(self, schema: SchemaText, normalize: bool = False) -> ParsedSchema:
        """The outcome of parse() from `prepare`, if every reference it resolved then still
        resolves the same way; else NotPrepared: nothing is parsed on the event loop."""
        prepared = _request_prepared().get((schema, normalize))
        if prepared is None or not all(self._resolve(r) == found for r, found in prepared.resolved.items()):
            raise NotPrepared(schema, normalize)
        if isinstance(prepared.outcome, RegistryError):
            raise prepared.outcome
        return prepared.outcome

    def _stored_parsed(self, schema: SchemaText) -> ParsedSchema:
        """A stored version's parse, kept (its text and references never change)."""
        parsed = self._parsed.get(schema)
        if parsed is None:
            parsed = self._parse(schema)
            self._keep(schema, parsed)
        return parsed

    def _keep(self, schema: SchemaText, parsed: ParsedSchema) -> None:
        if len(self._parsed) >= _PARSED_KEPT:
            self._parsed.clear()
        self._parsed[schema] = parsed

    def _previous(self, subject: str) -> list[tuple[int, str, str, Any]]:
        found = []
        for entry in self._versions(subject):
            try:
                parsed = self._stored_parsed(entry.schema)
            except RegistryError:
                continue  # a version that no longer parses (a reference deleted for good) cannot be compared
            found.append((entry.version, entry.schema.text, entry.schema.schema_type, parsed.parsed))
        return found

    def register(self, subject: str, body: object, normalize: bool = False) -> dict[str, Any]:
        self._require_writable(subject)
        parsed, request = self._parse_request(subject, body, normalize)
        schema = parsed.canonical
        importing = self.mode(subject) == "IMPORT"
        given_id, given_version = request.get("id"), request.get("version")
        if not importing and given_id not in (None, -1):
            raise errors.operation_not_permitted(f"Subject {subject} is not in import mode")
        if given_id not in (None, -1) and not (type(given_id) is int and 1 <= given_id <= MAX_ID):
            raise errors.unprocessable(f"Schema id {given_id!r} is not a valid id: ids are between 1 and 2^31-1")
        for entry in self._versions(subject):
            if entry.schema == schema and given_id in (None, -1, entry.schema_id):
                return {"id": entry.schema_id}
        if not importing:
            messages = check(self.level(subject), parsed.canonical.schema_type, parsed.parsed,
                             self._previous(subject))
            if messages:
                raise errors.incompatible(subject, messages)
        existing_id = self.state.id_of(schema)
        if importing and type(given_id) is int and given_id != -1:
            holder = self.state.schema_by_id(given_id)
            if holder is not None and holder != schema:
                raise errors.id_conflict(given_id)
            schema_id = given_id
        else:
            schema_id = existing_id if existing_id is not None else self.state.max_id + 1
            if schema_id > MAX_ID:
                raise errors.store_error("every schema id up to 2^31-1 is taken")
        all_versions = self.state.versions.get(subject, {})
        if importing and type(given_version) is int and 1 <= given_version <= MAX_VERSION:
            version = given_version
            if version in all_versions and all_versions[version].schema != schema:
                raise errors.operation_not_permitted(f"Version {version} of subject {subject} already exists")
        else:
            version = max(all_versions, default=0) + 1
        entry = SchemaVersion(subject, version, schema_id, schema)
        self.store.write([(schema_key(subject, version), schema_value(entry))])
        return {"id": schema_id}

    def lookup(self, subject: str, body: object, normalize: bool = False, deleted: bool = False,
               fmt: str | None = None) -> dict[str, Any]:
        versions = self._live_versions_or_404(subject, deleted)
        parsed, _ = self._parse_request(subject, body, normalize)
        for entry in reversed(versions):
            if entry.schema == parsed.canonical:
                return _describe(entry, self._formatted(entry.schema, fmt))
        raise errors.schema_not_found()

    def check_compatibility(self, subject: str, version_text: str | None, body: object,
                            verbose: bool = False, normalize: bool = False) -> dict[str, Any]:
        parsed, _ = self._parse_request(subject, body, normalize)
        level = self.level(subject)
        previous = self._previous(subject)
        if version_text is not None:
            target = self._version(subject, version_text)
            previous = [p for p in previous if p[0] == target.version]
            level = level.removesuffix("_TRANSITIVE")
        messages = check(level, parsed.canonical.schema_type, parsed.parsed, previous)
        answer: dict[str, Any] = {"is_compatible": not messages}
        if verbose:
            answer["messages"] = messages
        return answer

    # --- deletes ------------------------------------------------------------------------

    def delete_version(self, subject: str, version_text: str, permanent: bool = False) -> int:
        self._require_writable(subject)
        version = parse_version(version_text)
        all_versions = self._versions(subject, deleted=True)
        if not all_versions:
            raise errors.subject_not_found(subject)
        if version is None:
            live = [e for e in all_versions if not e.deleted]
            if not live:
                raise errors.subject_not_found(subject)
            entry = live[-1]
        else:
            matches = [e for e in all_versions if e.version == version]
            if not matches:
                raise errors.version_not_found(version)
            entry = matches[0]
        if permanent and not entry.deleted:
            raise errors.version_not_soft_deleted(subject, entry.version)
        if not permanent and entry.deleted:
            raise errors.version_soft_deleted(subject, entry.version)
        if self.referenced_by(subject, str(entry.version)):
            raise errors.references_exist(subject, entry.version)
        if permanent:
            self.store.write([(schema_key(subject, entry.version), None)])
        else:
            deleted = SchemaVersion(entry.subject, entry.version, entry.schema_id, entry.schema, deleted=True)
            self.store.write([(schema_key(subject, entry.version), schema_value(deleted))])
        return entry.version

    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        self._require_writable(subject)
        all_versions = self._versions(subject, deleted=True)
        if not all_versions:
            raise errors.subject_not_found(subject)
        live = [e for e in all_versions if not e.deleted]
        if permanent and live:
            raise errors.subject_not_soft_deleted(subject)
        if not permanent and not live:
            raise errors.subject_soft_deleted(subject)
        for entry in live if not permanent else all_versions:
            if self.referenced_by(subject, str(entry.version)):
                raise errors.references_exist(subject, entry.version)
        if permanent:
            records: list[tuple[dict[str, object], dict[str, object] | None]] = [
                (schema_key(subject, e.version), None) for e in all_versions]
            records.append((delete_subject_key(subject), None))
            if subject in self.state.configs:
                records.append((config_key(subject), None))
            if subject in self.state.modes:
                records.append((mode_key(subject), None))
            self.store.write(records)
            return [e.version for e in all_versions]
        soft = [(schema_key(subject, e.version),
                 schema_value(SchemaVersion(e.subject, e.version, e.schema_id, e.schema, deleted=True)))
                for e in live]
        self.store.write([*soft, (delete_subject_key(subject), {"subject": subject, "version": live[-1].version})])
        return [e.version for e in live]


def _parse_to_read(schema: SchemaText, resolve: Resolver) -> ParsedSchema:
    """parse(), and for PROTOBUF the runtime's descriptors a reader decodes with."""
    return _make_readable(parse(schema, resolve))


def _make_readable(parsed: ParsedSchema) -> ParsedSchema:
    if isinstance(parsed.parsed, protobuf.ProtobufSchema):
        parsed.parsed.pool()
    return parsed


def _readable(parsed: ParsedSchema) -> bool:
    """Whether a reader may decode with it on the event loop: nothing left to build."""
    return not isinstance(parsed.parsed, protobuf.ProtobufSchema) or parsed.parsed.has_pool


def _describe(entry: SchemaVersion, text: str | None = None) -> dict[str, Any]:
    answer: dict[str, Any] = {"subject": entry.subject, "version": entry.version, "id": entry.schema_id}
    if entry.schema.schema_type != AVRO:
        answer["schemaType"] = entry.schema.schema_type
    if entry.schema.references:
        answer["references"] = [r.to_json() for r in entry.schema.references]
    answer["schema"] = entry.schema.text if text is None else text
    return answer
