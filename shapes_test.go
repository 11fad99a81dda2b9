package handoff

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff/internal/cborhead"
	"github.com/agentproto/handoff/internal/ecsig"
	"github.com/agentproto/handoff/reason"
)

// ---- Shapes: what a stranger's octets cost, structure by structure ----
//
// A shape is a recipe for a hostile input: a place a stranger controls,
// filled with many small items, or with one item nested deep, in one
// signed form and one encoding. shapeOf reads a shape from a few octets,
// so that FuzzReceiveShapes searches over shapes rather than over octets,
// and the named shapes of issue 35 (findings 1 and 2) are recipes like
// any other. Every input built here carries an offer whose signature is
// broken: it is refused at step 1 of section 5.1, and SECURITY.md bounds
// what it may cost.

// place is where a shape puts its items.
type place uint8

const (
	placeChain          place = iota // the chain: n elements
	placeHandoffMembers              // the Handoff object: n unknown members
	placeHandoffValue                // one unknown member of the Handoff object
	placeChainValue                  // the chain's one element, not a string
	placeHeaderMembers               // the protected header: n unknown members or labels
	placeHeaderValue                 // one unknown member (label) of the protected header
	placeKID                         // the kid's value
	placeUnprotected                 // COSE: the unprotected header, n labels (JWS: as placeHeaderMembers)
	placePayloadMembers              // the payload: n unknown members
	placePayloadValue                // one unknown member of the payload
	placeObo                         // an unknown member of obo
	placeRefs                        // refs: n items
	placeEnvelope                    // COSE: n items beyond the four; JWS: n segments beyond the three
	numPlaces
)

var placeNames = [...]string{"chain", "handoff-members", "handoff-value", "chain-value", "header-members",
	"header-value", "kid", "unprotected", "payload-members", "payload-value", "obo", "refs", "envelope"}

// itemKind is what a shape fills its place with: n small items, or, for
// the deep kinds and the wide map, one item of n levels or n members.
type itemKind uint8

const (
	itemEmptyMap itemKind = iota
	itemEmptyArray
	itemZero
	itemChar // a string of one character
	itemNull
	itemDeepArray // one array nested n deep
	itemDeepMap   // one map nested n deep, a member at each level
	itemWideMap   // one map of n members
	numItems
)

var itemNames = [...]string{"empty-maps", "empty-arrays", "zeros", "chars", "nulls", "deep-arrays", "deep-maps", "wide-map"}

type shape struct {
	fe    formatEncoding
	place place
	item  itemKind
	n     int
	indef bool // CBOR: indefinite lengths where the shape has a container
}

func (s shape) String() string {
	ind := ""
	if s.indef && (s.fe.Encoding == CBOR || s.fe.Format == COSE) {
		ind = "-indefinite"
	}
	return fmt.Sprintf("%s/%s/%d-%s%s", s.fe, placeNames[s.place], s.n, itemNames[s.item], ind)
}

// shapeOf reads a recipe: the form and encoding, the place, the items,
// their number (one to 65,536) and whether CBOR containers have an
// indefinite length.
func shapeOf(b []byte) shape {
	b = append(bytes.Clone(b), make([]byte, 6)...)
	return shape{
		fe:    allFormatEncodings[int(b[0])%len(allFormatEncodings)],
		place: place(b[1] % byte(numPlaces)),
		item:  itemKind(b[2] % byte(numItems)),
		n:     1 + int(binary.BigEndian.Uint16(b[3:5])),
		indef: b[5]&1 == 1,
	}
}

// recipe is shapeOf's inverse.
func (s shape) recipe() []byte {
	fe := 0
	for i, x := range allFormatEncodings {
		if x == s.fe {
			fe = i
		}
	}
	b := []byte{byte(fe), byte(s.place), byte(s.item), 0, 0, 0}
	binary.BigEndian.PutUint16(b[3:5], uint16(s.n-1))
	if s.indef {
		b[5] = 1
	}
	return b
}

// fill is the encoded content of a place: items (an array's content),
// members (a map's content, keys included) or one value; count is the
// number of items or members, for a CBOR head.
type fill struct {
	octets []byte
	count  int
}

