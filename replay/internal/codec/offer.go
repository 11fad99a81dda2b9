package codec

import (
	"fmt"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/agentproto/handoff/replay"
)

// OfferVersion is the format version of an encoded replay.OfferRecord.
const OfferVersion = 1

// offerWire is an OfferRecord as a CBOR map with small integer keys
// (RFC 8949, core deterministic encoding). Strings are byte strings, since
// a Go string may hold any octets. Times are [seconds, nanoseconds]
// since the Unix epoch, absent for the zero time. Version is not part of
// the value when a store keeps it apart (Redis); it is 0 then.
type offerWire struct {
	Format   uint    `cbor:"0,keyasint"`
	Hop      []byte  `cbor:"1,keyasint"`
	To       []byte  `cbor:"2,keyasint"`
	Digest   []byte  `cbor:"3,keyasint"`
	Prev     []byte  `cbor:"4,keyasint,omitempty"`
	Work     []byte  `cbor:"5,keyasint,omitempty"`
	Open     bool    `cbor:"6,keyasint,omitempty"`
	Handoff  []byte  `cbor:"7,keyasint,omitempty"`
	State    []byte  `cbor:"8,keyasint,omitempty"`
	Reason   []byte  `cbor:"9,keyasint,omitempty"`
	Status   []byte  `cbor:"10,keyasint,omitempty"`
	Canceled bool    `cbor:"11,keyasint,omitempty"`
	Observed bool    `cbor:"12,keyasint,omitempty"`
	Created  []int64 `cbor:"13,keyasint,omitempty"`
	Expires  []int64 `cbor:"14,keyasint,omitempty"`
	Version  uint64  `cbor:"15,keyasint,omitempty"`
}

var (
	offerEnc cbor.EncMode
	offerDec cbor.DecMode
)

func init() {
	var err error
	if offerEnc, err = cbor.CoreDetEncOptions().EncMode(); err != nil {
		panic(err)
	}
	if offerDec, err = (cbor.DecOptions{
		DupMapKey:         cbor.DupMapKeyEnforcedAPF,
		ExtraReturnErrors: cbor.ExtraDecErrorUnknownField,
		IndefLength:       cbor.IndefLengthForbidden,
		TagsMd:            cbor.TagsForbidden,
		MaxNestedLevels:   4,
	}).DecMode(); err != nil {
		panic(err)
	}
}

func wireTime(t time.Time) []int64 {
	if t.IsZero() {
		return nil
	}
	return []int64{t.Unix(), int64(t.Nanosecond())}
}

func fromWire(v []int64, what string) (time.Time, error) {
	switch {
	case v == nil:
		return time.Time{}, nil
	case len(v) != 2 || v[1] < 0 || v[1] >= 1e9:
		return time.Time{}, fmt.Errorf("%w: %s time", ErrMalformed, what)
	}
	t := time.Unix(v[0], v[1])
	if t.IsZero() {
		return time.Time{}, fmt.Errorf("%w: %s is the zero time", ErrMalformed, what)
	}
	return t, nil
}

// EncodeOffer returns the encoding of rec, Version included (0 leaves it
// out). It does not check rec.
func EncodeOffer(rec replay.OfferRecord) []byte {
	b, err := offerEnc.Marshal(offerWire{
		Format: OfferVersion, Hop: []byte(rec.Hop), To: []byte(rec.To), Digest: rec.Digest, Prev: rec.Prev,
		Work: []byte(rec.Work), Open: rec.Open, Handoff: rec.Handoff, State: []byte(rec.State),
		Reason: []byte(rec.Reason), Status: rec.Status,
		Canceled: rec.Canceled, Observed: rec.Observed, Created: wireTime(rec.Created),
		Expires: wireTime(rec.Expires), Version: rec.Version,
	})
	if err != nil {
		// A struct of strings, byte strings, booleans and integers always
		// encodes.
		panic("codec: encoding an offer record: " + err.Error())
	}
	return b
}

// DecodeOffer parses an encoded OfferRecord and checks it with
// replay.CheckOffer. The returned record does not alias b.
func DecodeOffer(b []byte) (replay.OfferRecord, error) {
	var w offerWire
	if err := offerDec.Unmarshal(b, &w); err != nil {
		return replay.OfferRecord{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if w.Format != OfferVersion {
		return replay.OfferRecord{}, fmt.Errorf("%w: offer record format %d", ErrMalformed, w.Format)
	}
	created, err := fromWire(w.Created, "created")
	if err != nil {
		return replay.OfferRecord{}, err
	}
	expires, err := fromWire(w.Expires, "expires")
	if err != nil {
		return replay.OfferRecord{}, err
	}
	rec := replay.OfferRecord{
		Hop: string(w.Hop), To: string(w.To), Digest: w.Digest, Prev: w.Prev, Work: string(w.Work), Open: w.Open,
		Handoff: w.Handoff, State: string(w.State), Reason: string(w.Reason), Status: w.Status, Canceled: w.Canceled, Observed: w.Observed,
		Created: created, Expires: expires, Version: w.Version,
	}.Clone()
	if err := replay.CheckOffer(rec); err != nil {
		return replay.OfferRecord{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return rec, nil
}
