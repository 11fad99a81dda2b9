// Package codec is the binary encoding of a replay.Record that the durable
// and shared stores keep as a value.
//
// Version 2 of the encoding, written by Encode, is, in order:
//
//	version  1 octet, 0x02
//	digest   32 octets
//	idflags  1 octet: bit 0 set when the record has a token, bit 1 when it
//	         has a creation time; other bits 0
//	created  8 octets, big-endian two's complement: Created.Unix(), or 0,
//	         then 4 octets, big-endian: Created.Nanosecond(), or 0
//	token    16 octets: the token, or zeros
//	flags    1 octet: bit 0 set when the record has an expiry; other bits 0
//	expires  8 octets, big-endian two's complement: Expires.Unix(), or 0,
//	         then 4 octets, big-endian: Expires.Nanosecond(), or 0
//	state    uvarint length, then that many octets
//	status   uvarint length, then that many octets
//
// The octets that never change after the insert (version, digest, idflags,
// created, token: IdentitySize octets) come first, and the digest and the
// state's length sit at fixed offsets, so that a server-side script can
// compare the digest, tell an empty state and keep the identity of a
// record while replacing the rest, without decoding it.
//
// Version 3, written by EncodeKeyed for redisstore, is version 2 with the
// octet 0x03 first and the status in a compact form that is decoded with
// the record's key (see Version3): a JWS status is kept in about a third
// of its octets, and comes back as signed. DecodeKeyed reads all three
// versions; Decode, which has no key, refuses version 3.
//
// Version 1, still decoded, is the octet 0x01, the digest, then flags,
// expires, state and status as above: no token and no creation time.
// Decode rejects anything else (unknown version or flags, short or
// trailing input, non-minimal or oversized lengths) with an error wrapping
// ErrMalformed.
package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/agentproto/handoff/replay"
)

// Version is the first octet of an encoded record, as Encode writes it.
const Version = 2

// Version1 is the first octet of a record written before tokens.
const Version1 = 1

// DigestSize is the length of the digest held in a record.
const DigestSize = 32

// DigestOffset is the offset of the digest in an encoded record.
const DigestOffset = 1

// IdentitySize is the length of the prefix of a version 2 encoding that
// stays the same for the life of the record.
const IdentitySize = 1 + DigestSize + 1 + 12 + replay.TokenSize

// StateOffset is the offset of the state's length in a version 2 encoding;
// StateOffset1 in a version 1 encoding.
const (
	StateOffset  = IdentitySize + 1 + 12
	StateOffset1 = 1 + DigestSize + 1 + 12
)

const (
	flagExpires = 1 << 0
	idToken     = 1 << 0
	idCreated   = 1 << 1
	headerSize  = StateOffset
)

// ErrMalformed marks a value that is not a valid encoded record.
var ErrMalformed = errors.New("malformed record encoding")

// Encode returns the version 2 encoding of rec. It does not check rec;
// callers validate it first.
func Encode(rec replay.Record) []byte {
	b := header(Version, rec)
	b = binary.AppendUvarint(b, uint64(len(rec.Status)))
	return append(b, rec.Status...)
}

// EncodeKeyed returns the version 3 encoding of rec, the record of k: the
// layout of version 2, with the status in a compact form that
// DecodeKeyed decodes with k and the record's digest (see Version3). It
// does not check rec; callers validate it first.
func EncodeKeyed(k replay.Key, rec replay.Record) []byte {
	return appendStatus(header(Version3, rec), k, rec.Digest, rec.Status)
}

// header returns an encoding of rec up to its status field.
func header(version byte, rec replay.Record) []byte {
	b := make([]byte, headerSize, headerSize+2*binary.MaxVarintLen64+len(rec.State)+len(rec.Status))
	b[0] = version
	copy(b[DigestOffset:DigestOffset+DigestSize], rec.Digest)
	var id byte
	if !rec.Created.IsZero() {
		id |= idCreated
		putTime(b[2+DigestSize:], rec.Created)
	}
	if len(rec.Token) == replay.TokenSize {
		id |= idToken
		copy(b[14+DigestSize:], rec.Token)
	}
	b[1+DigestSize] = id
	if !rec.Expires.IsZero() {
		b[IdentitySize] = flagExpires
		putTime(b[IdentitySize+1:], rec.Expires)
	}
	b = binary.AppendUvarint(b, uint64(len(rec.State)))
	return append(b, rec.State...)
}

func putTime(b []byte, t time.Time) {
	binary.BigEndian.PutUint64(b, uint64(t.Unix()))
	binary.BigEndian.PutUint32(b[8:], uint32(t.Nanosecond()))
}