// shapeEnc is the encoding of the place's content: the payload's and
// the header's are the form's (JSON for JWS, CBOR for COSE), the Handoff
// object's is its own.
func (s shape) shapeEnc() Encoding {
	switch s.place {
	case placeChain, placeHandoffMembers, placeHandoffValue, placeChainValue:
		return s.fe.Encoding
	}
	if s.fe.Format == JWS {
		return JSON
	}
	return CBOR
}

// oneItem is one small item of kind k.
func oneItem(k itemKind, enc Encoding) []byte {
	if enc == JSON {
		return []byte([...]string{"{}", "[]", "0", `"a"`, "null", "[]", "{}", "{}"}[k])
	}
	return [...][]byte{{0xa0}, {0x80}, {0x00}, {0x61, 'a'}, {0xf6}, {0x80}, {0xa0}, {0xa0}}[k]
}

// deep is one item of n levels, or of n members for the wide map; nil for
// the other kinds.
func (s shape) deep(enc Encoding) []byte {
	n := s.n
	switch {
	case s.item == itemDeepArray && enc == JSON:
		return []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
	case s.item == itemDeepMap && enc == JSON:
		return []byte(strings.Repeat(`{"a":`, n) + "0" + strings.Repeat("}", n))
	case s.item == itemWideMap && enc == JSON:
		var b bytes.Buffer
		b.WriteByte('{')
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"%x":0`, i)
		}
		b.WriteByte('}')
		return b.Bytes()
	case s.item == itemDeepArray && s.indef:
		return append(bytes.Repeat([]byte{0x9f}, n), bytes.Repeat([]byte{0xff}, n)...)
	case s.item == itemDeepArray:
		return append(bytes.Repeat([]byte{0x81}, n), 0x80)
	case s.item == itemDeepMap:
		return append(bytes.Repeat([]byte{0xa1, 0x61, 'a'}, n), 0x00)
	case s.item == itemWideMap:
		b := s.head(cborhead.Map, n)
		for i := range n {
			b = append(b, cborText(fmt.Sprintf("%x", i))...)
			b = append(b, 0x00)
		}
		return s.end(b)
	}
	return nil
}

// head and end open and close a CBOR container of n items (pairs, for a
// map), with an indefinite length when the shape says so.
func (s shape) head(major byte, n int) []byte {
	if s.indef {
		return []byte{major<<5 | 31}
	}
	return cborHead(major, uint64(n))
}

func (s shape) end(b []byte) []byte {
	if s.indef {
		return append(b, 0xff)
	}
	return b
}

func cborHead(major byte, n uint64) []byte {
	switch {
	case n < 24:
		return []byte{major<<5 | byte(n)}
	case n < 1<<8:
		return []byte{major<<5 | 24, byte(n)}
	case n < 1<<16:
		return []byte{major<<5 | 25, byte(n >> 8), byte(n)}
	}
	return binary.BigEndian.AppendUint32([]byte{major<<5 | 26}, uint32(n))
}

func cborText(s string) []byte { return append(cborHead(cborhead.Text, uint64(len(s))), s...) }

// items is the content of an array place: n small items, or the one deep
// item.
func (s shape) items(enc Encoding) fill {
	if d := s.deep(enc); d != nil {
		return fill{d, 1}
	}
	it := oneItem(s.item, enc)
	var b []byte
	for i := range s.n {
		if i > 0 && enc == JSON {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return fill{b, s.n}
}

// members is the content of a map place: n members, each a small item
// under its own name (or integer label, intKeys), or one member holding
// the deep item.
func (s shape) members(enc Encoding, intKeys bool) fill {
	key := func(i int) []byte {
		switch {
		case enc == JSON:
			return fmt.Appendf(nil, `"m%x":`, i)
		case intKeys:
			return cborHead(cborhead.Unsigned, uint64(100+i))
		}
		return cborText(fmt.Sprintf("m%x", i))
	}
	if d := s.deep(enc); d != nil {
		return fill{append(key(0), d...), 1}
	}
	it := oneItem(s.item, enc)
	var b []byte
	for i := range s.n {
		if i > 0 && enc == JSON {
			b = append(b, ',')
		}
		b = append(append(b, key(i)...), it...)
	}
	return fill{b, s.n}
}

// value is the content of a value place: an array of n small items, or
// the deep item.
func (s shape) value(enc Encoding) fill {
	if d := s.deep(enc); d != nil {
		return fill{d, 1}
	}
	f := s.items(enc)
	if enc == JSON {
		return fill{append(append([]byte{'['}, f.octets...), ']'), 1}
	}
	return fill{s.end(append(s.head(cborhead.Array, f.count), f.octets...)), 1}
}

// control is a fill of the same size as f that is one string: one item,
// or one member of that string, or the string as a value.
func control(f fill, enc Encoding, member, intKeys bool) fill {
	size := len(f.octets)
	var key []byte
	switch {
	case !member:
	case enc == JSON:
		key = []byte(`"x":`)
	case intKeys:
		key = []byte{0x18, 100}
	default:
		key = cborText("x")
	}
	n := max(size-len(key)-2, 0)
	if enc == JSON {
		return fill{fmt.Appendf(key, `"%s"`, strings.Repeat("a", n)), 1}
	}
	n = max(size-len(key)-len(cborHead(cborhead.Text, uint64(n))), 0)
	return fill{append(append(key, cborHead(cborhead.Text, uint64(n))...), strings.Repeat("a", n)...), 1}
}

// shapeBase is the broken offer every shape starts from: one of the fuzz
// fixture's, a JWS from alpha or a COSE element from beta, both keys the
// receiver trusts, its signature changed so that it fails at step 1.
func shapeBase(tb testing.TB, f Format) Signed {
	fx := fuzzFixture(tb)
	if f == JWS {
		return breakSignature(tb, fx.elements["alpha-direct"])
	}
	return breakSignature(tb, fx.elements["beta-to-alpha"])
}

// build makes the hostile input of s and its control: the same input
// with, in the same place, one string of the same size (see fitted).
func (s shape) build(tb testing.TB) (hostile, ctl []byte) {
	return s.fitted(tb).buildN(tb)
}

// fitted is s with fewer items when its element would be larger than
// Limits.MaxElementSize, or its Handoff larger than Limits.MaxHandoffSize,
// so that it reaches the parsers rather than be refused for its size.
func (s shape) fitted(tb testing.TB) shape {
	for s.n > 1 {
		hostile, ctl := s.buildN(tb)
		_, _, err := ParseHandoff(hostile, Limits{})
		_, _, errCtl := ParseHandoff(ctl, Limits{})
		if !errors.Is(err, ErrTooLarge) && !errors.Is(errCtl, ErrTooLarge) {
			break
		}
		s.n = s.n * 7 / 8
	}
	return s
}

func (s shape) buildN(tb testing.TB) (hostile, ctl []byte) {
	enc := s.shapeEnc()
	base := shapeBase(tb, s.fe.Format)
	var f fill
	member, intKeys := false, s.fe.Format == COSE && s.place != placePayloadMembers
	switch s.place {
	case placeChain, placeRefs, placeEnvelope:
		f = s.items(enc)
	case placeHandoffMembers, placeHeaderMembers, placeUnprotected, placePayloadMembers:
		f, member = s.members(enc, intKeys), true
	default:
		f = s.value(enc)
	}
	return s.wrap(tb, base, f), s.wrap(tb, base, control(f, enc, member, intKeys))
}

// wrap puts f in the shape's place of the offer base, and returns the
// Handoff object.
func (s shape) wrap(tb testing.TB, base Signed, f fill) []byte {
	switch s.place {
	case placeChain, placeHandoffMembers, placeHandoffValue, placeChainValue:
		return s.handoffWith(tb, base, f)
	}
	var el Signed
	if s.fe.Format == JWS {
		el = s.jwsWith(tb, base, f)
	} else {
		el = s.coseWith(tb, base, f)
	}
	return encodeHandoff(tb, handoffOf(el), s.fe.Encoding)
}

// handoffWith is the Handoff object of base with f in one of its places.
func (s shape) handoffWith(tb testing.TB, base Signed, f fill) []byte {
	plain := encodeHandoff(tb, handoffOf(base), s.fe.Encoding)
	if s.fe.Encoding == JSON {
		var member string
		switch s.place {
		case placeChain:
			member = `"chain":[` + string(f.octets) + `]`
		case placeHandoffMembers:
			member = string(f.octets)
		case placeHandoffValue:
			member = `"x":` + string(f.octets)
		case placeChainValue:
			member = `"chain":[` + string(f.octets) + `]`
		}
		return append(append(plain[:len(plain)-1:len(plain)-1], ","+member...), '}')
	}
	it, n := cborhead.Open(plain)
	var pairs []byte
	for k, ok := it.Next(); ok; k, ok = it.Next() {
		v, _ := it.Next()
		pairs = append(append(pairs, k...), v...)
	}
	n /= 2
	switch s.place {
	case placeChain:
		pairs = append(append(pairs, cborText("chain")...), s.end(append(s.head(cborhead.Array, f.count), f.octets...))...)
		n++
	case placeHandoffMembers:
		pairs = append(pairs, f.octets...)
		n += f.count
	case placeHandoffValue:
		pairs = append(append(pairs, cborText("x")...), f.octets...)
		n++
	case placeChainValue:
		pairs = append(append(append(pairs, cborText("chain")...), 0x81), f.octets...)
		n++
	}
	return s.end(append(s.head(cborhead.Map, n), pairs...))
}

// jwsWith is base, a JWS, with f in its header or payload.
func (s shape) jwsWith(tb testing.TB, base Signed, f fill) Signed {
	parts := strings.Split(string(base.Octets), ".")
	dec := func(p string) []byte {
		b, err := base64.RawURLEncoding.DecodeString(p)
		require.NoError(tb, err)
		return b
	}
	header, payload := dec(parts[0]), dec(parts[1])
	add := func(obj []byte, member string) []byte {
		return append(append(obj[:len(obj)-1:len(obj)-1], ","+member...), '}')
	}
	switch s.place {
	case placeHeaderMembers, placeUnprotected:
		header = add(header, string(f.octets))
	case placeHeaderValue:
		header = add(header, `"x":`+string(f.octets))
	case placeKID:
		i := bytes.Index(header, []byte(`"kid":"`))
		j := i + 7 + bytes.IndexByte(header[i+7:], '"') + 1
		header = append(append(append([]byte(nil), header[:i+6]...), f.octets...), header[j:]...)
	case placePayloadMembers:
		payload = add(payload, string(f.octets))
	case placePayloadValue:
		payload = add(payload, `"x":`+string(f.octets))
	case placeObo:
		payload = add(payload, `"obo":{"sub":"u","x":`+string(f.octets)+`}`)
	case placeRefs:
		payload = add(payload, `"refs":[`+string(f.octets)+`]`)
	case placeEnvelope: // a segment per item, as many octets in all as f
		per := max(len(f.octets)/f.count, 2)
		parts[2] += strings.Repeat("."+strings.Repeat("A", per-1), f.count) +
			strings.Repeat("A", max(len(f.octets)-per*f.count, 0))
	}
	enc := base64.RawURLEncoding.EncodeToString
	return Signed{Format: JWS, Octets: []byte(enc(header) + "." + enc(payload) + "." + parts[2])}
}

