#!/usr/bin/python3
"""An independent peer for the signed handoff context (draft-handoff).

This program shares no code with the Go library. It is written from the
draft alone (sections 2, 3 and 5 of draft-handoff-00, with -01's rules) on
top of three Debian packages:

  python3-jwcrypto      JWK (keys, RFC 7638 thumbprints) and JWS Compact
  python3-cbor2         CBOR, including the COSE_Sign1 structure
  python3-cryptography  ECDSA and Ed25519 for COSE_Sign1 (RFC 9052)

It signs with ES256 only; it verifies ES256, ES384 and EdDSA (Ed25519), each
trusted key pinned to the one "alg" its JWK names.

Run it with the system interpreter (/usr/bin/python3), which sees Debian's
packages. Subcommands:

  keygen         P-256 key pair: private JWK to --out, public JWK on stdout
  offer          sign an offer (JWS or COSE) and write a Handoff (JSON/CBOR)
  status         sign a status answering an offer
  verify         run the receive checks on a Handoff; one JSON object out
  verify-status  check a signed status against its offer; one JSON object out
  tamper         write a modified copy of a Handoff (negative test input)
  digest         print the handoff digest of a Handoff's offer
  vectors        run conformance vector files (testdata/vectors) as a receiver
  serve          run one subcommand per line of standard input (for tests)

verify and verify-status exit 0 when the input is accepted or valid, 1 when
it is not, and 2 on a usage or I/O error.
"""

import argparse
import base64
import hashlib
import io
import json
import os
import re
import sys
import time
import traceback

import cbor2
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)
from jwcrypto import jwk, jws

JWS_TYP = "agent-handoff+jwt"
COSE_CONTENT_TYPE = "application/agent-handoff+cbor"
COSE_TAG = 18
COSE_ES256 = -7
# COSE algorithm values (RFC 9053) by their JOSE names.
COSE_ALGS = {-7: "ES256", -35: "ES384", -8: "EdDSA"}
JOSE_ALGS = ("ES256", "ES384", "EdDSA")
# COSE header labels (RFC 9052 section 3.1).
H_ALG, H_CRIT, H_CTY, H_KID = 1, 2, 3, 4
# The order of the P-256 group, to turn a signature into its high-S twin.
P256_N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551

