"""The plugin tree: services, ``inject``, and disposal that takes back everything a plugin registered.

This is the Python shape of DSH's cordis context, kept small. A plugin is a module or object with ``name``,
``inject`` (the services it needs), optionally ``Config``, and ``apply(ctx, config)``. Mounting it creates a *scope*:
the plugin's ``apply`` runs once every injected service exists, and the scope unwinds (running every disposer it
collected) when a service it needs goes away or when the plugin is disposed. Registrations made through ``ctx``
inside a scope are collected automatically: every service method that returns a :class:`Disposer` has it recorded on
the calling scope, so "dispose the plugin" really removes its tools, projection units and listeners.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, TypeVar, overload

from dsh_todo.harness.disposer import Disposer as Disposer
from dsh_todo.harness.errors import DshTodoError
from dsh_todo.harness.plugin_shape import Plugin as Plugin
from dsh_todo.harness.plugin_shape import accepts_config, check_plugin_shape, parse_config
from dsh_todo.harness.service_key import ServiceKey as ServiceKey
from dsh_todo.harness.service_key import name_of

log = logging.getLogger("dsh_todo.context")

T = TypeVar("T")


class _Scoped:
    """A service seen from one scope: registrations made through it are owned by that scope."""

    __slots__ = ("_scope", "_service")

    def __init__(self, service: object, scope: Scope) -> None:
        self._service = service
        self._scope = scope

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._service, attr)
        if not callable(value):
            return value
        scope = self._scope

        def call(*args: Any, **kwargs: Any) -> Any:
            result = value(*args, **kwargs)
            if isinstance(result, Disposer):
                scope.collect(result)
            return result

        return call

    def __repr__(self) -> str:
        return f"<{self._service!r} in scope {self._scope.label}>"


class Scope:
    """One mounted plugin (or one ``inject`` child): its disposers and its children."""

    def __init__(self, root: Root, parent: Scope | None, label: str, needs: tuple[str, ...],
                 start: Callable[[Context], Any]) -> None:
        self.root = root
        self.parent = parent
        self.label = label
        self.needs = needs
        self._start = start
        self.active = False
        self.disposed = False
        self._disposers: list[Callable[[], object]] = []
        self.children: list[Scope] = []
        self.ctx = Context(root, self)

    def collect(self, disposer: Callable[[], object]) -> None:
        self._disposers.append(disposer)

    def ready(self) -> bool:
        return not self.disposed and all(name in self.root.services for name in self.needs)

    def activate(self) -> None:
        if self.active or not self.ready():
            return
        self.active = True
        try:
            result = self._start(self.ctx)
        except BaseException:
            self.deactivate()
            raise
        if callable(result):
            self.collect(result)

    def deactivate(self) -> None:
        if not self.active:
            return
        self.active = False
        for child in list(self.children):
            child.dispose()
        disposers, self._disposers = self._disposers, []
        for disposer in reversed(disposers):
            try:
                disposer()
            except DshTodoError as exc:  # a known failure (a log that cannot be written): its line, no traceback
                log.warning("disposer of %s failed: %s", self.label, exc, exc_info=log.isEnabledFor(logging.DEBUG))
            except Exception:
                log.exception("disposer of %s failed", self.label)

    def dispose(self) -> None:
        if self.disposed:
            return
        # Mark first: a disposer that withdraws a service refreshes the tree, which would otherwise restart
        # this very scope (it is inactive and, with its needs met, "ready") and provide the service again.
        self.disposed = True
        self.deactivate()
        if self.parent is not None and self in self.parent.children:
            self.parent.children.remove(self)
        self.root.forget(self)


class Root:
    """The process-wide part of the tree: the service table and the scopes waiting on it."""

    def __init__(self) -> None:
        self.services: dict[str, object] = {}
        self.scopes: list[Scope] = []

    def forget(self, scope: Scope) -> None:
        if scope in self.scopes:
            self.scopes.remove(scope)

    def refresh(self) -> None:
        """Unwind scopes whose services left, then start the ones whose services are now all present."""
        for scope in list(self.scopes):
            if scope.active and not scope.ready():
                scope.deactivate()
        for scope in list(self.scopes):
            if not scope.active and scope.ready() and _ancestors_active(scope):
                scope.activate()


def _ancestors_active(scope: Scope) -> bool:
    parent = scope.parent
    while parent is not None:
        if not parent.active:
            return False
        parent = parent.parent
    return True


class PluginHandle:
    """What ``ctx.plugin`` returns: the mounted plugin, with ``dispose()``."""

    def __init__(self, scope: Scope, plugin: object) -> None:
        self._scope = scope
        self.plugin = plugin

    @property
    def active(self) -> bool:
        return self._scope.active

    @property
    def ctx(self) -> Context:
        return self._scope.ctx

    def dispose(self) -> None:
        self._scope.dispose()


class _ByName:
    """``ctx.tools``: the service named like the attribute, as ``ctx["tools"]`` (``Any``: the context imports no
    service module; our own code spells ``ctx[TOOLS]``, which is typed). A descriptor per name rather than a
    ``__getattr__`` for any name: a miss through ``__getattr__`` cost 867 ns against 134 for the old property, and a
    type with one loses the interpreter's specialised attribute loads on every ``ctx.get`` and ``self._root``
    (decision 0044)."""

    __slots__ = ("name",)

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, ctx: Context | None, owner: type | None = None) -> Any:
        return self if ctx is None else ctx[self.name]


class Context:
    """A plugin's view of the tree. ``ctx[TOOLS]`` (typed by the key its service module declares), ``ctx.tools``
    and ``ctx.get("tools")`` are the services, seen from this scope."""

    def __init__(self, root: Root | None = None, scope: Scope | None = None) -> None:
        self._root = root if root is not None else Root()
        self._scope = scope

    # -- services -------------------------------------------------------------------------------------------
    # The context imports no service: each is provided and got by a name, which a service module types by declaring
    # a key beside its class (``TOOLS: ServiceKey[ToolRegistry]``). Our code spells ``ctx[TOOLS]``; ``ctx.tools`` and
    # ``ctx.get("tools")`` are the same lookup by name, for plugins and compositions written with strings.
    @overload
    def provide(self, key: ServiceKey[T], service: T) -> Disposer: ...
    @overload
    def provide(self, key: str, service: object) -> Disposer: ...

    def provide(self, key: str | ServiceKey[Any], service: object) -> Disposer:
        """Publish a service; scopes that inject it start now. The disposer withdraws it again."""
        name = name_of(key)
        root = self._root
        if name in root.services:
            raise ValueError(f'service "{name}" is already provided')
        root.services[name] = service

        def withdraw() -> None:
            if root.services.get(name) is service:
                del root.services[name]
                root.refresh()

        disposer = Disposer(withdraw)
        if self._scope is not None:
            self._scope.collect(disposer)
        root.refresh()
        return disposer

    @overload
    def get(self, key: ServiceKey[T]) -> T | None: ...
    @overload
    def get(self, key: str) -> Any: ...

    def get(self, key: str | ServiceKey[Any]) -> Any:
        """The service seen from this scope, or ``None`` (for optional services not in ``inject``)."""
        service = self._root.services.get(key if isinstance(key, str) else key.name)  # name_of, inlined: hot
        if service is None:
            return None
        return service if self._scope is None else _Scoped(service, self._scope)

    @overload
    def __getitem__(self, key: ServiceKey[T]) -> T: ...
    @overload
    def __getitem__(self, key: str) -> Any: ...

    def __getitem__(self, key: str | ServiceKey[Any]) -> Any:
        """The service, which must be there. A missing one raises the ``AttributeError`` that ``ctx.tools`` always
        raised, so the typed spelling and the one by name fail alike."""
        service = self.get(key)
        if service is None:
            name = name_of(key)
            raise AttributeError(f'cannot get service "{name}": it is not provided (is its plugin mounted?)')
        return service

    # The names DESIGN keeps for code outside dsh-todo (``ctx.tools`` …): the service of that name, untyped here.
    tools = _ByName()
    sessions = _ByName()
    session_projections = _ByName()
    invariants = _ByName()
    session_persistence = _ByName()
    session_telemetry = _ByName()

    def has(self, key: str | ServiceKey[Any]) -> bool:
        return name_of(key) in self._root.services

    # -- scopes ---------------------------------------------------------------------------------------------
    def _child(self, label: str, needs: Iterable[str | ServiceKey[Any]], start: Callable[[Context], Any]) -> Scope:
        scope = Scope(self._root, self._scope, label, tuple(map(name_of, needs)), start)
        if self._scope is not None:
            self._scope.children.append(scope)
        self._root.scopes.append(scope)
        if _ancestors_active(scope):
            try:
                scope.activate()
            except BaseException:
                # The caller gets the error and no handle: forget the scope, or the next refresh of the tree
                # would start it again behind everybody's back.
                scope.dispose()
                raise
        return scope

    def plugin(self, plugin: Plugin, config: Any = None) -> PluginHandle:
        """Mount a plugin: validate its config, then run ``apply`` as soon as its ``inject`` services exist."""
        check_plugin_shape(plugin)
        parsed = parse_config(plugin, config)
        name = plugin.name
        needs = tuple(getattr(plugin, "inject", ()) or ())
        apply = plugin.apply
        takes_config = accepts_config(apply)

        def start(ctx: Context) -> Any:
            return apply(ctx, parsed) if takes_config else apply(ctx)

        scope = self._child(name, needs, start)
        return PluginHandle(scope, plugin)

    def inject(self, needs: Iterable[str | ServiceKey[Any]], start: Callable[[Context], Any]) -> Disposer:
        """Run ``start`` in a child scope while every named service exists; unwind it when one goes."""
        scope = self._child(f"{self.label}/inject", needs, start)
        return Disposer(scope.dispose)

    def on_dispose(self, fn: Callable[[], object]) -> None:
        if self._scope is None:
            raise RuntimeError("the root context is never disposed")
        self._scope.collect(fn)

    @property
    def label(self) -> str:
        return "root" if self._scope is None else self._scope.label

    def dispose(self) -> None:
        """Dispose this scope (or, on the root, every mounted plugin)."""
        if self._scope is not None:
            self._scope.dispose()
            return
        for scope in reversed([s for s in self._root.scopes if s.parent is None]):
            scope.dispose()