// coseWith is base, a COSE_Sign1, with f in a header, the payload or the
// envelope.
func (s shape) coseWith(tb testing.TB, base Signed, f fill) Signed {
	var tag cbor.RawTag
	require.NoError(tb, cbor.Unmarshal(base.Octets, &tag))
	var elems []cbor.RawMessage
	require.NoError(tb, cbor.Unmarshal(tag.Content, &elems))
	bstrContent := func(b []byte) []byte { c, _ := cborhead.String(b); return c }
	prot, unprot, payload, sig := bstrContent(elems[0]), []byte(elems[1]), bstrContent(elems[2]), []byte(elems[3])
	// with returns map m with f's pairs added, or the value of label
	// (an int) replaced by f.
	with := func(m []byte, extra []byte, count int, label int) []byte {
		it, n := cborhead.Open(m)
		var pairs []byte
		for k, ok := it.Next(); ok; k, ok = it.Next() {
			v, _ := it.Next()
			if arg, _, _ := cborhead.Head(k); label >= 0 && cborhead.Major(k) == cborhead.Unsigned && arg == uint64(label) {
				v = extra
				n -= 2
				extra, count = nil, 0
				pairs = append(append(pairs, k...), v...)
				n += 2
				continue
			}
			pairs = append(append(pairs, k...), v...)
		}
		return s.end(append(s.head(cborhead.Map, n/2+count), append(pairs, extra...)...))
	}
	bstr := func(b []byte) []byte { return append(cborHead(cborhead.Bytes, uint64(len(b))), b...) }
	arrayN := 4
	var more []byte
	switch s.place {
	case placeHeaderMembers:
		prot = with(prot, f.octets, f.count, -1)
	case placeHeaderValue:
		prot = with(prot, append([]byte{0x18, 100}, f.octets...), 1, -1)
	case placeKID:
		prot = with(prot, f.octets, 0, 4)
	case placeUnprotected:
		unprot = with(unprot, f.octets, f.count, -1)
	case placePayloadMembers:
		payload = with(payload, f.octets, f.count, -1)
	case placePayloadValue:
		payload = with(payload, append(cborText("x"), f.octets...), 1, -1)
	case placeObo:
		obo := append([]byte{0xa2}, cborText("sub")...)
		obo = append(append(append(obo, cborText("u")...), cborText("x")...), f.octets...)
		payload = with(payload, append(cborText("obo"), obo...), 1, -1)
	case placeRefs:
		payload = with(payload, append(cborText("refs"), s.end(append(s.head(cborhead.Array, f.count), f.octets...))...), 1, -1)
	case placeEnvelope:
		arrayN += f.count
		more = f.octets
	}
	msg := append([]byte{0xd2}, s.head(cborhead.Array, arrayN)...)
	msg = append(append(append(append(msg, bstr(prot)...), unprot...), bstr(payload)...), sig...)
	return Signed{Format: COSE, Octets: s.end(append(msg, more...))}
}