HOP_RE = re.compile(r"^[A-Za-z0-9_-]{22,64}$")
B64U_RE = re.compile(r"^[A-Za-z0-9_-]+$")
JWS_RE = re.compile(r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$")
STATES = ("accepted", "rejected", "completed", "failed", "canceled")

EXIT_OK, EXIT_NO, EXIT_USAGE = 0, 1, 2


class Usage(Exception):
    """A usage or I/O error: exit status 2."""


class Reject(Exception):
    """A failed check, with the draft's reason code."""

    def __init__(self, reason, detail):
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


# ---------------------------------------------------------------- encodings


def b64u(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64u(text):
    """Strict base64url without padding: alphabet only, canonical."""
    if not isinstance(text, str) or not B64U_RE.match(text):
        raise ValueError("not base64url without padding")
    data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if b64u(data) != text:
        raise ValueError("not canonical base64url")
    return data


def digest_of(octets):
    """The handoff digest: SHA-256 over the octets exactly as sent."""
    return {"alg": "sha-256", "val": b64u(hashlib.sha256(octets).digest())}


def same_digest(d, octets):
    if not isinstance(d, dict) or set(d) != {"alg", "val"}:
        return False
    return d["alg"] == "sha-256" and d["val"] == digest_of(octets)["val"]


def json_object(text):
    """Parses one JSON object, refusing duplicate member names."""

    def pairs(items):
        out = {}
        for k, v in items:
            if k in out:
                raise ValueError("duplicate member %r" % k)
            out[k] = v
        return out

    def constant(name):
        raise ValueError("%s is not JSON (RFC 8259 section 6)" % name)

    v = json.loads(text, object_pairs_hook=pairs, parse_constant=constant)
    if not isinstance(v, dict):
        raise ValueError("not a JSON object")
    return v


def lone_surrogate(v):
    """Whether a decoded JSON value holds a string (member name or value)
    with an unpaired surrogate: a \\ud800-\\udfff escape that is not part of a
    pair. Such a string is not a sequence of Unicode characters (RFC 8259
    section 8.2, RFC 7493 section 2.1); it is never replaced by U+FFFD."""
    if isinstance(v, str):
        return any(0xD800 <= ord(ch) <= 0xDFFF for ch in v)
    if isinstance(v, dict):
        return any(lone_surrogate(k) or lone_surrogate(x) for k, x in v.items())
    if isinstance(v, list):
        return any(lone_surrogate(x) for x in v)
    return False


def json_text(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def cbor_det(obj):
    """CBOR in deterministic encoding (sorted map keys, shortest heads)."""
    return cbor2.dumps(obj, canonical=True)


# --------------------------------------------------------------------- keys


def load_jwk(path):
    with open(path, "rb") as f:
        return jwk.JWK.from_json(f.read())


def thumbprint(key):
    return key.thumbprint()


def ec_private(key):
    """A cryptography EC private key from a private P-256 JWK."""
    if key.get("kty") != "EC" or key.get("crv") != "P-256":
        raise Usage("need an EC P-256 key")
    if not key.has_private:
        raise Usage("need a private JWK")
    pub = ec.EllipticCurvePublicNumbers(
        int.from_bytes(unb64u(key.get("x")), "big"),
        int.from_bytes(unb64u(key.get("y")), "big"),
        ec.SECP256R1(),
    )
    d = int.from_bytes(unb64u(key.get("d")), "big")
    return ec.EllipticCurvePrivateNumbers(d, pub).private_key()


def ec_public(key):
    """A cryptography EC public key from a P-256 or P-384 JWK."""
    curve = {"P-256": ec.SECP256R1, "P-384": ec.SECP384R1}[key.get("crv")]
    return ec.EllipticCurvePublicNumbers(
        int.from_bytes(unb64u(key.get("x")), "big"),
        int.from_bytes(unb64u(key.get("y")), "big"),
        curve(),
    ).public_key()


def verify_raw(key, alg, sig, data):
    """Verifies a COSE signature: ECDSA as raw r||s, or Ed25519."""
    try:
        if alg == "EdDSA":
            if key.get("kty") != "OKP" or key.get("crv") != "Ed25519":
                return False
            ed25519.Ed25519PublicKey.from_public_bytes(unb64u(key.get("x"))).verify(sig, data)
            return True
        size, digest, crv = {"ES256": (32, hashes.SHA256, "P-256"), "ES384": (48, hashes.SHA384, "P-384")}[alg]
        if key.get("kty") != "EC" or key.get("crv") != crv or len(sig) != 2 * size:
            return False
        der = encode_dss_signature(int.from_bytes(sig[:size], "big"), int.from_bytes(sig[size:], "big"))
        ec_public(key).verify(der, data, ec.ECDSA(digest()))
        return True
    except (InvalidSignature, ValueError):
        return False


def load_trust(path):
    with open(path, "rb") as f:
        return trust_from(json_object(f.read().decode("utf-8")))


def trust_from(doc):
    """Trust configuration: {AgentId: {"keys": [public JWK, ...]}}.

    Returns {AgentId: [(kid, alg, JWK)]}: each key is pinned to its "alg"
    (a P-256 key without one means ES256) and named by its "kid", or by its
    thumbprint when it has none.
    """
    trust = {}
    for agent, jwks in doc.items():
        if not isinstance(jwks, dict) or not isinstance(jwks.get("keys"), list):
            raise Usage("trust file: %r is not a JWK Set" % agent)
        for raw in jwks["keys"]:
            k = jwk.JWK(**raw)
            if k.has_private:
                raise Usage("trust file: %r holds a private key" % agent)
            alg = raw.get("alg") or ("ES256" if raw.get("crv") == "P-256" else None)
            if alg is None:
                raise Usage("trust file: %r: key without alg" % agent)
            kid = raw.get("kid") or thumbprint(k)
            trust.setdefault(agent, []).append((kid, alg, k))
    return trust


# ------------------------------------------------------------------ signing


def ecdsa_raw(priv, data):
    """ES256 signature as raw r||s (32 + 32 octets)."""
    r, s = decode_dss_signature(priv.sign(data, ec.ECDSA(hashes.SHA256())))
    return r.to_bytes(32, "big") + s.to_bytes(32, "big")


def sign_jws(payload, key, header=None):
    """JWS Compact with protected {"alg","kid","typ"}; jwcrypto signs."""
    if header is None:
        header = {"alg": "ES256", "kid": thumbprint(key), "typ": JWS_TYP}
    token = jws.JWS(json_text(payload).encode("utf-8"))
    token.add_signature(key, protected=json_text(header))
    return token.serialize(compact=True).encode("ascii")


def cose_sig_structure(protected, payload):
    return cbor2.dumps(["Signature1", protected, b"", payload])


def sign_cose(payload, key, protected_map=None):
    """Tagged COSE_Sign1, protected {1: -7, 3: content type, 4: kid},
    empty unprotected map, deterministic CBOR payload (RFC 9052 4.4)."""
    if protected_map is None:
        protected_map = {
            H_ALG: COSE_ES256,
            H_CTY: COSE_CONTENT_TYPE,
            H_KID: thumbprint(key).encode("ascii"),
        }
    protected = cbor_det(protected_map)
    body = cbor_det(payload)
    sig = ecdsa_raw(ec_private(key), cose_sig_structure(protected, body))
    return cbor_det(cbor2.CBORTag(COSE_TAG, [protected, {}, body, sig]))


def sign(fmt, payload, key):
    return sign_jws(payload, key) if fmt == "jws" else sign_cose(payload, key)


# ---------------------------------------------------------------- elements


class Element:
    """A signed handoff: its form ("jws" or "cose") and its exact octets.
    fmt "malformed" is a chain element that is no signed handoff at all;
    error says why. It fails step 1 of the chain check (section 5.3), which
    runs at step 6, after the offer's own checks."""

    def __init__(self, fmt, octets, error=""):
        self.fmt = fmt
        self.octets = octets
        self.error = error

    def digest(self):
        return digest_of(self.octets)


class Handoff:
    def __init__(self, offer, chain, encoding, extra=None):
        self.offer = offer
        self.chain = chain
        self.encoding = encoding
        self.extra = extra or {}


def element_from(value, encoding):
    if isinstance(value, str):
        if JWS_RE.match(value):
            return Element("jws", value.encode("ascii"))
        if encoding == "json":
            octets = unb64u(value)
            if not octets or octets[0] != 0xD2:
                raise ValueError("COSE element is not a tagged COSE_Sign1")
            return Element("cose", octets)
        raise ValueError("text element that is not a JWS")
    if isinstance(value, bytes) and encoding == "cbor":
        return Element("cose", value)
    raise ValueError("not a signed handoff: %s" % type(value).__name__)


def element_value(e, encoding):
    if e.fmt == "jws":
        return e.octets.decode("ascii")
    if encoding == "json":
        return b64u(e.octets)
    return e.octets


def parse_handoff(data):
    if not data:
        raise ValueError("empty input")
    if data[:1] in (b"{", b" ", b"\t", b"\r", b"\n"):
        encoding = "json"
        obj = json_object(data.decode("utf-8"))
    else:
        encoding = "cbor"
        obj = cbor2.loads(data)
        if not isinstance(obj, dict):
            raise ValueError("CBOR Handoff is not a map")
    if "offer" not in obj:
        raise ValueError("Handoff without offer")
    offer = element_from(obj["offer"], encoding)
    chain = []
    if "chain" in obj:
        if not isinstance(obj["chain"], list) or not obj["chain"]:
            raise ValueError("chain is not a non-empty array")
        for v in obj["chain"]:
            try:
                chain.append(element_from(v, encoding))
            except ValueError as e:
                octets = v if isinstance(v, bytes) else str(v).encode("utf-8", "surrogatepass")
                chain.append(Element("malformed", octets, str(e)))
    extra = {k: v for k, v in obj.items() if k not in ("offer", "chain")}
    return Handoff(offer, chain, encoding, extra)


def encode_handoff(h, encoding=None):
    encoding = encoding or h.encoding
    obj = dict(h.extra)
    obj["offer"] = element_value(h.offer, encoding)
    if h.chain:
        obj["chain"] = [element_value(e, encoding) for e in h.chain]
    if encoding == "json":
        return (json_text(obj) + "\n").encode("utf-8")
    return cbor_det(obj)


def read_input(path):
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise Usage(str(e))


def write_output(path, data):
    if not path or path == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    with open(path, "wb") as f:
        f.write(data)


def read_element_or_handoff(path):
    """A file holding one signed element (JWS text or COSE octets) or a
    Handoff; returns (element, handoff or None)."""
    data = read_input(path)
    if data[:1] == b"\xd2":
        return Element("cose", data), None
    text = data.strip()
    if JWS_RE.match(text.decode("ascii", "replace")):
        return Element("jws", text), None
    h = parse_handoff(data)
    return h.offer, h


# ---------------------------------------------------------------- opening


def split_jws(octets):
    try:
        text = octets.decode("ascii")
    except UnicodeDecodeError:
        raise Reject("bad-signature", "JWS is not ASCII")
    parts = text.split(".")
    if len(parts) != 3:
        raise Reject("bad-signature", "JWS compact needs exactly two dots")
    try:
        header = json_object(unb64u(parts[0]).decode("utf-8"))
        payload_octets = unb64u(parts[1])
        sig = unb64u(parts[2])
    except ValueError as e:
        raise Reject("bad-signature", "JWS segments: %s" % e)
    return header, payload_octets, sig, text


def split_cose(octets):
    try:
        msg = cbor2.loads(octets)
    except Exception as e:  # cbor2 raises several classes
        raise Reject("bad-signature", "COSE: not CBOR: %s" % e)
    if not isinstance(msg, cbor2.CBORTag) or msg.tag != COSE_TAG:
        raise Reject("bad-signature", "COSE: not a COSE_Sign1 with tag 18")
    v = msg.value
    if not isinstance(v, list) or len(v) != 4:
        raise Reject("bad-signature", "COSE_Sign1 is not an array of four")
    protected, unprotected, payload, sig = v
    if not isinstance(protected, bytes) or not isinstance(payload, bytes) or not isinstance(sig, bytes):
        raise Reject("bad-signature", "COSE_Sign1 member types")
    if not isinstance(unprotected, dict):
        raise Reject("bad-signature", "COSE unprotected header is not a map")
    try:
        header = cbor2.loads(protected) if protected else {}
    except Exception as e:
        raise Reject("bad-signature", "COSE protected header: %s" % e)
    if not isinstance(header, dict):
        raise Reject("bad-signature", "COSE protected header is not a map")
    return header, unprotected, protected, payload, sig


def decode_payload(octets, encoding):
    """The payload as sent. CBOR need not be in preferred or deterministic
    encoding (the draft asks for neither; RFC 8949 section 4.1 binds only
    encoders). Text must be UTF-8 (RFC 8259 section 8.1, RFC 8949 section
    3.1), and JSON strings must not hold lone surrogates."""
    try:
        if encoding == "json":
            obj = json_object(octets.decode("utf-8"))
            if lone_surrogate(obj):
                raise ValueError("a string with an unpaired surrogate (RFC 8259 section 8.2)")
            return obj
        obj = cbor2.loads(octets)
    except Exception as e:
        raise Reject("bad-signature", "payload: %s" % e)
    if not isinstance(obj, dict):
        raise Reject("bad-signature", "payload is not a map")
    return obj


def is_time(v):
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def check_members(p, kind):
    """The CDDL members this peer relies on (section 2)."""
    if p.get("v") != 1 or isinstance(p.get("v"), bool):
        raise Reject("bad-signature", "v is not 1")
    if p.get("type") != kind:
        raise Reject("bad-signature", "type %r, want %r" % (p.get("type"), kind))
    for name in ("iss", "aud"):
        if not isinstance(p.get(name), str):
            raise Reject("bad-signature", "%s missing or not text" % name)
    if not isinstance(p.get("hop"), str) or not HOP_RE.match(p["hop"]):
        raise Reject("bad-signature", "hop is not a HopId")
    if not is_time(p.get("iat")):
        raise Reject("bad-signature", "iat is not a Time")
    if kind == "offer":
        if not isinstance(p.get("dialog"), str):
            raise Reject("bad-signature", "dialog missing or not text")
        if not is_time(p.get("exp")):
            raise Reject("bad-signature", "exp is not a Time")
        if "prev" in p and not (isinstance(p["prev"], dict) and set(p["prev"]) == {"alg", "val"}):
            raise Reject("bad-signature", "prev is not a closed Digest")
    if "refs" in p:
        refs = p["refs"]
        if not isinstance(refs, list) or not refs:
            raise Reject("bad-signature", "refs is not a non-empty array")
        for ref in refs:
            if not isinstance(ref, dict) or not isinstance(ref.get("kind"), str):
                raise Reject("bad-signature", "a reference without kind")
            if not (isinstance(ref.get("dig"), dict) and set(ref["dig"]) == {"alg", "val"}):
                raise Reject("bad-signature", "a reference whose dig is not a closed Digest")
    if kind == "status":
        if p.get("state") not in STATES:
            raise Reject("bad-signature", "state %r" % p.get("state"))
        if not (isinstance(p.get("offer"), dict) and set(p["offer"]) == {"alg", "val"}):
            raise Reject("bad-signature", "offer is not a closed Digest")


def names_key(kid, k_kid, k):
    """Whether a kid names a trusted key: the kid the trust file gives it,
    or its RFC 7638 thumbprint, as base64url text or (COSE kid, a byte
    string) as the 32 raw octets."""
    tp = thumbprint(k)
    if isinstance(kid, bytes):
        return kid in (k_kid.encode("utf-8"), tp.encode("ascii"), unb64u(tp))
    return kid in (k_kid, tp)


def verify_with_trust(trust, iss, kid, alg, check):
    """Verifies with the keys the trust file binds to iss (section 3.4).
    kid is a hint (None when absent): the keys it names are tried first,
    then the others, each only with the one alg it is pinned to.
    untrusted-key: iss has no key, or kid names none of its keys and none
    verifies. bad-signature: a key kid names (or, without kid, every key)
    fails."""
    keys = trust.get(iss, [])
    if not keys:
        raise Reject("untrusted-key", "no trusted key for %r" % iss)
    named = [k for (k_kid, _, k) in keys if kid is not None and names_key(kid, k_kid, k)]
    others = [k for (k_kid, _, k) in keys if not (kid is not None and names_key(kid, k_kid, k))]
    pinned = {id(k): k_alg for (_, k_alg, k) in keys}
    for k in named + others:
        if pinned[id(k)] == alg and check(k):
            return
    if named or kid is None:
        raise Reject("bad-signature", "no trusted key of %r verifies the %s signature" % (iss, alg))
    raise Reject("untrusted-key", "kid %r names no key of %r, and none of them verifies" % (kid, iss))


def typ_is_handoff(typ):
    """RFC 7515 section 4.1.9: typ is a media type, compared without
    regard to case, and "application/" may be left out when the value has
    no other slash."""
    if not isinstance(typ, str):
        return False
    t = typ.lower()
    if "/" not in t:
        t = "application/" + t
    return t == "application/" + JWS_TYP


def open_element(e, trust, kind="offer"):
    """Step 1 of section 5.1: the signed form, v and type, and the signature
    with a key the trust file binds to iss. Returns the payload. Header
    parameters the draft does not forbid (jwk, x5c, x5u, jku, unknown ones)
    are ignored, never used (section 3.4)."""
    if e.fmt == "malformed":
        raise Reject("bad-signature", "not a signed handoff: %s" % e.error)
    if e.fmt == "jws":
        header, payload_octets, sig, text = split_jws(e.octets)
        if lone_surrogate(header):
            raise Reject("bad-signature", "protected header: a string with an unpaired surrogate")
        if not typ_is_handoff(header.get("typ")):
            raise Reject("bad-signature", "typ %r is not %r" % (header.get("typ"), JWS_TYP))
        if "crit" in header:
            raise Reject("bad-signature", "crit in the protected header")
        if "b64" in header:
            # RFC 7797 section 6: b64 is used only when listed in crit,
            # which the draft forbids.
            raise Reject("bad-signature", "b64 in the protected header without crit")
        alg = header.get("alg")
        if alg not in JOSE_ALGS:
            raise Reject("bad-signature", "alg %r is not an accepted asymmetric algorithm" % alg)
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise Reject("bad-signature", "kid missing")
        p = decode_payload(payload_octets, "json")
        check_members(p, kind)

        def check(k):
            token = jws.JWS()
            token.allowed_algs = [alg]
            try:
                token.deserialize(text)
                token.verify(k, alg=alg)
                return True
            except Exception:  # jwcrypto raises several classes
                return False

        verify_with_trust(trust, p["iss"], kid, alg, check)
        return p

    header, unprotected, protected, payload_octets, sig = split_cose(e.octets)
    if header.get(H_CTY) != COSE_CONTENT_TYPE:
        raise Reject("bad-signature", "content type %r" % header.get(H_CTY))
    if H_CRIT in header:
        raise Reject("bad-signature", "crit in the protected header")
    alg = COSE_ALGS.get(header.get(H_ALG)) if type(header.get(H_ALG)) is int else None
    if alg is None:
        raise Reject("bad-signature", "alg %r is not an accepted asymmetric algorithm" % header.get(H_ALG))
    # kid SHOULD be in the protected header (section 3.2); one in the
    # unprotected header is only a hint of which trusted key to try first.
    kid = header.get(H_KID, unprotected.get(H_KID))
    if kid is not None and not isinstance(kid, bytes):
        raise Reject("bad-signature", "kid is not a byte string")
    p = decode_payload(payload_octets, "cbor")
    check_members(p, kind)
    tbs = cose_sig_structure(protected, payload_octets)
    verify_with_trust(trust, p["iss"], kid, alg, lambda k: verify_raw(k, alg, sig, tbs))
    return p


def unverified_payload(e):
    if e.fmt == "malformed":
        raise Reject("bad-signature", "not a signed handoff: %s" % e.error)
    if e.fmt == "jws":
        _, octets, _, _ = split_jws(e.octets)
        return decode_payload(octets, "json")
    _, _, _, octets, _ = split_cose(e.octets)
    return decode_payload(octets, "cbor")


# --------------------------------------------------------------- checking


class Receiver:
    """A delegate running the checks of section 5.1 in order, the first
    failure ending processing. It remembers the (iss, hop) pairs of the
    offers that passed checks 1-3, with their handoff digests, for as long
    as it lives (one run of this program)."""

    def __init__(self, self_id, trust, now, dialog="", skew=60, max_lifetime=300, max_chain=16,
                 require_full=False, trusted_origins=(), allow_reentry=(), refs_policy="not-checked",
                 ref_objects=None, memory_lost_at=0):
        self.self_id = self_id
        self.trust = trust
        self.now = now
        self.dialog = dialog
        self.skew = skew
        self.max_lifetime = max_lifetime
        self.max_chain = max_chain
        self.trusted_origins = list(trusted_origins)
        self.require_full = require_full or bool(self.trusted_origins)
        self.allow_reentry = set(allow_reentry)
        self.refs_policy = refs_policy
        self.ref_objects = ref_objects or {}  # loc -> (octets, salt or None)
        self.memory_lost_at = memory_lost_at
        self.memory = {}  # (iss, hop) -> digest val

    def receive(self, data):
        out = {
            "accepted": False,
            "retransmission": False,
            "reason": "",
            "detail": "",
            "chain": "",
            "offer_digest": "",
            "iss": "",
            "aud": "",
            "hop": "",
            "dialog": "",
            "refs": [],
        }
        try:
            try:
                h = parse_handoff(data)
            except Exception as e:  # json, cbor2 and base64 raise several classes
                raise Reject("bad-signature", "not a Handoff: %s" % e)
            digest = h.offer.digest()["val"]
            out["offer_digest"] = digest
            # 1. Signed form and signature.
            o = open_element(h.offer, self.trust)
            out.update(iss=o["iss"], aud=o["aud"], hop=o["hop"], dialog=o["dialog"])
            out["refs"] = [ref_out(ref, "not checked") for ref in o.get("refs", [])]
            # 2. Audience.
            if o["aud"] != self.self_id:
                raise Reject("wrong-audience", "aud %r is not %r" % (o["aud"], self.self_id))
            # 3. Freshness, unless the hop is remembered; 4. memory.
            key = (o["iss"], o["hop"])
            if key in self.memory:
                if self.memory[key] == digest:
                    out["retransmission"] = True
                    return out
                raise Reject("equivocation", "another offer with this (iss, hop) was seen first")
            self.check_fresh(o)
            self.memory[key] = digest
            # 5. Dialog.
            if self.dialog and o["dialog"] != self.dialog:
                raise Reject("policy", "dialog %r is not %r" % (o["dialog"], self.dialog))
            # 6. Chain.
            state, origin = self.check_chain(h, o)
            out["chain"] = state
            if self.require_full and state != "full":
                raise Reject("policy", "a full chain is required; chain is %s" % state)
            if self.trusted_origins and origin not in self.trusted_origins:
                raise Reject("policy", "origin %r is not trusted" % origin)
            # 7. References.
            out["refs"], failure = self.check_refs(o)
            if failure:
                raise failure
            out["accepted"] = True
        except Reject as r:
            out["reason"], out["detail"] = r.reason, r.detail
        return out

    def check_fresh(self, o):
        """Section 5.2, and the memory-loss rule of section 8 (HC-59)."""
        if o["exp"] <= o["iat"]:
            raise Reject("stale", "exp is not later than iat")
        if o["iat"] > self.now + self.skew:
            raise Reject("stale", "iat is in the future beyond the skew")
        if o["exp"] - o["iat"] > self.max_lifetime:
            raise Reject("stale", "lifetime exceeds the maximum")
        if o["exp"] <= self.now:
            raise Reject("stale", "expired")
        lost = self.memory_lost_at
        if lost and o["iat"] < lost and self.now < lost + self.max_lifetime + self.skew:
            raise Reject("replay", "issued before this receiver lost its memory")

    def check_chain(self, h, o):
        """Section 5.3. Returns the chain's state (absent, partial, full or
        unverifiable) and the iss of its first element."""
        n = len(h.chain)
        if n > self.max_chain:
            raise Reject("too-deep", "chain of %d exceeds %d" % (n, self.max_chain))
        if n == 0:
            return ("absent" if "prev" in o else "full"), o["iss"]
        if "prev" not in o:
            raise Reject("broken-chain", "a chain is carried but the offer has no prev")
        # Check 1: every element, as in step 1. An element whose iss has no
        # trusted key verifying it makes the chain unverifiable from there
        # back; an element that is malformed or whose trusted key fails is
        # a failure wherever it sits, behind an untrusted element too.
        payloads = [None] * n
        unverifiable = False
        for i in range(n - 1, -1, -1):
            try:
                payloads[i] = open_element(h.chain[i], self.trust)
                continue
            except Reject as r:
                if r.reason != "untrusted-key":
                    raise Reject(r.reason, "chain[%d]: %s" % (i, r.detail))
                unverifiable = True
            try:
                payloads[i] = unverified_payload(h.chain[i])
                check_members(payloads[i], "offer")
            except Reject as r:
                raise Reject(r.reason, "chain[%d]: %s" % (i, r.detail))
        c = payloads + [o]
        for i in range(1, n + 1):
            if not same_digest(c[i].get("prev"), h.chain[i - 1].octets):
                raise Reject("broken-chain", "element %d: prev is not the digest of element %d" % (i, i - 1))
            if c[i - 1]["aud"] != c[i]["iss"]:
                raise Reject("broken-chain", "element %d: iss is not the aud of element %d" % (i, i - 1))
            if not (c[i - 1]["iat"] <= c[i]["iat"] <= c[i - 1]["exp"] + self.skew):
                raise Reject("broken-chain", "element %d: issued outside element %d's life" % (i, i - 1))
        seen = set()
        for i, p in enumerate(c):
            if p["iss"] in seen and p["iss"] not in self.allow_reentry:
                raise Reject("cycle", "%r is iss twice" % p["iss"])
            seen.add(p["iss"])
            if i < n and self.self_id in (p["iss"], p["aud"]) and self.self_id not in self.allow_reentry:
                raise Reject("cycle", "the receiver appears in element %d" % i)
        if unverifiable:
            state = "unverifiable"
        elif "prev" in c[0]:
            state = "partial"
        else:
            state = "full"
        return state, c[0]["iss"]

    def check_refs(self, o):
        """Section 2.2 under the receiver's policy: "not-checked", or
        "available" (check what can be obtained; a mismatch rejects), or
        "required" (every reference must verify). Returns the outcomes and
        the rejection of the first reference that fails, if any."""
        out, failure = [], None
        for ref in o.get("refs", []):
            outcome = "not checked"
            if self.refs_policy != "not-checked":
                outcome = self.ref_outcome(ref)
            out.append(ref_out(ref, outcome))
            if failure is None and outcome == "mismatch":
                failure = Reject("ref-mismatch", "reference %r does not match its object" % ref.get("loc"))
            if failure is None and outcome == "unverifiable" and self.refs_policy == "required":
                failure = Reject("unverifiable-ref", "reference %r cannot be checked" % ref.get("loc"))
        return out, failure

    def ref_outcome(self, ref):
        obj = self.ref_objects.get(ref.get("loc"))
        if obj is None or ref["dig"]["alg"] != "sha-256":
            return "unverifiable"
        octets, salt = obj
        if ref["kind"] == "digest":
            material = octets
        elif ref["kind"] == "salted-digest" and salt is not None:
            material = salt + octets
        else:
            return "unverifiable"
        return "verified" if same_digest(ref["dig"], material) else "mismatch"


def ref_out(ref, outcome):
    return {"kind": ref["kind"], "dig": ref["dig"]["val"], "loc": ref.get("loc", ""), "outcome": outcome}


# ------------------------------------------------------------ subcommands


def cmd_keygen(args):
    key = jwk.JWK.generate(kty="EC", crv="P-256")
    kid = thumbprint(key)
    priv = json_object(key.export_private())
    priv.update(alg="ES256", kid=kid, use="sig")
    pub = json_object(key.export_public())
    pub.update(alg="ES256", kid=kid, use="sig")
    fd = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(priv, indent=2) + "\n")
    print(json_text(pub))
    return EXIT_OK


def new_hop():
    return b64u(os.urandom(16))


def cmd_offer(args):
    key = load_jwk(args.key)
    now = args.now if args.now is not None else int(time.time())
    iat = args.iat if args.iat is not None else now
    exp = args.exp if args.exp is not None else iat + args.ttl
    p = {
        "v": 1,
        "type": "offer",
        "hop": args.hop or new_hop(),
        "dialog": args.dialog,
        "iss": args.iss,
        "aud": args.aud,
        "iat": iat,
        "exp": exp,
    }
    if args.task:
        p["task"] = args.task
    if args.obo:
        p["obo"] = {"sub": args.obo}
    if args.grant:
        p["grant"] = digest_of(args.grant.encode("utf-8"))
    if args.ref:
        p["refs"] = []
        for spec in args.ref:
            path, _, loc = spec.partition("=")
            ref = {"kind": "digest", "dig": digest_of(read_input(path))}
            if loc:
                ref["loc"] = loc
            p["refs"].append(ref)
    for spec in args.extra or []:
        name, _, value = spec.partition("=")
        p[name] = json.loads(value)
    chain = []
    encoding = args.encoding
    if args.from_file:
        prior = parse_handoff(read_input(args.from_file))
        p["prev"] = prior.offer.digest()
        chain = prior.chain + [prior.offer]
    offer = Element(args.format, sign(args.format, p, key))
    write_output(args.out, encode_handoff(Handoff(offer, chain, encoding), encoding))
    return EXIT_OK


def cmd_status(args):
    key = load_jwk(args.key)
    offer, _ = read_element_or_handoff(args.offer)
    o = unverified_payload(offer)
    now = args.now if args.now is not None else int(time.time())
    p = {
        "v": 1,
        "type": "status",
        "hop": o["hop"],
        "offer": offer.digest(),
        "iss": args.iss,
        "aud": args.aud,
        "iat": now,
        "state": args.state,
    }
    if args.reason:
        p["reason"] = args.reason
    octets = sign(args.format, p, key)
    write_output(args.out, octets if args.format == "cose" else octets + b"\n")
    return EXIT_OK


def load_memory(path):
    """The (iss, hop) memory kept in --replay-db: a JSON file, absent at
    first."""
    if not path or not os.path.exists(path):
        return {}
    with open(path, "rb") as f:
        doc = json.loads(f.read().decode("utf-8"))
    return {(iss, hop): dig for iss, hop, dig in doc["seen"]}


def save_memory(path, memory):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"seen": sorted([iss, hop, dig] for (iss, hop), dig in memory.items())}, f)
    os.replace(tmp, path)


