"""The key parsed facts are cached by: a digest of a file's text, as the workspace index decoded it.

It sits at the bottom of the server's layers: the parsers (params.py, the build query) and the rules'
CheckContext all key by it, so a text parsed once is found again whoever parsed it.
"""

from __future__ import annotations

import hashlib


def digest(text: str) -> str:
    """128-bit BLAKE2b of the text's UTF-8 (surrogatepass: a text holding lone surrogates hashes too)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