// findingShapes are the shapes issue 35 reported (findings 1 and 2), at
// the sizes it measured.
func findingShapes() []shape {
	jj, jc, cj, cc := allFormatEncodings[0], allFormatEncodings[1], allFormatEncodings[2], allFormatEncodings[3]
	return []shape{
		// Finding 1: the chain read whole before the signature.
		{fe: jj, place: placeChain, item: itemChar, n: 65000},
		{fe: jc, place: placeChain, item: itemZero, n: 65000},
		{fe: cc, place: placeChain, item: itemZero, n: 1000},
		{fe: cc, place: placeChain, item: itemEmptyMap, n: 65000, indef: true},
		// Finding 2: header shapes beyond the bound.
		{fe: jj, place: placeHeaderValue, item: itemDeepArray, n: 5000},
		{fe: jj, place: placeKID, item: itemDeepArray, n: 5000},
		{fe: cc, place: placeHeaderMembers, item: itemEmptyMap, n: 2000},
		{fe: cj, place: placeHeaderMembers, item: itemEmptyMap, n: 2000, indef: true},
		{fe: cc, place: placeUnprotected, item: itemEmptyMap, n: 4000},
		{fe: jj, place: placeHeaderMembers, item: itemZero, n: 1500},
		{fe: jj, place: placeHeaderValue, item: itemDeepMap, n: 2000},
	}
}

