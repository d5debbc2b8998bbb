"""The AdmissionReview v1 envelope: reading the API server's body, writing our answer."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vgpu import meta
from vgpu.errors import VgpuError
from vgpu_webhook.verdict import AdmissionVerdict

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"


class BadReview(VgpuError):
    """The body is not an AdmissionReview v1 request; answered with HTTP 400."""


@dataclass(frozen=True)
class Review:
    uid: str
    request: Mapping[str, Any]

    def describe(self) -> dict[str, str]:
        """Who the request is about, for logs (pods from a controller have no name yet)."""
        obj = meta.mapping(self.request.get("object"))
        generated = meta.of(obj).get("generateName")
        name = meta.name(obj) or (f"{generated}*" if generated else "")
        namespace = self.request.get("namespace") or meta.namespace(obj)
        return {"uid": self.uid, "namespace": str(namespace)[:253], "pod": str(name)[:253]}


def parse(body: bytes) -> Review:
    """Read an AdmissionReview v1 request; :class:`BadReview` says what is wrong."""
    try:
        document = _DECODER.decode(body.decode(json.detect_encoding(body), "surrogatepass"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadReview(f"body is not JSON: {exc}") from None
    except RecursionError:
        raise BadReview("body is not JSON this server accepts: nested too deeply") from None
    if not isinstance(document, dict):
        raise BadReview("body must be a JSON object (an AdmissionReview)")
    if document.get("kind") != KIND or document.get("apiVersion") != API_VERSION:
        raise BadReview(
            f"expected kind {KIND} with apiVersion {API_VERSION}, got kind "
            f"{_short(document.get('kind'))} apiVersion {_short(document.get('apiVersion'))}; "
            f"register this webhook with admissionReviewVersions: [v1]")
    request = document.get("request")
    if not isinstance(request, dict):
        raise BadReview("AdmissionReview has no request object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReview("AdmissionReview request has no uid")
    return Review(uid=uid, request=request)


def _no_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; Python accepts them by default.
    raise ValueError(f"{name} is not valid JSON")


# One decoder for every request: json.loads with an argument builds a new one per call.
_DECODER = json.JSONDecoder(parse_constant=_no_constant)


#: Warnings per answer, and characters per warning (the API server's own limits are 4 KiB
#: in all and truncation of long ones).
MAX_WARNINGS = 10
MAX_WARNING = 256


def _warning(text: str) -> str:
    return text if len(text) <= MAX_WARNING else text[:MAX_WARNING - 3] + "..."


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def answer(uid: str, verdict: AdmissionVerdict) -> bytes:
    """The AdmissionReview v1 response body for ``verdict``, echoing ``uid``."""
    response: dict[str, Any] = {"uid": uid, "allowed": verdict.allowed}
    if verdict.patch:
        patch = json.dumps(verdict.patch, separators=(",", ":")).encode()
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(patch).decode("ascii")
    if not verdict.allowed:
        response["status"] = {"code": verdict.code, "message": verdict.message}
    elif verdict.warnings:
        # The API server shows these to the client (kubectl prints "Warning: ...");
        # it truncates long ones, so each is cut here where it is still whole words.
        response["warnings"] = [_warning(w) for w in verdict.warnings[:MAX_WARNINGS]]
    return json.dumps({"apiVersion": API_VERSION, "kind": KIND, "response": response},
                      separators=(",", ":")).encode()
