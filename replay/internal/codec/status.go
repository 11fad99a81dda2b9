package codec

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/agentproto/handoff/replay"
)

// Version3 is the first octet of a record encoded by EncodeKeyed: the
// layout of version 2, with the status field holding a compact form of
// the status octets that is decoded with the record's key and digest.
//
// The status field of version 3 is a uvarint length n, then n octets:
// none when the record has no status, else a form octet and its data:
//
//	0x00  the status octets as they are
//	0x01  a JWS compact serialization (header "." payload "." signature,
//	      each unpadded base64url) kept as its three parts decoded:
//	      uvarint len(header), uvarint len(payload), then header and
//	      payload as copies from the record's dictionary (below) and
//	      literals, then the signature's octets to the end
//
// Form 0x01 is written only when each part re-encodes to exactly the
// octets it came from and the whole decodes back to the status octets as
// given (HC-39: the status is kept as signed); any other status is kept in
// form 0x00.
//
// The copies and literals are a sequence of operations, each an octet c:
// c < 0x80 is followed by c+1 literal octets; c >= 0x80 is a copy of
// (c&0x7f)+minCopy octets from the dictionary, at the uvarint offset that
// follows. The dictionary of a record is
//
//	base64url(digest) || key.Hop || key.Iss || statusDict
//
// (unpadded base64url): a status names its hop, its offer's digest and,
// as its aud, the offer's iss, all of which the record's key and digest
// already hold, and statusDict holds the JSON members the library writes.
// statusDict is part of the format and never changes; another dictionary
// would be another form.
const Version3 = 3

// The forms of a version 3 status field.
const (
	formRaw = 0x00
	formJWS = 0x01
)

// minCopy is the shortest copy of the status field's operations.
const minCopy = 3

// statusDict is the fixed part of the dictionary of a version 3 status:
// the header and payload members of the JWS statuses this library signs.
const statusDict = `{"alg":"ES256","kid":"","typ":"agent-handoff+jwt"}` +
	`{"v":1,"type":"status","hop":"","offer":{"alg":"sha-256","val":""},"iss":"spiffe://","aud":"https://","iat":17,"state":"accepted"}` +
	`"rejected"}"completed"}"failed"}"canceled"},"reason":"","detail":"","refs":[` +
	`"EdDSA""ES384""ES512""PS256""RS256"`

// maxStatus bounds the octets a version 3 status field decodes to.
const maxStatus = 1 << 20

var b64 = base64.RawURLEncoding.Strict()

// dictionary returns the dictionary of a version 3 status of the record
// (k, digest).
func dictionary(k replay.Key, digest []byte) []byte {
	d := make([]byte, 0, b64.EncodedLen(len(digest))+len(k.Hop)+len(k.Iss)+len(statusDict))
	d = b64.AppendEncode(d, digest)
	d = append(d, k.Hop...)
	d = append(d, k.Iss...)
	return append(d, statusDict...)
}

// appendStatus appends the version 3 status field of status to b.
func appendStatus(b []byte, k replay.Key, digest, status []byte) []byte {
	if len(status) == 0 {
		return append(b, 0)
	}
	if f, ok := compactJWS(k, digest, status); ok {
		b = binary.AppendUvarint(b, uint64(len(f)))
		return append(b, f...)
	}
	b = binary.AppendUvarint(b, uint64(1+len(status)))
	b = append(b, formRaw)
	return append(b, status...)
}

// compactJWS returns form 0x01 of status, or false when status is not a
// JWS compact serialization that the form keeps exactly, or the form is
// no shorter.
func compactJWS(k replay.Key, digest, status []byte) ([]byte, bool) {
	h, rest, ok1 := bytes.Cut(status, []byte("."))
	p, s, ok2 := bytes.Cut(rest, []byte("."))
	if !ok1 || !ok2 || bytes.IndexByte(s, '.') >= 0 {
		return nil, false
	}
	var parts [3][]byte
	for i, enc := range [][]byte{h, p, s} {
		raw, err := b64.AppendDecode(nil, enc)
		if err != nil || b64.EncodedLen(len(raw)) != len(enc) {
			return nil, false
		}
		parts[i] = raw
	}
	hp := append(parts[0], parts[1]...)
	f := []byte{formJWS}
	f = binary.AppendUvarint(f, uint64(len(parts[0])))
	f = binary.AppendUvarint(f, uint64(len(parts[1])))
	f = appendOps(f, hp, dictionary(k, digest))
	f = append(f, parts[2]...)
	if len(f) >= 1+len(status) {
		return nil, false
	}
	// The form is kept only if it gives back the octets as signed.
	if back, err := expandStatus(k, digest, f); err != nil || !bytes.Equal(back, status) {
		return nil, false
	}
	return f, true
}