def cmd_verify(args):
    objects = {}
    for spec in args.ref_object or []:
        loc, _, path = spec.partition("=")
        objects[loc] = (read_input(path), None)
    for spec in args.ref_salt or []:
        loc, _, salt = spec.partition("=")
        if loc not in objects:
            raise Usage("--ref-salt %r: no --ref-object for %r" % (spec, loc))
        objects[loc] = (objects[loc][0], unb64u(salt))
    for name in ("skew", "max_lifetime", "max_chain"):
        if getattr(args, name) < 0:
            raise Usage("--%s must not be negative" % name.replace("_", "-"))
    policy = args.refs or ("available" if objects else "not-checked")
    r = Receiver(
        args.self_id,
        load_trust(args.trust),
        args.now if args.now is not None else int(time.time()),
        dialog=args.dialog or "",
        skew=args.skew,
        max_lifetime=args.max_lifetime,
        max_chain=args.max_chain,
        require_full=args.require_chain,
        trusted_origins=args.trusted_origin or (),
        allow_reentry=args.allow_reentry or (),
        refs_policy=policy,
        ref_objects=objects,
        memory_lost_at=args.memory_lost_at or 0,
    )
    r.memory = load_memory(args.replay_db)
    out = r.receive(read_input(args.handoff))
    if args.replay_db:
        save_memory(args.replay_db, r.memory)
    print(json_text(out))
    return EXIT_OK if out["accepted"] else EXIT_NO


