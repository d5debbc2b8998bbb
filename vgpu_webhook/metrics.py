"""Prometheus metrics of the webhook, in a registry of their own (one per server)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from vgpu import latency, loops

#: skipped: not a GPU pod creation; unchanged: GPU pod needing no patch; mutated; denied;
#: invalid: not an AdmissionReview (HTTP 400); error: a bug, answered as a denial.
OUTCOMES = ("skipped", "unchanged", "mutated", "denied", "invalid", "error")

#: /validate's outcomes by the decision's: skipped (a vgpu component's write, or not a pod
#: creation or update: answered without reading the pod), allowed, denied, invalid, error.
VALIDATIONS = {"skipped": "skipped", "unchanged": "allowed", "denied": "denied",
               "invalid": "invalid", "error": "error"}

# Admission calls sit in the API server's request path: the interesting range is well
# under the registration's timeout.
LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        # The node watch's failed rounds (the GPU inventories the decisions read).
        self.registry.register(loops.Collector(
            "vgpu_webhook", ("informer (nodes)", "informer handler (nodes)",
                             "informer (resourcequotas)", "informer handler (resourcequotas)",
                             "gpu types writer")))
        requests = Counter("vgpu_webhook_requests", "Admission requests answered, by outcome",
                           ["outcome"], registry=self.registry)
        # Children bound once: a labels() lookup per request is measurable at high rates.
        self.outcome = {name: requests.labels(name) for name in OUTCOMES}
        self.latency = Histogram("vgpu_webhook_request_duration_seconds",
                                 "Time from request received to answer ready",
                                 buckets=LATENCY_BUCKETS, registry=self.registry)
        validations = Counter("vgpu_webhook_validations",
                              "Requests /validate answered (vgpu's annotations, ephemeral "
                              "containers), by outcome", ["outcome"], registry=self.registry)
        self.validation = {key: validations.labels(value)
                           for key, value in VALIDATIONS.items()}
        scoped = Counter("vgpu_webhook_node_scope",
                         "Requests /node-scope answered (the node agents' writes), by outcome",
                         ["outcome"], registry=self.registry)
        self.node_scope = {key: scoped.labels(value) for key, value in VALIDATIONS.items()}
        self.validation_latency = Histogram(
            "vgpu_webhook_validation_duration_seconds",
            "Time from a /validate request received to its answer ready",
            buckets=LATENCY_BUCKETS, registry=self.registry)
        self.decision = Histogram(latency.METRIC, latency.HELP, [latency.LABEL],
                                  buckets=latency.BUCKETS, registry=self.registry
                                  ).labels(latency.WEBHOOK_DECISION)
        reloads = Counter("vgpu_webhook_certificate_reloads",
                          "Certificate reloads after the files changed, by result",
                          ["result"], registry=self.registry)
        self.reload_ok = reloads.labels("success")
        self.reload_failed = reloads.labels("failure")
        self.cert_expiry = Gauge("vgpu_webhook_certificate_expiry_timestamp_seconds",
                                 "When the certificate in use expires (Unix time)",
                                 registry=self.registry)
        self.nodes = Gauge("vgpu_webhook_inventory_nodes",
                           "Nodes with a GPU inventory the webhook knows of",
                           registry=self.registry)
        self.gpus = Gauge("vgpu_webhook_inventory_gpus",
                          "GPUs the webhook knows of, over all node inventories",
                          registry=self.registry)
