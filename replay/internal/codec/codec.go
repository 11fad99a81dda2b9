// Package codec is the binary encoding of a replay.Record that the durable
// and shared stores keep as a value.
//
// Version 1 of the encoding is, in order:
//
//	version  1 octet, 0x01
//	digest   32 octets
//	flags    1 octet: bit 0 set when the record has an expiry; other bits 0
//	seconds  8 octets, big-endian two's complement: Expires.Unix(), or 0
//	nanos    4 octets, big-endian: Expires.Nanosecond(), below 1e9, or 0
//	state    uvarint length, then that many octets
//	status   uvarint length, then that many octets
//
// The digest sits at a fixed offset (octets 2 to 33 counting from 1) so a
// server-side script can compare it without decoding the rest. Decode
// rejects anything else (unknown version or flags, short or trailing input,
// non-minimal or oversized lengths) with an error wrapping ErrMalformed.
package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/agentproto/handoff/replay"
)

// Version is the first octet of an encoded record.
const Version = 1

// DigestSize is the length of the digest held in a record.
const DigestSize = 32

// DigestOffset is the offset of the digest in an encoded record.
const DigestOffset = 1

const (
	flagExpires = 1 << 0
	headerSize  = 1 + DigestSize + 1 + 8 + 4
)

// ErrMalformed marks a value that is not a valid encoded record.
var ErrMalformed = errors.New("malformed record encoding")

// Encode returns the encoding of rec. It does not check rec; callers
// validate it first.
func Encode(rec replay.Record) []byte {
	b := make([]byte, headerSize, headerSize+2*binary.MaxVarintLen64+len(rec.State)+len(rec.Status))
	b[0] = Version
	copy(b[DigestOffset:DigestOffset+DigestSize], rec.Digest)
	if !rec.Expires.IsZero() {
		b[1+DigestSize] = flagExpires
		binary.BigEndian.PutUint64(b[2+DigestSize:], uint64(rec.Expires.Unix()))
		binary.BigEndian.PutUint32(b[10+DigestSize:], uint32(rec.Expires.Nanosecond()))
	}
	b = binary.AppendUvarint(b, uint64(len(rec.State)))
	b = append(b, rec.State...)
	b = binary.AppendUvarint(b, uint64(len(rec.Status)))
	b = append(b, rec.Status...)
	return b
}

// Decode parses an encoded record. The returned record does not alias b.
func Decode(b []byte) (replay.Record, error) {
	var rec replay.Record
	if len(b) < headerSize {
		return rec, fmt.Errorf("%w: %d octets, want at least %d", ErrMalformed, len(b), headerSize)
	}
	if b[0] != Version {
		return rec, fmt.Errorf("%w: version %d", ErrMalformed, b[0])
	}
	rec.Digest = append([]byte(nil), b[DigestOffset:DigestOffset+DigestSize]...)
	flags := b[1+DigestSize]
	sec := int64(binary.BigEndian.Uint64(b[2+DigestSize:]))
	nsec := binary.BigEndian.Uint32(b[10+DigestSize:])
	switch flags {
	case 0:
		if sec != 0 || nsec != 0 {
			return replay.Record{}, fmt.Errorf("%w: expiry time without expiry flag", ErrMalformed)
		}
	case flagExpires:
		if nsec >= 1e9 {
			return replay.Record{}, fmt.Errorf("%w: nanoseconds out of range", ErrMalformed)
		}
		rec.Expires = time.Unix(sec, int64(nsec))
		if rec.Expires.IsZero() {
			// The zero time is reserved for "no expiry".
			return replay.Record{}, fmt.Errorf("%w: expiry flag with the zero time", ErrMalformed)
		}
	default:
		return replay.Record{}, fmt.Errorf("%w: flags %#x", ErrMalformed, flags)
	}
	rest := b[headerSize:]
	state, rest, err := field(rest)
	if err != nil {
		return replay.Record{}, fmt.Errorf("%w: state: %v", ErrMalformed, err)
	}
	status, rest, err := field(rest)
	if err != nil {
		return replay.Record{}, fmt.Errorf("%w: status: %v", ErrMalformed, err)
	}
	if len(rest) != 0 {
		return replay.Record{}, fmt.Errorf("%w: %d trailing octets", ErrMalformed, len(rest))
	}
	rec.State = string(state)
	if len(status) > 0 {
		rec.Status = append([]byte(nil), status...)
	}
	return rec, nil
}

// field reads one uvarint-length-prefixed field.
func field(b []byte) (f, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, nil, errors.New("bad length")
	}
	if k != len(binary.AppendUvarint(nil, n)) {
		return nil, nil, errors.New("non-minimal length")
	}
	b = b[k:]
	if n > uint64(len(b)) {
		return nil, nil, errors.New("length past end")
	}
	return b[:n], b[n:], nil
}

// Check returns replay.ErrInvalid for an empty Iss or Hop in k, or, when rec
// is not nil, a Digest that is not DigestSize octets.
func Check(k replay.Key, rec *replay.Record) error {
	if k.Iss == "" || k.Hop == "" {
		return fmt.Errorf("%w: empty iss or hop", replay.ErrInvalid)
	}
	if rec != nil && len(rec.Digest) != DigestSize {
		return fmt.Errorf("%w: digest of %d octets, want %d", replay.ErrInvalid, len(rec.Digest), DigestSize)
	}
	return nil
}
