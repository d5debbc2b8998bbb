"""The host: drives the framework against a cluster.

Informer events (:mod:`.informers`) feed the cache and the queue (:mod:`.handlers`); one
loop (:mod:`.scheduler`) pops pods and runs a scheduling cycle (:mod:`.schedule_one`);
pods held at Permit wait in :mod:`.waiting`; preemptors hold room through
:mod:`.nominator`; bindings run inline or on a pool (:mod:`.binding`). :mod:`.service`
wires it all to a cluster with events, metrics, probes and leader election.
"""