// appendOps appends to b the operations that rebuild data from dict:
// at each position the longest copy from dict of at least minCopy octets
// among the first maxChain places in dict that start with the same three
// octets, else a literal. The bound keeps the work linear in len(data)
// whatever the data and the dictionary (a hop or an iss of one repeated
// character included).
func appendOps(b, data, dict []byte) []byte {
	// Where each three-octet prefix occurs in dict, as chains of positions.
	var head [1 << hashBits]int32
	for i := range head {
		head[i] = -1
	}
	next := make([]int32, len(dict))
	for i := len(dict) - minCopy; i >= 0; i-- {
		h := hash3(dict[i:])
		next[i] = head[h]
		head[h] = int32(i)
	}
	lit := -1 // start of the pending literal, or -1
	flush := func(end int) {
		for lit >= 0 && lit < end {
			n := min(end-lit, 0x80)
			b = append(b, byte(n-1))
			b = append(b, data[lit:lit+n]...)
			lit += n
		}
		lit = -1
	}
	const longest = 0x7f + minCopy
	for i := 0; i < len(data); {
		best, at := 0, 0
		if i+minCopy <= len(data) {
			for j, c := head[hash3(data[i:])], 0; j >= 0 && c < maxChain && best < longest; j, c = next[j], c+1 {
				n := 0
				for i+n < len(data) && int(j)+n < len(dict) && data[i+n] == dict[int(j)+n] && n < longest {
					n++
				}
				if n > best {
					best, at = n, int(j)
				}
			}
		}
		if best < minCopy {
			if lit < 0 {
				lit = i
			}
			i++
			continue
		}
		flush(i)
		b = append(b, 0x80|byte(best-minCopy))
		b = binary.AppendUvarint(b, uint64(at))
		i += best
	}
	flush(len(data))
	return b
}

// The index of appendOps.
const (
	hashBits = 10
	maxChain = 16
)

func hash3(b []byte) uint32 {
	return (uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2])) * 2654435761 >> (32 - hashBits)
}

// expandStatus returns the status octets of a version 3 status field's
// contents f (form octet onwards).
func expandStatus(k replay.Key, digest, f []byte) ([]byte, error) {
	switch f[0] {
	case formRaw:
		return append([]byte(nil), f[1:]...), nil
	case formJWS:
	default:
		return nil, fmt.Errorf("%w: status form %#x", ErrMalformed, f[0])
	}
	f = f[1:]
	nh, k1 := binary.Uvarint(f)
	if k1 <= 0 || nh > maxStatus {
		return nil, fmt.Errorf("%w: status header length", ErrMalformed)
	}
	np, k2 := binary.Uvarint(f[k1:])
	if k2 <= 0 || np > maxStatus || nh+np > maxStatus {
		return nil, fmt.Errorf("%w: status payload length", ErrMalformed)
	}
	f = f[k1+k2:]
	want := int(nh + np)
	if want > len(f)*(0x7f+minCopy) {
		// No operations of len(f) octets give that many.
		return nil, fmt.Errorf("%w: status header and payload longer than their operations give", ErrMalformed)
	}
	dict := dictionary(k, digest)
	hp := make([]byte, 0, want)
	for len(hp) < want {
		if len(f) == 0 {
			return nil, fmt.Errorf("%w: status ends in its header or payload", ErrMalformed)
		}
		c := f[0]
		f = f[1:]
		if c < 0x80 {
			n := int(c) + 1
			if n > len(f) || len(hp)+n > want {
				return nil, fmt.Errorf("%w: status literal past its end", ErrMalformed)
			}
			hp = append(hp, f[:n]...)
			f = f[n:]
			continue
		}
		n := int(c&0x7f) + minCopy
		at, kn := binary.Uvarint(f)
		if kn <= 0 || at > uint64(len(dict)) || int(at)+n > len(dict) || len(hp)+n > want {
			return nil, fmt.Errorf("%w: status copy out of range", ErrMalformed)
		}
		f = f[kn:]
		hp = append(hp, dict[at:int(at)+n]...)
	}
	out := make([]byte, 0, b64.EncodedLen(want)+b64.EncodedLen(len(f))+2)
	out = b64.AppendEncode(out, hp[:nh])
	out = append(out, '.')
	out = b64.AppendEncode(out, hp[nh:])
	out = append(out, '.')
	return b64.AppendEncode(out, f), nil
}

var errNeedsKey = errors.New("version 3 is decoded with its key (DecodeKeyed)")
