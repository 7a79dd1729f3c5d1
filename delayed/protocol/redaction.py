"""Passwords kept out of what is printed: a Redis URL with its passwords masked, and an error message
scrubbed of them."""
import re
from typing import List
from urllib.parse import unquote


def redacted(url: str) -> str:
    """url without its password, for logs and error messages; never raises, whatever url is.

    Everything between "://" and the last "@" is the user info (a password may hold "@", ":" or
    "/"): the part after its first ":" is masked, or all of it when it has no ":" (a lone
    password). Values of `password=` and `sentinel_password=` query parameters are masked too.
    """
    scheme, separator, rest = url.partition("://")
    user_info, at, host = rest.rpartition("@")
    if at:
        user, colon, _ = user_info.partition(":")
        rest = (user + ":***" if colon else "***") + "@" + host
    return _PASSWORD_PARAMETER.sub(r"\1***", scheme + separator + rest)


_PASSWORD_PARAMETER = re.compile(r"([?&](?:sentinel_)?password=)[^&#]*", re.IGNORECASE)


def secrets_of(url: str) -> List[str]:
    """The passwords url holds, as written and percent-decoded, longest first: to scrub from messages."""
    found = []
    user_info, at, _ = url.partition("://")[2].rpartition("@")
    if at:
        user, colon, password = user_info.partition(":")
        found.append(password if colon else user)
    found += [match.group(1) for match in re.finditer(r"[?&](?:sentinel_)?password=([^&#]*)", url, re.IGNORECASE)]
    found += [unquote(secret) for secret in found]
    return sorted({secret for secret in found if secret}, key=len, reverse=True)


def scrubbed(text: str, url: str) -> str:
    """text (an error message about url) with every password of url masked."""
    for secret in secrets_of(url):
        text = text.replace(secret, "***")
    return text