def cmd_vectors(args):
    """Runs conformance vector files (the format of testdata/vectors/README.md)
    and prints, for each, what this receiver decided, as one JSON array."""
    results = []
    for path in args.files:
        v = json_object(read_input(path).decode("utf-8"))
        rc = v["receiver"]
        objects = {}
        for loc, obj in rc.get("ref_objects", {}).items():
            salt = unb64u(obj["salt_b64"]) if obj.get("salt_b64") else None
            objects[loc] = (unb64u(obj["octets_b64"]), salt)
        policy = {"check-available": "available"}.get(rc["refs_policy"], rc["refs_policy"])
        r = Receiver(
            rc["self"],
            trust_from(v["trust"]),
            rc["now"],
            dialog=rc.get("dialog", ""),
            skew=rc["skew"],
            max_lifetime=rc["max_lifetime"],
            max_chain=rc["max_chain"],
            require_full=rc.get("require_full_chain", False),
            trusted_origins=rc.get("trusted_origins", ()),
            allow_reentry=rc.get("allow_reentry", ()),
            refs_policy=policy,
            ref_objects=objects,
            memory_lost_at=rc.get("memory_lost_at", 0),
        )
        for prior in v.get("prior", []):
            r.receive(unb64u(prior))
        out = r.receive(unb64u(v["input"]["handoff_b64"]))
        out["refs"] = [ref["outcome"] for ref in out["refs"]]
        out["file"] = os.path.basename(path)
        results.append(out)
    print(json.dumps(results, indent=1))
    return EXIT_OK


