// Package interop holds the interoperability tests of the handoff command
// against an independent implementation of the draft: a Python program
// (peer/peer.py) that shares no code with this module and is built on
// Debian's jwcrypto, cbor2 and cryptography packages.
//
// The tests build cmd/handoff, then exchange keys, offers, chains and
// statuses with the peer in both directions, in both signed forms (JWS and
// COSE) and both encodings of the Handoff object (JSON and CBOR), and
// assert the exact reason codes and exit statuses of both verifiers. See
// README.md for how to run them.
package interop