// namedShapes are findingShapes and one of each other kind of place, item
// and form.
func namedShapes() []shape {
	jj, jc, cj, cc := allFormatEncodings[0], allFormatEncodings[1], allFormatEncodings[2], allFormatEncodings[3]
	return append(findingShapes(),
		shape{fe: jj, place: placeHandoffMembers, item: itemZero, n: 60000},
		shape{fe: jc, place: placeHandoffMembers, item: itemZero, n: 60000},
		shape{fe: jj, place: placeHandoffValue, item: itemDeepMap, n: 9000},
		shape{fe: jj, place: placeHandoffValue, item: itemWideMap, n: 40000},
		shape{fe: jj, place: placeHandoffValue, item: itemDeepArray, n: 12289}, // deeper than jsontext reads
		shape{fe: cc, place: placeHandoffValue, item: itemDeepArray, n: 60000, indef: true},
		shape{fe: jj, place: placeChainValue, item: itemDeepArray, n: 9000},
		shape{fe: jj, place: placePayloadMembers, item: itemZero, n: 1500},
		shape{fe: cc, place: placePayloadMembers, item: itemZero, n: 3000},
		shape{fe: jj, place: placePayloadValue, item: itemDeepMap, n: 2000},
		shape{fe: cc, place: placePayloadValue, item: itemWideMap, n: 3000},
		shape{fe: jj, place: placeObo, item: itemEmptyMap, n: 3500},
		shape{fe: cc, place: placeObo, item: itemEmptyMap, n: 13000},
		shape{fe: jj, place: placeRefs, item: itemEmptyMap, n: 3500},
		shape{fe: cj, place: placeRefs, item: itemNull, n: 10000},
		shape{fe: cc, place: placeEnvelope, item: itemEmptyArray, n: 12000},
		shape{fe: jj, place: placeEnvelope, item: itemChar, n: 5000},
	)
}