def cmd_verify_status(args):
    trust = load_trust(args.trust)
    offer, _ = read_element_or_handoff(args.offer)
    st_elem, _ = read_element_or_handoff(args.status)
    out = {"valid": False, "reason": "", "detail": "", "state": "", "iss": "", "aud": "", "offer": ""}
    try:
        o = unverified_payload(offer)
        s = open_element(st_elem, trust, kind="status")
        out.update(state=s["state"], iss=s["iss"], aud=s["aud"], offer=s["offer"].get("val", ""))
        # Section 5.4: the delegate answers, except "canceled", which the
        # delegator sends; the status is for the other party of the hop.
        sender, receiver = (o["iss"], o["aud"]) if s["state"] == "canceled" else (o["aud"], o["iss"])
        if s["iss"] != sender:
            raise Reject("wrong-issuer", "status iss %r, want %r" % (s["iss"], sender))
        if s["aud"] != receiver:
            raise Reject("wrong-audience", "status aud %r, want %r" % (s["aud"], receiver))
        if not same_digest(s["offer"], offer.octets):
            raise Reject("wrong-offer", "status.offer is not the digest of the offer")
        if s["hop"] != o["hop"]:
            raise Reject("wrong-hop", "status hop %r, offer hop %r" % (s["hop"], o["hop"]))
        out["valid"] = True
    except Reject as r:
        out["reason"], out["detail"] = r.reason, r.detail
    print(json_text(out))
    return EXIT_OK if out["valid"] else EXIT_NO


