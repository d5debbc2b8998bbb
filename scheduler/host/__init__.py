"""The host: drives the framework against a cluster.

Informer events feed the cache and the queue (:mod:`.handlers`); one loop pops pods and
runs a scheduling cycle (:mod:`.cycle`); pods held at Permit wait in :mod:`.waiting`;
bindings run inline or on a pool (:mod:`.binding`). :mod:`.service` wires it all to a
cluster with events, metrics, probes and leader election.
"""