// corpusName is a shape's name as a file name.
func (s shape) corpusName() string { return strings.ReplaceAll(s.String(), "/", "_") }

// writeShapeCorpus writes the recipes of namedShapes for FuzzReceiveShapes,
// and the octets of findingShapes, made smaller where they are larger
// than 8 KiB, for FuzzReceiveCost (TestWriteFuzzCorpus).
func writeShapeCorpus(t *testing.T) {
	for _, s := range namedShapes() {
		writeCorpusFile(t, filepath.Join("testdata", "fuzz", "FuzzReceiveShapes"), s.corpusName(), s.recipe())
	}
	for _, s := range findingShapes() {
		data, _ := s.build(t)
		for len(data) > 8<<10 && s.n > 1 {
			s.n /= 2
			data, _ = s.build(t)
		}
		writeCorpusFile(t, filepath.Join("testdata", "fuzz", "FuzzReceiveCost"), "shape-"+s.corpusName(), data)
	}
}

// receiveCost is what a receive of data allocates, the least of eight
// runs, so that what other goroutines allocate meanwhile (the fuzzing
// engine's, an earlier test's) does not count, nor a buffer a sync.Pool
// did not keep (under the race detector Put drops one item in four, and
// a collection empties the pools: with the least of three, one shape
// counted 19.6 KB more in 3 of 40 runs under -race); and the check it
// ended at.
func receiveCost(tb testing.TB, a *Agent, data []byte) (float64, Check) {
	tb.Helper()
	var check Check
	least := math.MaxFloat64
	for range 8 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		in, err := a.Receive(context.Background(), data, Host{})
		runtime.ReadMemStats(&after)
		require.NoError(tb, err, "the memory store does not fail")
		check = in.Check()
		least = min(least, float64(after.TotalAlloc-before.TotalAlloc))
	}
	return least, check
}

// shapeReceiver is the fuzz fixture's coder, at the fixture's time.
func shapeReceiver(tb testing.TB) *Agent {
	fx := fuzzFixture(tb)
	a, err := NewAgent(Config{ID: fzCoder, Signer: fx.signers["alpha"], Trust: fx.trust, TrustLacksSigner: true,
		Now: func() time.Time { return time.Unix(fzNow, 0) }})
	require.NoError(tb, err)
	return a
}

// costBound is SECURITY.md's bound for an input refused at step 1.
func costBound(size int) float64 { return 4*float64(size) + 16<<10 }

// Issue 35, findings 1 and 2, and every other place: each shape, refused
// at step 1, allocates at most 4 times its size plus 16 KiB, and at most
// twice what the same input with one string of the same size in that
// place allocates, plus 16 KiB.
func TestCost_ShapesRefusedAtStep1(t *testing.T) {
	a := shapeReceiver(t)
	for _, s := range namedShapes() {
		t.Run(s.String(), func(t *testing.T) {
			hostile, ctl := s.build(t)
			require.InDelta(t, len(hostile), len(ctl), float64(len(hostile))/50+8, "the control is the hostile input's size")
			got, check := receiveCost(t, a, hostile)
			require.Equal(t, CheckSignature, check)
			base, check := receiveCost(t, a, ctl)
			require.Equal(t, CheckSignature, check)
			t.Logf("%d octets: %.2fx its size, the same-size string %.2fx", len(hostile), got/float64(len(hostile)), base/float64(len(ctl)))
			assert.LessOrEqual(t, got, costBound(len(hostile)), "allocation at most 4x the input plus 16 KiB")
			assert.LessOrEqual(t, got, 2*base+16<<10, "at most twice the same-size string's, plus 16 KiB")
		})
	}
}

