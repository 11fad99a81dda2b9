package evidence

import (
	"errors"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/agentproto/handoff/digest"
)

// The idempotency key of a call (issue 33). A call is named by the hop it
// is made under, its action and tool, its operation id and idempotency
// key, and the digest of its canonical arguments; its key is the SHA-256
// of the RFC 8785 (JCS) form of the JSON object
//
//	{"action": A, "args": D, "hop": H, "idempotency_key": K,
//	 "operation_id": O, "tool": T}
//
// where H is Call.Hop as Digest.String gives it ("sha-256:..."), D is
// ArgsDigest(Call.Args) the same way, and every other member is the
// call's string as given ("" when not set). The key depends on nothing else: it is the same across
// retransmission, retry and resume of one call, on every replica, and
// another implementation computes it from these six strings. Arguments
// that differ only in member order, white space or escapes have one
// digest, and so one key; other arguments, another action or tool, or
// another hop (authority that changed) give another key.

// MaxArgsSize bounds a call's arguments, in octets, as DefaultMaxSize
// bounds a package: canonicalizing them costs a small multiple of it.
const MaxArgsSize = DefaultMaxSize

// ErrMalformedCall: a call's arguments are not one I-JSON value (RFC 7493:
// valid UTF-8, no duplicate member names) of at most MaxArgsSize octets,
// or one of its names is not valid UTF-8, so it has no canonical form and
// no key. The host answers it as a malformed request; nothing runs.
var ErrMalformedCall = errors.New("evidence: malformed call")

// ArgsDigest returns the digest of a call's arguments: SHA-256 over their
// RFC 8785 (JCS) form. Two encodings of one value have one digest. A call
// without arguments (args empty) has the SHA-256 of no octets: every call
// has an arguments' digest, which its key and its approval bind.
func ArgsDigest(args []byte) (digest.Digest, error) {
	if len(args) == 0 {
		return digest.SHA256(nil), nil
	}
	if len(args) > MaxArgsSize {
		return digest.Digest{}, fmt.Errorf("%w: arguments of %d octets, over %d", ErrMalformedCall, len(args), MaxArgsSize)
	}
	_, c, err := canonicalize(args)
	if err != nil {
		return digest.Digest{}, fmt.Errorf("%w: arguments: %w", ErrMalformedCall, err)
	}
	return digest.SHA256(c), nil
}

// Key returns the call's idempotency key (see above). A host's middleware
// derives it from the call it serves and carries it with the call's pause
// and its resumption; Guard.Do derives it itself.
func (c Call) Key() (digest.Digest, error) {
	b, err := c.bind(c.Hop.String())
	return b.key, err
}

// binding is what a call is bound by: its arguments' digest and its key,
// as strings for the ledger.
type binding struct {
	args, key digest.Digest
	argsS     string
	keyS      string
}

// bind binds c, whose hop is hop (c.Hop as Digest.String gives it).
func (c Call) bind(hop string) (binding, error) {
	var b binding
	d, err := ArgsDigest(c.Args)
	if err != nil {
		return binding{}, err
	}
	b.args, b.argsS = d, d.String()
	// The members in the order of their names (RFC 8785 section 3.2.3:
	// all are ASCII).
	enc := make([]byte, 0, 192+len(c.Action)+len(c.Tool)+len(c.OperationID)+len(c.IdempotencyKey))
	for i, m := range [6]struct{ name, value string }{
		{"action", c.Action}, {"args", b.argsS}, {"hop", hop},
		{"idempotency_key", c.IdempotencyKey}, {"operation_id", c.OperationID}, {"tool", c.Tool},
	} {
		if i == 0 {
			enc = append(enc, '{')
		} else {
			enc = append(enc, ',')
		}
		enc = append(append(append(enc, '"'), m.name...), '"', ':')
		if enc, err = jsontext.AppendQuote(enc, m.value); err != nil {
			return binding{}, fmt.Errorf("%w: %s is not valid UTF-8", ErrMalformedCall, m.name)
		}
	}
	b.key = digest.SHA256(append(enc, '}'))
	b.keyS = b.key.String()
	return b, nil
}
