"""The canary over Faust's insides: every private member of Faust (or mode, its service library)
that evalstream's glue reads, calls, sets or overrides is listed here with the class it belongs
to, and each must still be there; the Faust methods the glue copies and adapts are pinned by a
digest of their source. A Faust upgrade that moves any of them fails here first, and a glue
change that touches a private member it does not list fails too. The signatures of the methods
overridden are checked in test_faust_transport.py."""

from __future__ import annotations

import ast
import hashlib
import importlib
import inspect
import re
from pathlib import Path

import faust
import pytest
from faust.app import BootStrategy
from faust.stores.rocksdb import Store as RocksStore
from faust.tables import TableManager
from faust.transport.consumer import Consumer as FaustConsumer
from faust.transport.consumer import ThreadDelegateConsumer
from faust.transport.drivers import aiokafka as driver

from tests.helpers import REPO

pytestmark = pytest.mark.pythons  # depends on the CPython version: run on each

PRIVATE: dict[str, type] = {  # member -> the Faust class that has it
    "_enable_passive": faust.Stream,  # adaptive_stream: the passive drain take_events uses
    "_processors": faust.Stream,  # adaptive_stream: its buffer's processor, removed after
    "_chain": BootStrategy,  # faust_app.WebFirstBoot: the services in start order
    "_update_channels": TableManager,  # faust_app.PromptTableManager.on_start
    "_ensure_producer": driver.Producer,  # faust_producer
    "_producer_type": driver.Producer,  # faust_producer: overridden
    "_new_consumer_thread": driver.Consumer,  # faust_transport: overridden
    "_thread": ThreadDelegateConsumer,  # faust_transport: the consumer's thread
    "_read_offset": FaustConsumer,  # faust_transport: the stream gate
    "_committed_offset": FaustConsumer,  # faust_transport: the stream gate
    "_create_worker_consumer": driver.AIOKafkaConsumerThread,  # overridden
    "_assignor": driver.AIOKafkaConsumerThread,  # set by _create_worker_consumer
    "_ensure_consumer": driver.AIOKafkaConsumerThread,
    "_fetch_records": driver.AIOKafkaConsumerThread,  # overridden
    "_highwaters": driver.AIOKafkaConsumerThread,  # overridden
    "_get": RocksStore,  # table_store.PartitionedStore: overridden (a store's abstract methods)
    "_set": RocksStore,  # overridden
    "_del": RocksStore,  # overridden
    "_contains": RocksStore,  # overridden
    "_iterkeys": RocksStore,  # table_store: the active partitions' keys
    "_db_for_partition": RocksStore,  # table_store: a partition's database, opened if need be
    "_dbs": RocksStore,  # table_store: the open databases, by partition (a discarded one goes)
    "_dbs_for_actives": RocksStore,  # table_store.estimated_keys: the active partitions' ones
}
FORKED: dict[tuple[type, str], str] = {  # Faust's method -> sha256 of its source, first 16
    (faust.Stream, "take_events"): "607d48aead118ba8",  # adaptive_stream.take_waiting adapts it
    (TableManager, "on_start"): "365dd25fbc0e0684",  # PromptTableManager.on_start, no sleep
}
NOT_FAUST = {"os", "sys"}  # `os._exit`: a module's private name, not an object of Faust's
GLUE_IMPORT = re.compile(r"^(from|import) (faust|mode)\b", re.M)


def glue() -> list[Path]:
    """The modules that import Faust or mode: the only ones that can touch their insides."""
    return sorted(
        path
        for path in (REPO / "stream_app").rglob("*.py")
        if GLUE_IMPORT.search(path.read_text(encoding="utf-8"))
    )


def private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def faust_bases(cls: type) -> list[type]:
    return [b for b in cls.__mro__[1:] if b.__module__.split(".")[0] in {"faust", "mode"}]


def faust_has(cls: type, name: str) -> bool:
    """Whether Faust's class (or a base) defines or sets `name`."""
    return any(
        name in vars(base) or f"self.{name}" in inspect.getsource(base)
        for base in [cls, *faust_bases(cls)]
        if base.__module__.split(".")[0] in {"faust", "mode"}
    )


def touched() -> set[str]:
    """Private names the glue uses that are Faust's: read or called on Faust's objects, or
    defined by a glue class over a Faust base that has them (an override, or Faust's own
    attribute set)."""
    used: set[str] = set()
    own: set[str] = set()
    overrides: set[str] = set()
    for path in glue():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = importlib.import_module(".".join(path.relative_to(REPO).with_suffix("").parts))
        for node in ast.walk(tree):
            on_module = isinstance(node, ast.Attribute) and (
                isinstance(node.value, ast.Name) and node.value.id in NOT_FAUST
            )
            if isinstance(node, ast.Attribute) and private(node.attr) and not on_module:
                used.add(node.attr)
            if not isinstance(node, ast.ClassDef):
                continue
            cls = getattr(module, node.name, None)
            defined = {
                n.name
                for n in ast.walk(node)
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and private(n.name)
            } | {
                n.attr
                for n in ast.walk(node)
                if isinstance(n, ast.Attribute)
                and isinstance(n.ctx, ast.Store)
                and isinstance(n.value, ast.Name)
                and n.value.id == "self"
                and private(n.attr)
            }
            for name in defined:
                is_faust = isinstance(cls, type) and faust_has(cls, name)
                (overrides if is_faust else own).add(name)
        own |= {
            n.name
            for n in tree.body
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        }
    return (used - own) | overrides


def digest(owner: type, name: str) -> str:
    return hashlib.sha256(inspect.getsource(getattr(owner, name)).encode()).hexdigest()[:16]


def test_every_private_faust_member_the_glue_touches_is_listed_and_none_else() -> None:
    assert glue(), "no module imports Faust: the scan would prove nothing"
    assert touched() == set(PRIVATE)


@pytest.mark.parametrize("name", sorted(PRIVATE))
def test_each_listed_member_is_still_faust_s(name: str) -> None:
    assert faust_has(PRIVATE[name], name), f"{PRIVATE[name].__qualname__} has no {name}"


@pytest.mark.parametrize(("owner", "name"), list(FORKED))
def test_the_methods_the_glue_adapts_are_as_they_were(owner: type, name: str) -> None:
    """A Faust whose original changed: read the change, carry it into the adaptation, then
    update the digest."""
    assert digest(owner, name) == FORKED[(owner, name)]


def test_every_method_over_faust_s_says_override() -> None:
    """A glue method named as one of its Faust base's carries `@override`: mypy then fails when
    an upgrade renames or removes what it overrides."""
    missing = []
    for path in glue():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = importlib.import_module(".".join(path.relative_to(REPO).with_suffix("").parts))
        for node in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            cls = getattr(module, node.name, None)
            bases = faust_bases(cls) if isinstance(cls, type) else []
            for method in node.body:
                if not isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef):
                    continue
                overrides = not method.name.startswith("__") and any(
                    method.name in vars(base) for base in bases
                )
                said = any("override" in ast.unparse(d) for d in method.decorator_list)
                if overrides and not said:
                    missing.append(f"{path.name}: {node.name}.{method.name}")
    assert missing == []