def cmd_digest(args):
    e, _ = read_element_or_handoff(args.input)
    print(e.digest()["val"])
    return EXIT_OK


# ------------------------------------------------------------------ tamper


def flip_signature(e):
    """Flips one bit in the middle of the signature."""
    if e.fmt == "jws":
        h, p, s = e.octets.decode("ascii").split(".")
        sig = bytearray(unb64u(s))
        sig[len(sig) // 2] ^= 0x01
        return Element("jws", ("%s.%s.%s" % (h, p, b64u(bytes(sig)))).encode("ascii"))
    # The signature is the last byte string of the message: its 64 octets
    # end the encoding.
    octets = bytearray(e.octets)
    octets[-32] ^= 0x01
    return Element("cose", bytes(octets))


def high_s(e):
    """The same signature with s replaced by n - s: still valid ECDSA."""

    def twin(sig):
        s = int.from_bytes(sig[32:], "big")
        return sig[:32] + (P256_N - s).to_bytes(32, "big")

    if e.fmt == "jws":
        h, p, s = e.octets.decode("ascii").split(".")
        return Element("jws", ("%s.%s.%s" % (h, p, b64u(twin(unb64u(s))))).encode("ascii"))
    msg = cbor2.loads(e.octets)
    prot, unprot, payload, sig = msg.value
    return Element("cose", cbor_det(cbor2.CBORTag(COSE_TAG, [prot, unprot, payload, twin(sig)])))


def swap_payload(e, changes):
    """Changes payload members WITHOUT signing again."""
    if e.fmt == "jws":
        h, p, s = e.octets.decode("ascii").split(".")
        payload = json_object(unb64u(p).decode("utf-8"))
        payload.update(changes)
        p = b64u(json_text(payload).encode("utf-8"))
        return Element("jws", ("%s.%s.%s" % (h, p, s)).encode("ascii"))
    msg = cbor2.loads(e.octets)
    prot, unprot, body, sig = msg.value
    payload = cbor2.loads(body)
    payload.update(changes)
    return Element("cose", cbor_det(cbor2.CBORTag(COSE_TAG, [prot, unprot, cbor_det(payload), sig])))


def alg_none(e):
    """alg "none" (JWS) or a MAC algorithm, HMAC 256/256 (COSE), keeping the
    payload and the old signature octets."""
    if e.fmt == "jws":
        h, p, s = e.octets.decode("ascii").split(".")
        header = json_object(unb64u(h).decode("utf-8"))
        header["alg"] = "none"
        return Element("jws", ("%s.%s.%s" % (b64u(json_text(header).encode("utf-8")), p, s)).encode("ascii"))
    msg = cbor2.loads(e.octets)
    prot, unprot, body, sig = msg.value
    header = cbor2.loads(prot)
    header[H_ALG] = 5  # HMAC 256/256
    return Element("cose", cbor_det(cbor2.CBORTag(COSE_TAG, [cbor_det(header), unprot, body, sig])))


def resign(e, key, changes, header_changes=None):
    """Signs the element's payload again with key, after changes."""
    payload = unverified_payload(e)
    payload.update(changes)
    if e.fmt == "jws":
        header = {"alg": "ES256", "kid": thumbprint(key), "typ": JWS_TYP}
        header.update(header_changes or {})
        return Element("jws", sign_jws(payload, key, header))
    header = {H_ALG: COSE_ES256, H_CTY: COSE_CONTENT_TYPE, H_KID: thumbprint(key).encode("ascii")}
    for k, v in (header_changes or {}).items():
        header[int(k)] = v
    return Element("cose", sign_cose(payload, key, header))


TAMPER_KINDS = (
    "flip-sig",
    "high-s",
    "payload",
    "alg-none",
    "wrong-typ",
    "wrong-aud",
    "expired",
    "broken-prev",
    "reorder",
    "drop",
    "strip-chain",
)


def cmd_tamper(args):
    elem, h = read_element_or_handoff(args.input)
    if h is None:
        # A bare signed element (a status, say): only the element itself.
        if args.kind in ("reorder", "drop", "strip-chain") or args.index is not None:
            raise Usage("tamper %s: the input is a single element, not a Handoff" % args.kind)
        h = Handoff(elem, [], None)
    idx = args.index
    target = h.offer if idx is None else h.chain[idx]
    kind = args.kind

    def need_key():
        if not args.key:
            raise Usage("tamper %s signs again: --key KEY.jwk is required" % kind)
        return load_jwk(args.key)

    if kind == "flip-sig":
        target = flip_signature(target)
    elif kind == "high-s":
        target = high_s(target)
    elif kind == "payload":
        target = swap_payload(target, {"aud": args.aud or "spiffe://x.example/agent/mallory"})
    elif kind == "alg-none":
        target = alg_none(target)
    elif kind == "wrong-typ":
        hc = {"typ": "JWT"} if target.fmt == "jws" else {H_CTY: "application/cbor"}
        target = resign(target, need_key(), {}, hc)
    elif kind == "wrong-aud":
        target = resign(target, need_key(), {"aud": args.aud or "spiffe://x.example/agent/mallory"})
    elif kind == "expired":
        p = unverified_payload(target)
        target = resign(target, need_key(), {"iat": p["iat"] - 3600, "exp": p["exp"] - 3600})
    elif kind == "broken-prev":
        p = unverified_payload(target)
        if "prev" not in p:
            raise Usage("tamper broken-prev: the element has no prev")
        val = bytearray(unb64u(p["prev"]["val"]))
        val[0] ^= 0x01
        target = resign(target, need_key(), {"prev": {"alg": "sha-256", "val": b64u(bytes(val))}})
    elif kind == "reorder":
        if len(h.chain) < 2:
            raise Usage("tamper reorder: the chain has fewer than two elements")
        h.chain[0], h.chain[1] = h.chain[1], h.chain[0]
    elif kind == "drop":
        if not h.chain:
            raise Usage("tamper drop: no chain")
        del h.chain[len(h.chain) // 2 if idx is None else idx]
        idx, target = None, h.offer
    elif kind == "strip-chain":
        h.chain = []
    else:
        raise Usage("tamper: unknown kind %r (want one of %s)" % (kind, ", ".join(TAMPER_KINDS)))

    if idx is None:
        h.offer = target
    else:
        h.chain[idx] = target
    if h.encoding is None:
        write_output(args.out, target.octets)
    else:
        write_output(args.out, encode_handoff(h))
    return EXIT_OK


# -------------------------------------------------------------------- serve


def cmd_serve(args):
    """Runs one subcommand per line of standard input, a JSON array of its
    arguments, and answers each with one line, a JSON object: "code" (its
    exit status), "stdout" (base64) and "stderr". It saves a test suite the
    start-up of one interpreter per command."""
    real_out, real_err = sys.stdout, sys.stderr
    for line in sys.stdin:
        argv = json.loads(line)
        buf, err = io.BytesIO(), io.StringIO()
        out = io.TextIOWrapper(buf, encoding="utf-8", write_through=True)
        sys.stdout, sys.stderr = out, err
        try:
            code = main(argv)
        except SystemExit as e:  # argparse on a usage error
            code = e.code if isinstance(e.code, int) else EXIT_USAGE
        except Exception:
            traceback.print_exc()
            code = 70
        finally:
            out.flush()
            sys.stdout, sys.stderr = real_out, real_err
        answer = {"code": code, "stdout": base64.b64encode(buf.getvalue()).decode("ascii"), "stderr": err.getvalue()}
        real_out.write(json.dumps(answer) + "\n")
        real_out.flush()
    return EXIT_OK


# --------------------------------------------------------------------- main


def parser():
    ap = argparse.ArgumentParser(prog="peer.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("keygen", help="P-256 key pair: private JWK to --out, public JWK on stdout")
    p.add_argument("--out", required=True)
    p.set_defaults(run=cmd_keygen)

    p = sub.add_parser("offer", help="sign an offer and write a Handoff")
    p.add_argument("--key", required=True)
    p.add_argument("--iss", required=True)
    p.add_argument("--aud", required=True)
    p.add_argument("--dialog", required=True)
    p.add_argument("--task")
    p.add_argument("--obo", help="obo.sub")
    p.add_argument("--grant", help="a credential string; grant is its digest")
    p.add_argument("--ref", action="append", help="FILE[=LOC]: a \"digest\" reference over FILE")
    p.add_argument("--extra", action="append", help="NAME=JSON: an extra payload member")
    p.add_argument("--hop", help="hop identifier (default: 16 random octets)")
    p.add_argument("--now", type=int)
    p.add_argument("--iat", type=int)
    p.add_argument("--exp", type=int)
    p.add_argument("--ttl", type=int, default=120)
    p.add_argument("--from", dest="from_file", help="the Handoff this offer passes on")
    p.add_argument("--format", choices=("jws", "cose"), default="jws")
    p.add_argument("--encoding", choices=("json", "cbor"), default="json")
    p.add_argument("--out")
    p.set_defaults(run=cmd_offer)

    p = sub.add_parser("status", help="sign a status answering an offer")
    p.add_argument("--key", required=True)
    p.add_argument("--iss", required=True)
    p.add_argument("--aud", required=True)
    p.add_argument("--offer", required=True)
    p.add_argument("--state", required=True, choices=STATES)
    p.add_argument("--reason")
    p.add_argument("--now", type=int)
    p.add_argument("--format", choices=("jws", "cose"), default="jws")
    p.add_argument("--out")
    p.set_defaults(run=cmd_status)

    p = sub.add_parser("verify", help="run the receive checks on a Handoff")
    p.add_argument("--self", dest="self_id", required=True)
    p.add_argument("--trust", required=True)
    p.add_argument("--now", type=int)
    p.add_argument("--dialog")
    p.add_argument("--skew", type=int, default=60)
    p.add_argument("--max-lifetime", type=int, default=300)
    p.add_argument("--max-chain", type=int, default=16)
    p.add_argument("--require-chain", action="store_true")
    p.add_argument("--trusted-origin", action="append", help="an AgentId the chain may start from")
    p.add_argument("--allow-reentry", action="append", help="an AgentId that may appear more than once")
    p.add_argument("--ref-object", action="append", help="LOC=FILE: the object of references whose loc is LOC")
    p.add_argument("--ref-salt", action="append", help="LOC=SALT: the base64url salt delivered with the object at LOC")
    p.add_argument("--replay-db", help="FILE keeping the (iss, hop) memory across runs (JSON; created when missing)")
    p.add_argument("--memory-lost-at", type=int, help="UNIX time this receiver lost its (iss, hop) memory (section 8)")
    p.add_argument("--refs", choices=("not-checked", "available", "required"),
                   help="reference policy (default: available with --ref-object, else not-checked)")
    p.add_argument("handoff")
    p.set_defaults(run=cmd_verify)

    p = sub.add_parser("verify-status", help="check a signed status against its offer")
    p.add_argument("--trust", required=True)
    p.add_argument("--offer", required=True)
    p.add_argument("status")
    p.set_defaults(run=cmd_verify_status)

    p = sub.add_parser("tamper", help="write a modified copy of a Handoff")
    p.add_argument("--kind", required=True, choices=TAMPER_KINDS)
    p.add_argument("--key", help="signing key, for kinds that sign again")
    p.add_argument("--aud", help="the audience to put in (payload, wrong-aud)")
    p.add_argument("--index", type=int, help="act on chain[INDEX] instead of the offer")
    p.add_argument("--out")
    p.add_argument("input")
    p.set_defaults(run=cmd_tamper)

    p = sub.add_parser("vectors", help="run conformance vector files as a receiver")
    p.add_argument("files", nargs="+")
    p.set_defaults(run=cmd_vectors)

    p = sub.add_parser("serve", help="run one subcommand per line of standard input")
    p.set_defaults(run=cmd_serve)

    p = sub.add_parser("digest", help="print the handoff digest of an offer")
    p.add_argument("input")
    p.set_defaults(run=cmd_digest)
    return ap


def main(argv):
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except Usage as e:
        print("peer.py %s: %s" % (args.cmd, e), file=sys.stderr)
        return EXIT_USAGE
    except (OSError, ValueError, KeyError, IndexError) as e:
        print("peer.py %s: %s" % (args.cmd, e), file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
