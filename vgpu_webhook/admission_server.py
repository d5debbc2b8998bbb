"""The webhook's two listeners: ``/mutate`` and ``/validate`` over HTTPS, and the
operations port.

``/mutate`` (:func:`~vgpu_webhook.mutate.decide`) and ``/validate``
(:func:`~vgpu_webhook.validate.validate`) each turn the body into a
:class:`~vgpu_webhook.review.Review`, ask their pure decision and write the AdmissionReview
answer. Whatever happens inside, the API server gets a
well-formed answer: HTTP 400 with a message for a body that is not an AdmissionReview,
and for anything unexpected (a bug) a denial naming the request uid, never HTTP 500 or a
traceback. ``/healthz``, ``/readyz`` and ``/metrics`` live on an operations port of their
own (:class:`vgpu.probes.ProbeServer`: HTTPS with delegated authentication, or plain HTTP on
the loopback address) so that probes and scrapes never queue behind admissions.

The admission listener is bounded as the operations port is: at most
``webhook.maxConnections`` connections (:class:`~vgpu_webhook.capped_site.CappedSite`), and
``webhook.requestTimeoutSeconds`` for a handshake and for a request's body and answer
(then HTTP 408), ``webhook.idleTimeoutSeconds`` for a connection with no request, or with
one whose headers have not all come (the keep-alive timer; longer than the API server's
90 s for an idle connection, which would otherwise send on one just closed): a flood of
forged reviews costs the cap, and a slow client its deadline, never every admission.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

from aiohttp import web

from vgpu import logs
from vgpu.config import Config
from vgpu.errors import ClusterError
from vgpu.probes import ProbeServer
from vgpu.serving import PLAIN, Serving
from vgpu_webhook import node_scope
from vgpu_webhook.agent_nodes import AgentNodes
from vgpu_webhook.capped_site import CappedSite
from vgpu_webhook.denials import DenialRecorder, from_the_api_server
from vgpu_webhook.gpus import GpuView
from vgpu_webhook.metrics import Metrics
from vgpu_webhook.mutate import decide
from vgpu_webhook.review import BadReview, answer, parse
from vgpu_webhook.tls import CertReloader
from vgpu_webhook.validate import validate
from vgpu_webhook.verdict import AdmissionVerdict, deny

log = logs.get("vgpu.webhook")

#: The API server stores objects up to about 1.5 MiB (etcd's limit) and a review carries
#: one object on CREATE; 4 MiB leaves room and still bounds what a client can make us hold.
MAX_BODY = 4 * 1024 * 1024
JSON = "application/json"
#: How long /node-scope waits to read the agent's pod (the registration allows 5 s).
LOOKUP_SECONDS = 3.0
Route = Literal["mutate", "validate", "node-scope"]
Verdict = AdmissionVerdict | Awaitable[AdmissionVerdict]


def listen(host: str, port: int) -> socket.socket:
    """A bound, listening TCP socket; ``host`` "" means every address (IPv6 and IPv4)."""
    if not host and socket.has_dualstack_ipv6():
        return socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True,
                                    backlog=1024)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=1024)


class WebhookServer:
    """Serves ``/mutate``, ``/validate`` and ``/node-scope`` (TLS) on one loop, and the
    operations endpoints on threads of their own."""

    def __init__(self, config: Config, view: GpuView, tls: CertReloader, *, host: str = "",
                 port: int | None = None, metrics_port: int | None = None,
                 reload_interval: float = 10.0, metrics: Metrics | None = None,
                 denials: DenialRecorder | None = None,
                 agent_nodes: AgentNodes | None = None, serving: Serving = PLAIN) -> None:
        self.config = config
        self.view = view
        self.tls = tls
        self.host = host
        self.port = config.webhook.port if port is None else port
        self.metrics_port = config.webhook.metrics_port if metrics_port is None else metrics_port
        self.reload_interval = reload_interval
        self.metrics = metrics or Metrics()
        self.denials = denials
        self.agent_nodes = agent_nodes or AgentNodes(None)
        self.serving = serving
        self.ops: ProbeServer | None = None
        self._site: CappedSite | None = None
        self._runners: list[web.AppRunner] = []
        self._watch: asyncio.Task[None] | None = None

    # -- /mutate and /validate -------------------------------------------------------------

    async def mutate(self, request: web.Request) -> web.Response:
        return await self._review(
            request, lambda r: decide(r, self.config, self.view.snapshot), route="mutate")

    async def validate(self, request: web.Request) -> web.Response:
        return await self._review(request, lambda r: validate(r, self.config),
                                  route="validate")

    async def node_scope(self, request: web.Request) -> web.Response:
        return await self._review(request, self._node_scope, route="node-scope")

    async def _node_scope(self, request: Mapping[str, Any]) -> AdmissionVerdict:
        agents = self.config.webhook.node_agents
        who = node_scope.identity(request)
        if who.username not in agents:
            return node_scope.decide(request, agents, None)
        try:
            if self.agent_nodes.needs_lookup(who):
                # A blocking read of the API server, off the loop and bounded.
                node = await asyncio.wait_for(
                    asyncio.to_thread(self.agent_nodes.node_of, who), LOOKUP_SECONDS)
            else:
                node = self.agent_nodes.node_of(who)
        except (ClusterError, TimeoutError) as exc:
            log.warning("cannot read the node agent's pod", pod=who.pod, error=str(exc))
            return deny(f"cannot tell the node of the node agent's pod {who.namespace}/"
                        f"{who.pod} now (retry): {exc or 'the API server did not answer'}",
                        code=503)
        stored = None
        if node and (name := node_scope.stored_to_read(request, agents)):
            try:
                stored = await asyncio.wait_for(
                    asyncio.to_thread(self.agent_nodes.stored_node, name), LOOKUP_SECONDS)
            except (ClusterError, TimeoutError) as exc:
                log.warning("cannot read the Node", node=name, error=str(exc))
                return deny(f"cannot read Node {name} to check the node agent's write now "
                            f"(retry): {exc or 'the API server did not answer'}", code=503)
        return node_scope.decide(request, agents, node, stored)

    async def _review(self, request: web.Request,
                      verdict_of: Callable[[Mapping[str, Any]], Verdict], *,
                      route: Route) -> web.Response:
        try:
            return await asyncio.wait_for(self._answer(request, verdict_of, route=route),
                                          self.config.webhook.request_timeout_seconds)
        except TimeoutError:
            log.info("request too slow", route=route, peer=request.remote)
            return web.Response(status=408, text="request took too long\n")

    async def _answer(self, request: web.Request,
                      verdict_of: Callable[[Mapping[str, Any]], Verdict], *,
                      route: Route) -> web.Response:
        started = time.perf_counter()
        outcome = "error"
        try:
            body = await request.read()
            try:
                review = parse(body)
            except BadReview as exc:
                outcome = "invalid"
                log.info("not an admission review", error=str(exc), peer=request.remote)
                return web.Response(status=400, text=f"{exc}\n")
            try:
                found = verdict_of(review.request)
                verdict = await found if inspect.isawaitable(found) else found
                outcome = verdict.outcome
            except Exception:
                # Fail closed as the registration's failurePolicy would, but with an
                # answer the API server can show rather than a 500.
                log.exception("admission decision failed", **review.describe())
                verdict = deny(f"the vgpu webhook failed on this pod (request {review.uid}); "
                               f"its log has the details", code=500)
            # A denial is logged for the operator (the user sees its message anyway); a
            # mutation only at debug level: every GPU pod is mutated, the API server's
            # audit log records patches, and a log line per admission costs more CPU
            # than the decision itself.
            if verdict.outcome == "denied":
                who = review.describe()
                log.info("denied" if route == "node-scope" else "pod denied", **who,
                         route=route, message=verdict.message)
                if self.denials is not None and route != "node-scope" and \
                        from_the_api_server(review.request):
                    self.denials.record(who["namespace"], who["pod"].rstrip("*"),
                                        verdict.message)
            elif verdict.outcome == "mutated":
                log.debug("pod mutated", **review.describe(), operations=len(verdict.patch))
            return web.Response(body=answer(review.uid, verdict), content_type=JSON)
        finally:
            seconds = time.perf_counter() - started
            if route == "node-scope":
                self.metrics.node_scope[outcome].inc()
            elif route == "validate":
                self.metrics.validation[outcome].inc()
                self.metrics.validation_latency.observe(seconds)
            else:
                self.metrics.outcome[outcome].inc()
                self.metrics.latency.observe(seconds)
                if outcome not in ("skipped", "invalid"):
                    # A GPU pod's step; pods passed through untouched are no part of it.
                    self.metrics.decision.observe(seconds)

    # -- operations port -------------------------------------------------------------------

    def readiness(self) -> tuple[bool, str]:
        # The certificate is loaded before the server exists (CertReloader raises
        # otherwise), so readiness waits only for the node inventory.
        if not self.view.synced:
            return False, "waiting for the first list of nodes"
        return True, "ready"

    def healthz(self) -> tuple[bool, str]:
        return True, "ok"

    def refresh_gauges(self) -> None:
        """The inventory and certificate gauges, as of this scrape."""
        snapshot = self.view.snapshot
        self.metrics.nodes.set(snapshot.nodes)
        self.metrics.gpus.set(snapshot.gpus)
        if self.tls.expires is not None:
            self.metrics.cert_expiry.set(self.tls.expires.timestamp())

    # -- lifecycle -------------------------------------------------------------------------

    def mutate_app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_post("/mutate", self.mutate)
        app.router.add_post("/validate", self.validate)
        app.router.add_post("/node-scope", self.node_scope)
        return app

    def _on_reload(self, ok: bool) -> None:
        (self.metrics.reload_ok if ok else self.metrics.reload_failed).inc()

    async def start(self) -> None:
        """Bind both ports (0 picks a free one; :attr:`port` then tells which)."""
        self.tls.on_reload = self._on_reload
        secure = listen(self.host, self.port)
        try:
            self.ops = ProbeServer(self.metrics.registry,
                                   {"/healthz": self.healthz, "/readyz": self.readiness},
                                   self.metrics_port, self.host, name="vgpu-webhook-ops",
                                   serving=self.serving, before_scrape=self.refresh_gauges)
        except OSError:
            secure.close()
            raise
        self.port = secure.getsockname()[1]
        self.metrics_port = self.ops.port
        hook = self.config.webhook
        # No access log: at thousands of admissions a second it would cost more than the
        # admissions; outcomes are counted in the metrics and logged when they change a
        # pod. The keep-alive timer also ends a connection whose request never arrives.
        runner = web.AppRunner(self.mutate_app(), access_log=None, shutdown_timeout=5.0,
                               keepalive_timeout=hook.idle_timeout_seconds)
        await runner.setup()
        self._runners.append(runner)
        self._site = CappedSite(runner, secure, ssl_context=self.tls.front, backlog=1024,
                                max_connections=hook.max_connections,
                                handshake_timeout=hook.request_timeout_seconds)
        await self._site.start()
        self.ops.start()
        self._watch = asyncio.create_task(self.tls.watch(self.reload_interval))
        log.info("webhook serving", port=self.port, metrics_port=self.metrics_port,
                 scheduler=self.config.scheduler_name)

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
            self._watch = None
        # Requests in flight finish (up to the shutdown timeout) before the loop stops.
        for runner in reversed(self._runners):
            await runner.cleanup()
        self._runners.clear()
        if self.ops is not None:
            await asyncio.to_thread(self.ops.stop)
            self.ops = None
