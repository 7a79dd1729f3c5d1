"""Who the dashboard answers, and how its replies are kept from harm.

Security model:
- With a token, every request carries it: `?token=` once (it is then kept in an HttpOnly, SameSite=Strict
  cookie, and the URL is redirected without it), the cookie, or `Authorization: Bearer TOKEN`; compared
  with hmac.compare_digest. Without one (served on loopback only, which the command line enforces),
  the Host header must name a loopback host, so a web page cannot reach the dashboard by DNS rebinding.
- Every change is a POST carrying a CSRF token (a random secret of this process, in a hidden field,
  compared with hmac.compare_digest); a GET never changes Redis (it reads dead letters with
  migrate=False: an old N_dead list moves into the stream at the first POST on that queue).
- Everything shown is escaped by Jinja2's autoescape; the Content-Security-Policy allows no script
  and nothing from elsewhere.
"""
import hmac
from typing import Optional
from urllib.parse import urlencode

import flask
from werkzeug.wrappers import Response

from .board import Reply, current, message

TOKEN_COOKIE = "delayed_dashboard_token"
LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "[::1]"}
CSP = ("default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; "
       "base-uri 'none'")


def guard() -> Optional[Reply]:
    """Before every request: refuse one without the token (or, without a token, to a host name that is no
    loopback one), and a POST without the CSRF token; a `?token=` that is right becomes the cookie."""
    token, csrf = current().token, current().csrf
    if token is None:
        if _host_name(flask.request.host) not in LOOPBACK_HOSTS:
            return message("Forbidden", "This dashboard answers only to a loopback host name "
                           "(127.0.0.1, localhost); serve it with --token to reach it otherwise.", 403)
    else:
        given = flask.request.args.get("token")
        if given is not None:
            if not hmac.compare_digest(given.encode(), token.encode()):
                return message("Unauthorized", "Wrong token.", 401)
            args = {key: value for key, value in flask.request.args.items() if key != "token"}
            reply = flask.redirect(flask.request.path + ("?" + urlencode(args) if args else ""), 303)
            reply.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="Strict")
            return reply
        header = flask.request.headers.get("Authorization", "")
        sent = header[7:] if header.startswith("Bearer ") else flask.request.cookies.get(TOKEN_COOKIE, "")
        if not hmac.compare_digest(sent.encode(), token.encode()):
            return message("Unauthorized", "This dashboard needs its token: open it once with ?token=TOKEN "
                           "(or send Authorization: Bearer TOKEN).", 401)
    if flask.request.method == "POST":
        sent = flask.request.form.get("csrf", "")
        if not hmac.compare_digest(sent.encode(), csrf.encode()):
            return message("Forbidden", "The form's CSRF token is missing or wrong (the dashboard may have "
                           "restarted): reload the page and try again. Nothing was changed.", 403)
    return None


def headers(reply: Response) -> Response:
    """After every request: the headers that keep a reply from being framed, sniffed, cached or followed."""
    reply.headers["Content-Security-Policy"] = CSP
    reply.headers["X-Content-Type-Options"] = "nosniff"
    reply.headers["Referrer-Policy"] = "no-referrer"
    reply.headers["Cache-Control"] = "no-store"
    return reply


def _host_name(host: str) -> str:
    """A Host header without its port: "127.0.0.1:8080" -> "127.0.0.1", "[::1]:8080" -> "[::1]"."""
    name, colon, port = host.rpartition(":")
    return name if colon and port.isdigit() and not host.endswith("]") else host
