"""CDA's keys: Ed25519 over bytes, the private key files, and CDA's own signing key with the
signed head of a receipt log.

They sit below the products (docs/architecture.md) because a product anchors what it signs in
them: the guardian's signed header is checked against CDA's own public key, as a receipt log's
head is. Nothing here knows a product; the modules are imported by their full names
(:mod:`cda.keys.ed25519`, :mod:`cda.keys.key_files`, :mod:`cda.keys.signing`).
"""
