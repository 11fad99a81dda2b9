#!/usr/bin/python3
"""The conforming contrarian: a verifier that makes every choice the draft
leaves open the other way from this project, and offers only ES256.

It is the peer (../peer/peer.py) with these choices replaced, so that the
conformance suite can show that it accepts every reading the text allows:

  typ            compared exactly with "agent-handoff+jwt" (no case folding,
                 no "application/" prefix)
  b64            a JWS header parameter it does not understand, ignored
                 (RFC 7515 section 4); the signature is checked over the
                 signing input as sent
  kid            a kid that names no key bound to iss means an untrusted
                 signer: untrusted-key, without trying iss's keys; a COSE kid
                 names a key only as the text of its kid or thumbprint
  CBOR           only preferred serialization read: indefinite lengths and
                 longer heads than needed refused, in the Handoff, the COSE
                 envelope, the protected header and the payload:
                 bad-signature
  JSON           strings kept as decoded, unpaired surrogates included
                 (RFC 8259 section 8.2); numbers above 2^53 - 1 refused
                 (RFC 8259 section 6)
  CBOR text      invalid UTF-8 replaced, not refused
  chain state    an offer with neither prev nor chain has an "absent" chain
  reporting      no reference listed when none was checked; chain "absent"
                 reported on every rejection before step 6
  algorithms     ES256 only (declared in capabilities.json)

Everything else, and every MUST, is the peer's. Run it with the system
interpreter, as the peer: /usr/bin/python3 contrarian.py verify ...
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "peer"))

import cbor2  # noqa: E402
import json  # noqa: E402

import peer  # noqa: E402

# ES256 only.
peer.JOSE_ALGS = ("ES256",)
peer.COSE_ALGS = {-7: "ES256"}

# typ exactly as the draft writes it.
peer.typ_is_handoff = lambda typ: typ == peer.JWS_TYP

# Unpaired surrogates are kept as decoded; the output escapes them.
peer.lone_surrogate = lambda v: False
peer.json_text = lambda obj: json.dumps(obj, separators=(",", ":"))


class NotPreferred(Exception):
    """An indefinite length, or an argument in a longer head than needed."""


def _skip(d, i, depth=0):
    """Walks one CBOR data item from d[i]; returns the index after it and
    raises NotPreferred at an indefinite-length head or at an integer,
    length or tag argument in a longer head than its value needs (floats
    and simple values aside)."""
    if depth > 64:
        raise ValueError("too deep")
    ib = d[i]
    mt, ai = ib >> 5, ib & 31
    i += 1
    if ai == 31:
        if mt in (2, 3, 4, 5):
            raise NotPreferred()
        raise ValueError("break outside an indefinite-length item")
    if ai < 24:
        val = ai
    elif ai in (24, 25, 26, 27):
        n = 1 << (ai - 24)
        if i + n > len(d):
            raise ValueError("truncated")
        val = int.from_bytes(d[i:i + n], "big")
        i += n
        if mt != 7 and val < (24 if n == 1 else 1 << (4 * n)):
            raise NotPreferred()
    else:
        raise ValueError("reserved additional information")
    if mt in (2, 3):
        i += val
    elif mt == 4:
        for _ in range(val):
            i = _skip(d, i, depth + 1)
    elif mt == 5:
        for _ in range(2 * val):
            i = _skip(d, i, depth + 1)
    elif mt == 6:
        i = _skip(d, i, depth + 1)
    return i


def not_preferred(data):
    try:
        _skip(data, 0)
    except NotPreferred:
        return True
    except (IndexError, ValueError):
        return False  # not well-formed: the CBOR decoder says why
    return False


_parse_handoff = peer.parse_handoff


def parse_handoff(data):
    if data[:1] not in (b"{", b" ", b"\t", b"\r", b"\n") and not_preferred(data):
        raise ValueError("CBOR not in preferred serialization in the Handoff")
    return _parse_handoff(data)


peer.parse_handoff = parse_handoff

_split_cose = peer.split_cose


def split_cose(octets):
    if not_preferred(octets):
        raise peer.Reject("bad-signature", "COSE: the envelope is not in preferred serialization")
    parts = _split_cose(octets)
    if parts[2] and not_preferred(parts[2]):
        raise peer.Reject("bad-signature", "COSE: the protected header is not in preferred serialization")
    return parts


peer.split_cose = split_cose

_decode_payload = peer.decode_payload
MAX_SAFE = 2**53 - 1


def decode_payload(octets, encoding):
    if encoding == "cbor":
        if not_preferred(octets):
            raise peer.Reject("bad-signature", "payload: not in preferred serialization")
        try:
            obj = cbor2.loads(octets, str_errors="replace")
        except Exception as e:  # cbor2 raises several classes
            raise peer.Reject("bad-signature", "payload: %s" % e)
        if not isinstance(obj, dict):
            raise peer.Reject("bad-signature", "payload is not a map")
        return obj
    obj = _decode_payload(octets, encoding)
    for name in ("iat", "exp"):
        v = obj.get(name)
        if isinstance(v, int) and not isinstance(v, bool) and v > MAX_SAFE:
            raise peer.Reject("bad-signature", "%s is beyond 2^53 - 1, the numbers this receiver reads" % name)
    return obj


peer.decode_payload = decode_payload

# b64 is a parameter this receiver does not understand: dropped before the
# peer's header checks when crit does not list it.
_split_jws = peer.split_jws


def split_jws(octets):
    header, payload_octets, sig, text = _split_jws(octets)
    if "crit" not in header:
        header.pop("b64", None)
    return header, payload_octets, sig, text


peer.split_jws = split_jws


class RawJWS:
    """Verifies a JWS Compact Serialization over its signing input as
    sent, whatever its header says beyond alg."""

    def __init__(self):
        self.allowed_algs = []
        self.text = ""

    def deserialize(self, text):
        self.text = text

    def verify(self, key, alg):
        if alg not in self.allowed_algs:
            raise ValueError("alg not allowed")
        h, p, s = self.text.split(".")
        if not peer.verify_raw(key, alg, peer.unb64u(s), (h + "." + p).encode("ascii")):
            raise ValueError("signature does not verify")


class _JWSModule:
    JWS = RawJWS


peer.jws = _JWSModule


# A kid names a key only as its text; one that names no key of iss is an
# untrusted signer.
def names_key(kid, k_kid, k):
    tp = peer.thumbprint(k)
    if isinstance(kid, bytes):
        return kid in (k_kid.encode("utf-8"), tp.encode("ascii"))
    return kid in (k_kid, tp)


peer.names_key = names_key
_verify_with_trust = peer.verify_with_trust


def verify_with_trust(trust, iss, kid, alg, check):
    keys = trust.get(iss, [])
    if keys and kid is not None and not any(names_key(kid, k_kid, k) for (k_kid, _, k) in keys):
        raise peer.Reject("untrusted-key", "kid %r names no key of %r" % (kid, iss))
    return _verify_with_trust(trust, iss, kid, alg, check)


peer.verify_with_trust = verify_with_trust

# The chain of an offer with neither prev nor chain is absent.
_check_chain = peer.Receiver.check_chain


def check_chain(self, h, o):
    if not h.chain and "prev" not in o:
        return "absent", o["iss"]
    return _check_chain(self, h, o)


peer.Receiver.check_chain = check_chain

# Reporting: no unchecked reference listed; "absent" on rejections before
# step 6.
_receive = peer.Receiver.receive


def receive(self, data):
    out = _receive(self, data)
    if self.refs_policy == "not-checked":
        out["refs"] = []
    if not out["accepted"] and not out["retransmission"] and out["chain"] == "":
        out["chain"] = "absent"
    return out


peer.Receiver.receive = receive

if __name__ == "__main__":
    sys.exit(peer.main(sys.argv[1:]))