// HC-50, finding 1: a chain longer than the bound, after an offer whose
// signature verifies, fails at step 6 as too-deep, whatever its elements
// past the bound and however many, with its length in the detail; the
// same chain behind a broken signature fails at step 1. In JSON and CBOR,
// both forms.
func TestReceive_HC50_LongChainRefusedAtStep6(t *testing.T) {
	fx := fuzzFixture(t)
	for _, fe := range allFormatEncodings {
		offer := fx.elements["alpha-direct"]
		if fe.Format == COSE {
			offer = fx.elements["gamma-cose"]
		}
		for _, s := range []shape{
			{fe: fe, place: placeChain, item: itemZero, n: 65000},
			{fe: fe, place: placeChain, item: itemChar, n: 17},
			{fe: fe, place: placeChain, item: itemEmptyMap, n: 20000, indef: true},
		} {
			t.Run(s.String(), func(t *testing.T) {
				a := shapeReceiver(t)
				in := receive(t, a, s.wrap(t, offer, s.items(s.fe.Encoding)), Host{})
				assert.Equal(t, CheckChain, in.Check(), in.Detail())
				assert.Equal(t, reason.TooDeep, in.Reason())
				assert.Contains(t, in.Detail(), fmt.Sprintf("chain of %d elements exceeds the limit of 16", s.n))
				h := in.Handoff()
				assert.Len(t, h.Chain, 17, "the elements past the bound are counted, not read")
				if _, err := h.Encode(fe.Encoding); s.n > 17 {
					assert.ErrorIs(t, err, ErrTooLarge, "a chain not read whole is not written")
				} else {
					assert.NoError(t, err, "a chain of 17 is read whole")
				}

				in = receive(t, shapeReceiver(t), s.wrap(t, breakSignature(t, offer), s.items(s.fe.Encoding)), Host{})
				assert.Equal(t, CheckSignature, in.Check())
				assert.Equal(t, reason.BadSignature, in.Reason())
			})
		}
		// At the bound, the chain is read whole and checked: 16 elements
		// that are no signed handoffs fail check 1 of section 5.3.
		s := shape{fe: fe, place: placeChain, item: itemZero, n: 16}
		in := receive(t, shapeReceiver(t), s.wrap(t, offer, s.items(s.fe.Encoding)), Host{})
		assert.Equal(t, CheckChain, in.Check())
		assert.Equal(t, reason.BadSignature, in.Reason(), in.Detail())
	}
}

// ParseHandoff, for a caller that wants the whole object, reads every
// element of a long chain, and writes it back whole.
func TestParseHandoff_ReadsTheWholeChain(t *testing.T) {
	for _, fe := range allFormatEncodings {
		s := shape{fe: fe, place: placeChain, item: itemChar, n: 1000}
		data := s.wrap(t, shapeBase(t, fe.Format), s.items(fe.Encoding))
		h, enc, err := ParseHandoff(data, Limits{})
		require.NoError(t, err)
		assert.Len(t, h.Chain, 1000)
		again, err := h.Encode(enc)
		require.NoError(t, err)
		h2, _, err := ParseHandoff(again, Limits{})
		require.NoError(t, err)
		assert.Equal(t, h.Chain, h2.Chain)
	}
}

// resign signs a built element again, with the fuzz fixture's key of
// its form (alpha's P-256 key for JWS, gamma's Ed25519 key for COSE),
// so that only its shape can fail it.
func resign(tb testing.TB, el Signed) Signed {
	tb.Helper()
	if el.Format == JWS {
		i := bytes.LastIndexByte(el.Octets, '.')
		sig, err := ecsig.Sign(nil, fzP256("handoff fuzz alpha"), ecsig.ES256, el.Octets[:i])
		require.NoError(tb, err)
		return Signed{Format: JWS, Octets: append(el.Octets[:i+1:i+1], base64.RawURLEncoding.EncodeToString(sig)...)}
	}
	var tag cbor.RawTag
	require.NoError(tb, cbor.Unmarshal(el.Octets, &tag))
	var elems []cbor.RawMessage
	require.NoError(tb, cbor.Unmarshal(tag.Content, &elems))
	prot, _ := cborhead.String(elems[0])
	payload, _ := cborhead.String(elems[2])
	tbs, err := cbor.Marshal([]any{"Signature1", prot, []byte{}, payload})
	require.NoError(tb, err)
	sig, err := ecsig.Sign(nil, fzEd25519("handoff fuzz gamma"), ecsig.EdDSA, tbs)
	require.NoError(tb, err)
	msg := append([]byte{0xd2, 0x84}, elems[0]...)
	msg = append(append(append(msg, elems[1]...), elems[2]...), append(cborHead(cborhead.Bytes, uint64(len(sig))), sig...)...)
	return Signed{Format: COSE, Octets: msg}
}