// getTime reads a time written by putTime, present or not.
func getTime(b []byte, present bool, what string) (time.Time, error) {
	sec := int64(binary.BigEndian.Uint64(b))
	nsec := binary.BigEndian.Uint32(b[8:])
	if !present {
		if sec != 0 || nsec != 0 {
			return time.Time{}, fmt.Errorf("%w: %s time without its flag", ErrMalformed, what)
		}
		return time.Time{}, nil
	}
	if nsec >= 1e9 {
		return time.Time{}, fmt.Errorf("%w: %s nanoseconds out of range", ErrMalformed, what)
	}
	t := time.Unix(sec, int64(nsec))
	if t.IsZero() {
		// The zero time is reserved for "none".
		return time.Time{}, fmt.Errorf("%w: %s flag with the zero time", ErrMalformed, what)
	}
	return t, nil
}

// Decode parses an encoded record of version 2 or 1. The returned record
// does not alias b.
func Decode(b []byte) (replay.Record, error) {
	rec, err := decode(nil, b)
	if err != nil {
		return replay.Record{}, err
	}
	return rec, nil
}

// DecodeKeyed parses an encoded record of version 3, 2 or 1, the record
// of k. The returned record does not alias b.
func DecodeKeyed(k replay.Key, b []byte) (replay.Record, error) {
	rec, err := decode(&k, b)
	if err != nil {
		return replay.Record{}, err
	}
	return rec, nil
}

func decode(k *replay.Key, b []byte) (replay.Record, error) {
	var rec replay.Record
	if len(b) == 0 {
		return rec, fmt.Errorf("%w: empty", ErrMalformed)
	}
	var rest []byte
	switch b[0] {
	case Version3:
		if k == nil {
			return rec, fmt.Errorf("%w: %w", ErrMalformed, errNeedsKey)
		}
		fallthrough
	case Version:
		if len(b) < StateOffset {
			return rec, fmt.Errorf("%w: %d octets, want at least %d", ErrMalformed, len(b), StateOffset)
		}
		id := b[1+DigestSize]
		if id&^(idToken|idCreated) != 0 {
			return rec, fmt.Errorf("%w: identity flags %#x", ErrMalformed, id)
		}
		var err error
		if rec.Created, err = getTime(b[2+DigestSize:], id&idCreated != 0, "created"); err != nil {
			return rec, err
		}
		token := b[14+DigestSize : IdentitySize]
		if id&idToken != 0 {
			rec.Token = append([]byte(nil), token...)
		} else if !isZero(token) {
			return rec, fmt.Errorf("%w: token without its flag", ErrMalformed)
		}
		rest = b[IdentitySize:]
	case Version1:
		if len(b) < StateOffset1 {
			return rec, fmt.Errorf("%w: %d octets, want at least %d", ErrMalformed, len(b), StateOffset1)
		}
		rest = b[1+DigestSize:]
	default:
		return rec, fmt.Errorf("%w: version %d", ErrMalformed, b[0])
	}
	rec.Digest = append([]byte(nil), b[DigestOffset:DigestOffset+DigestSize]...)
	switch rest[0] {
	case 0, flagExpires:
	default:
		return rec, fmt.Errorf("%w: flags %#x", ErrMalformed, rest[0])
	}
	var err error
	if rec.Expires, err = getTime(rest[1:], rest[0] == flagExpires, "expiry"); err != nil {
		return rec, err
	}
	rest = rest[13:]
	state, rest, err := field(rest)
	if err != nil {
		return rec, fmt.Errorf("%w: state: %v", ErrMalformed, err)
	}
	status, rest, err := field(rest)
	if err != nil {
		return rec, fmt.Errorf("%w: status: %v", ErrMalformed, err)
	}
	if len(rest) != 0 {
		return rec, fmt.Errorf("%w: %d trailing octets", ErrMalformed, len(rest))
	}
	rec.State = string(state)
	switch {
	case len(status) == 0:
	case b[0] == Version3:
		if rec.Status, err = expandStatus(*k, rec.Digest, status); err != nil {
			return rec, err
		}
	default:
		rec.Status = append([]byte(nil), status...)
	}
	return rec, nil
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
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
// is not nil, a Digest that is not DigestSize octets or a Token neither
// empty nor replay.TokenSize octets.
func Check(k replay.Key, rec *replay.Record) error {
	if k.Iss == "" || k.Hop == "" {
		return fmt.Errorf("%w: empty iss or hop", replay.ErrInvalid)
	}
	if rec != nil && len(rec.Digest) != DigestSize {
		return fmt.Errorf("%w: digest of %d octets, want %d", replay.ErrInvalid, len(rec.Digest), DigestSize)
	}
	if rec != nil && len(rec.Token) != 0 && len(rec.Token) != replay.TokenSize {
		return fmt.Errorf("%w: token of %d octets, want %d", replay.ErrInvalid, len(rec.Token), replay.TokenSize)
	}
	return nil
}
