"""The built-in plugins, one package each (as kube-scheduler's ``plugins/<name>/``), with
the helpers only that plugin uses beside it; helpers several plugins share are in
:mod:`.helper`; :mod:`.registry` names the plugins."""

from __future__ import annotations