// Finding 2, exactness: the header shapes that cost little now are still
// accepted when signed, as RFC 7515 and RFC 9052 accept them (STYLE.md,
// principle 17: a bound on shape never refuses what the size bound
// admits): an unknown header member nested 5000 deep, 1500 unknown
// members, 2000 COSE labels of {} in either header, a definite or an
// indefinite length.
func TestReceive_HeaderShapesAcceptedWhenSigned(t *testing.T) {
	fx := fuzzFixture(t)
	jj, cc := allFormatEncodings[0], allFormatEncodings[3]
	for _, s := range []shape{
		{fe: jj, place: placeHeaderValue, item: itemDeepArray, n: 5000},
		{fe: jj, place: placeHeaderValue, item: itemDeepMap, n: 1500},
		{fe: jj, place: placeHeaderMembers, item: itemZero, n: 1200},
		{fe: cc, place: placeHeaderMembers, item: itemEmptyMap, n: 2000},
		{fe: cc, place: placeHeaderMembers, item: itemEmptyMap, n: 2000, indef: true},
		{fe: cc, place: placeHeaderValue, item: itemWideMap, n: 2000},
		{fe: cc, place: placeUnprotected, item: itemEmptyMap, n: 2000},
	} {
		t.Run(s.String(), func(t *testing.T) {
			base := fx.elements["alpha-direct"]
			if s.fe.Format == COSE {
				base = fx.elements["gamma-cose"]
			}
			data := s.wrap(t, base, s.members(s.shapeEnc(), true))
			if s.place == placeHeaderValue {
				data = s.wrap(t, base, s.value(s.shapeEnc()))
			}
			h, _, err := ParseHandoff(data, Limits{})
			require.NoError(t, err)
			el := resign(t, h.Offer)
			in := receive(t, shapeReceiver(t), encodeHandoff(t, handoffOf(el), s.fe.Encoding), Host{})
			assert.True(t, in.Accepted(), "%s: %s", in.Reason(), in.Detail())
		})
	}
}

// FuzzReceiveShapes searches over shapes (shapeOf) for one that costs
// more than SECURITY.md allows before trust: every input it builds is
// refused at step 1, and must allocate at most 4 times its size plus 16
// KiB. Its corpus holds the recipes of namedShapes, issue 35's shapes
// among them, at the sizes the issue measured.
func FuzzReceiveShapes(f *testing.F) {
	for _, s := range namedShapes() {
		f.Add(s.recipe())
	}
	f.Fuzz(func(t *testing.T, recipe []byte) {
		s := shapeOf(recipe)
		data, _ := s.build(t)
		got, check := receiveCost(t, shapeReceiver(t), data)
		require.Equal(t, CheckSignature, check, "%s is refused at step 1", s)
		require.LessOrEqual(t, got, costBound(len(data)),
			"%s: an input of %d octets refused at step 1 allocated %.0f octets", s, len(data), got)
	})
}

// BenchmarkShapesRefusedAtStep1 reports, for each named shape, what its
// refusal at step 1 allocates over its size (alloc-x-size), what the same
// input with one string of the same size in that place allocates over
// its size (string-alloc-x-size), and its time against that string's,
// alternated in one run (x-string); and its size and number of items as
// built (fitted).
func BenchmarkShapesRefusedAtStep1(b *testing.B) {
	for _, s := range namedShapes() {
		b.Run(s.String(), func(b *testing.B) {
			a := shapeReceiver(b)
			hostile, ctl := s.build(b)
			recv := func(data []byte) func() {
				return func() {
					if in, err := a.Receive(context.Background(), data, Host{}); err != nil || in.Check() != CheckSignature {
						b.Fatalf("want a refusal at step 1, got %v", err)
					}
				}
			}
			h := recv(hostile)
			b.ReportAllocs()
			for b.Loop() {
				h()
			}
			b.StopTimer()
			m := medians(benchRounds, h, recv(ctl))
			b.ReportMetric(m[0]/m[1], "x-string")
			got, _ := receiveCost(b, a, hostile)
			base, _ := receiveCost(b, a, ctl)
			b.ReportMetric(got/float64(len(hostile)), "alloc-x-size")
			b.ReportMetric(base/float64(len(ctl)), "string-alloc-x-size")
			b.ReportMetric(float64(len(hostile)), "octets")
			b.ReportMetric(float64(s.fitted(b).n), "items")
		})
	}
}
