"""The address a request came from, for login throttling (django-axes' AXES_CLIENT_IP_CALLABLE).

Behind a reverse proxy every request comes from the proxy's address, so a lockout keyed by (username, address)
would lock a username out for everyone. With ``SEEDBED_TRUSTED_PROXY_HEADER`` set (e.g. ``X-Forwarded-For``),
the client's address is read from that header, where each proxy appends the address it was reached from:

- ``SEEDBED_TRUSTED_PROXIES`` a number N (default 1): the N-th address from the right, the one the outermost of
  the N proxies saw (entries further left were written by the client and prove nothing);
- or addresses and networks (``10.0.0.2,172.16.0.0/12``): the header is believed only from a peer among them, and
  the client is the rightmost address that is not one of them.

Without the setting the header is ignored: any client could write it and pick the address it is counted under.
"""
from __future__ import annotations

import ipaddress

from django.conf import settings


def _address(text: str):
    try:
        return ipaddress.ip_address(text.strip())
    except ValueError:
        return None


def _networks(spec: str) -> list:
    networks = []
    for part in spec.split(","):
        if part.strip():
            networks.append(ipaddress.ip_network(part.strip(), strict=False))
    return networks


def client_address(request) -> str:
    peer = request.META.get("REMOTE_ADDR", "")
    header = (getattr(settings, "SEEDBED_TRUSTED_PROXY_HEADER", "") or "").strip()
    if not header:
        return peer
    hops = [h.strip() for h in request.META.get("HTTP_" + header.upper().replace("-", "_"), "").split(",")]
    hops = [h for h in hops if h]
    trusted = str(getattr(settings, "SEEDBED_TRUSTED_PROXIES", "1") or "1").strip()
    if trusted.isdigit():
        count = int(trusted)
        if count < 1 or len(hops) < count:  # not through all the proxies: only the peer is known
            return peer
        found = _address(hops[-count])
        return str(found) if found else peer
    networks = _networks(trusted)
    peer_address = _address(peer)
    if peer_address is None or not any(peer_address in n for n in networks):
        return peer
    for hop in reversed(hops):
        found = _address(hop)
        if found is None:
            return peer
        if not any(found in n for n in networks):
            return str(found)
    return peer
