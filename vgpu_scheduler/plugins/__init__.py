"""The built-in plugins, one package each (as kube-scheduler's ``plugins/<name>/``), with
the helpers only that plugin uses beside it: kube-scheduler's default plugins in
:mod:`.kube`, vgpu's own in :mod:`.gpu`; helpers several plugins share are in
:mod:`.helper`; :mod:`.registry` names the plugins. No plugin imports another (the
``importlinter`` contracts in pyproject.toml): what two share is a helper, or the
framework's."""

from __future__ import annotations
