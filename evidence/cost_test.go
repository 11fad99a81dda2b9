package evidence

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/gowebpki/jcs"
	"github.com/stretchr/testify/require"

	"github.com/agentproto/handoff"
	"github.com/agentproto/handoff/ref"
)

// Issue 20, point 2: the cost of the evidence check is a small multiple of
// the package's size whatever its nesting, and the binding to the offer is
// checked before any scan.

// maxCheckAlloc is the bound on what one Check allocates, as a multiple of
// the package's size.
const maxCheckAlloc = 16

// costPackage returns the encoding of p (bound by w's planned hop) with an
// unknown member "x" holding n levels of nesting, each level an object
// with a string member and the next level (deep), or n such objects side
// by side in an array (flat), padded so that deep and flat of one n have
// the same size, total octets.
func costPackage(t testing.TB, p Package, deep bool, n, total int) []byte {
	t.Helper()
	const v = "vvvvvvvvvvvvvv"
	var x bytes.Buffer
	switch {
	case n < 0: // the densest nesting of objects: 10,000 levels
		x.WriteString(strings.Repeat(`{"a":`, 9990) + "0" + strings.Repeat("}", 9990))
	case n == 0: // the densest array: one value per two octets
		x.WriteString("[" + strings.Repeat("0,", (total-4096)/2) + "0]")
	case deep:
		for range n {
			x.WriteString(`{"k":"` + v + `","n":`)
		}
		x.WriteString(`{}`)
		x.WriteString(strings.Repeat("}", n))
	default:
		x.WriteByte('[')
		for i := range n {
			if i > 0 {
				x.WriteByte(',')
			}
			x.WriteString(`{"k":"` + v + `","n":{}}`)
		}
		x.WriteByte(']')
	}
	p.Extra = Extra{"x": jsontext.Value(x.Bytes())}
	enc, err := p.Encode()
	require.NoError(t, err)
	if pad := total - len(enc); pad > 0 {
		p.Extra["pad"] = jsontext.Value(`"` + strings.Repeat("p", max(pad-len(`,"pad":""`), 0)) + `"`)
		enc, err = p.Encode()
		require.NoError(t, err)
	}
	return enc
}

// bytesAllocated returns the octets f allocates.
func bytesAllocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// rawWorld binds the text edit makes of a clean package's encoding to an
// offer (by gowebpki/jcs, whatever the checker thinks of it) and returns
// what the delegate's check needs.
func rawWorld(t testing.TB, edit func(enc string, room int) string) (*handoff.Received, []byte, CheckConfig) {
	t.Helper()
	w := newWorld(t, handoff.JWS, nil)
	p := refundPackage()
	hop := w.hops.plan(t)
	p.Handoff = Header{ID: string(hop), Time: handoff.TimeOf(w.clock.Now()).Std()}
	p.Sender.Agent, p.Receiver.Agent = string(triage), string(payments)
	enc0, err := p.Encode()
	require.NoError(t, err)
	enc := []byte(edit(string(enc0), 240<<10-len(enc0)))
	c, err := jcs.Transform(enc)
	require.NoError(t, err)
	out, err := w.from.Offer(context.Background(), handoff.OfferParams{To: payments, Dialog: "case-77", TTL: 120e9,
		Refs: []ref.Ref{Ref(c, "")}})
	require.NoError(t, err)
	data, err := out.Handoff.Encode(handoff.JSON)
	require.NoError(t, err)
	in, err := w.to.Receive(context.Background(), data, handoff.Host{Dialog: "case-77"})
	require.NoError(t, err)
	cfg := CheckConfig{Now: w.clock.Now, Artifacts: artifactSource()}
	if raceEnabled {
		cfg.Detectors = []Detector{credentialMember{}}
	}
	return in, enc, cfg
}

// Packages that fill the size bound with the members the struct decodes:
// long lists, many unknown members, many findings. Each stays within 16
// times its size plus a constant (64 KiB: a report's findings are capped
// at 64): those whose entries are near-empty are refused as too large,
// before they are decoded, and the others are checked.
func TestCheck_DenseListsAllocationBounded(t *testing.T) {
	insert := func(member, item string) func(string, int) string {
		return func(enc string, room int) string {
			return strings.Replace(enc, `"`+member+`":[`, `"`+member+`":[`+strings.Repeat(item+",", room/(len(item)+1)), 1)
		}
	}
	cases := []struct {
		name    string
		edit    func(string, int) string
		refused bool
	}{
		{"empty states", insert("state", "{}"), true},
		{"empty completed actions", insert("completed", "{}"), true},
		{"empty pending items", insert("pending", "{}"), true},
		{"short allowed actions", insert("allowed", `"ab"`), true},
		{"unknown members", func(enc string, room int) string {
			var b strings.Builder
			for i := 0; b.Len() < room-16; i++ {
				fmt.Fprintf(&b, `"u%d":0,`, i)
			}
			return "{" + b.String() + enc[1:]
		}, true},
		{"short evidence ids", func(enc string, room int) string {
			return strings.Replace(enc, `"evidence":["ledger-extract"`, `"evidence":[`+strings.Repeat(`"e",`, room/4)+`"ledger-extract"`, 1)
		}, true},
		{"realistic allowed actions", func(enc string, room int) string {
			var b strings.Builder
			for i := 0; b.Len() < room-64; i++ {
				fmt.Fprintf(&b, `"billing.refund.check.%06d",`, i)
			}
			return strings.Replace(enc, `"allowed":[`, `"allowed":[`+b.String(), 1)
		}, false},
		{"states missing members", insert("state", `{"system":"billing-ledger"}`), false},
		{"realistic states", insert("state", `{"system":"billing-ledger","state":"INV-1042 paid","as_of":"2026-10-26T07:33:20Z","evidence":["ledger-extract"]}`), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in, enc, cfg := rawWorld(t, c.edit)
			require.Greater(t, len(enc), 200<<10)
			var rep *Report
			var err error
			got := bytesAllocated(func() { rep, err = CheckReceived(context.Background(), in, Delivered{Package: enc}, cfg) })
			t.Logf("%d octets allocated for %d octets, %.1fx", got, len(enc), float64(got)/float64(len(enc)))
			if c.refused {
				require.ErrorIs(t, err, ErrTooLarge)
			} else {
				require.NoError(t, err)
				require.LessOrEqual(t, len(rep.Findings()), maxFindings+1)
			}
			require.LessOrEqual(t, got, uint64(maxCheckAlloc*len(enc)+64<<10))
		})
	}
}

// costWorld binds a deep or flat package to an offer and returns what the
// delegate's check needs.
func costWorld(t testing.TB, deep bool, n, total int) (*handoff.Received, []byte, CheckConfig) {
	t.Helper()
	w := newWorld(t, handoff.JWS, nil)
	p := refundPackage()
	hop := w.hops.plan(t)
	now := handoff.TimeOf(w.clock.Now())
	p.Handoff = Header{ID: string(hop), Time: now.Std()}
	p.Sender.Agent, p.Receiver.Agent = string(triage), string(payments)
	enc := costPackage(t, p, deep, n, total)
	c, err := Canonical(enc, DecodeOptions{})
	require.NoError(t, err)
	out, err := w.from.Offer(context.Background(), handoff.OfferParams{To: payments, Dialog: "case-77", TTL: 120e9,
		Refs: []ref.Ref{Ref(c, "")}})
	require.NoError(t, err)
	data, err := out.Handoff.Encode(handoff.JSON)
	require.NoError(t, err)
	in, err := w.to.Receive(context.Background(), data, handoff.Host{Dialog: "case-77"})
	require.NoError(t, err)
	require.True(t, in.Accepted())
	cfg := CheckConfig{Now: w.clock.Now, Artifacts: artifactSource()}
	if raceEnabled {
		// Under the race detector the regular expressions' pooled
		// matchers are dropped at random (see raceEnabled): measure the
		// structure of the check with the detector that uses none.
		cfg.Detectors = []Detector{credentialMember{}}
	}
	return in, enc, cfg
}

// The package of the issue: 248 KB, strings nested 9,000 deep, under the
// 256 KiB bound. One Check allocated 5.6 GiB; it now allocates at most 16
// times its size.
func TestCheck_DeepPackageAllocationBounded(t *testing.T) {
	const total = 248 << 10
	for _, deep := range []bool{true, false} {
		n := 9000
		if !deep {
			n = 8000 // each flat object is three octets longer
		}
		in, enc, cfg := costWorld(t, deep, n, total)
		require.Equal(t, total, len(enc))
		var rep *Report
		var err error
		got := bytesAllocated(func() { rep, err = CheckReceived(context.Background(), in, Delivered{Package: enc}, cfg) })
		require.NoError(t, err)
		require.True(t, rep.Acceptable(), "findings: %+v", rep.Findings())
		t.Logf("deep=%v: %d octets allocated for %d octets, %.1fx", deep, got, len(enc), float64(got)/float64(len(enc)))
		require.LessOrEqual(t, got, uint64(maxCheckAlloc*len(enc)), "deep=%v", deep)
	}
}

// The densest shapes within the size bound: objects nested to the
// decoder's limit at six octets a level, and an array of one value per two
// octets. Each stays within 16 times its size.
func TestCheck_DensestShapesAllocationBounded(t *testing.T) {
	const total = 248 << 10 // the array's; the nesting is its own size
	for _, shape := range []struct {
		name  string
		n     int
		total int
	}{{"nested objects", -1, 0}, {"dense array", 0, total}} {
		in, enc, cfg := costWorld(t, false, shape.n, shape.total)
		var rep *Report
		var err error
		got := bytesAllocated(func() { rep, err = CheckReceived(context.Background(), in, Delivered{Package: enc}, cfg) })
		require.NoError(t, err)
		require.True(t, rep.Acceptable(), "findings: %+v", rep.Findings())
		t.Logf("%s: %d octets allocated for %d octets, %.1fx", shape.name, got, len(enc), float64(got)/float64(len(enc)))
		require.LessOrEqual(t, got, uint64(maxCheckAlloc*len(enc)), shape.name)
	}
}

// BenchmarkCheckDeepVsFlat checks a package whose unknown member nests
// 9,000 levels deep and one of the same size whose 8,000 objects sit side
// by side, alternately in the same run, and reports deep over flat in time
// and in octets allocated (issue 20: at most 1.5), and each one's
// allocation as a multiple of its size (at most 16).
func BenchmarkCheckDeepVsFlat(b *testing.B) {
	const total = 248 << 10
	type side struct {
		in        *handoff.Received
		enc       []byte
		cfg       CheckConfig
		ns, alloc float64
	}
	var sides [2]*side
	for i, deep := range []bool{true, false} {
		n := 9000
		if !deep {
			n = 8000
		}
		in, enc, cfg := costWorld(b, deep, n, total)
		sides[i] = &side{in: in, enc: enc, cfg: cfg}
	}
	var ms runtime.MemStats
	runs := 0
	for b.Loop() {
		for _, s := range sides {
			runtime.ReadMemStats(&ms)
			a0, t0 := ms.TotalAlloc, time.Now()
			if _, err := CheckReceived(context.Background(), s.in, Delivered{Package: s.enc}, s.cfg); err != nil {
				b.Fatal(err)
			}
			s.ns += float64(time.Since(t0))
			runtime.ReadMemStats(&ms)
			s.alloc += float64(ms.TotalAlloc - a0)
		}
		runs++
	}
	deep, flat := sides[0], sides[1]
	b.ReportMetric(deep.ns/flat.ns, "deep/flat-time")
	b.ReportMetric(deep.alloc/flat.alloc, "deep/flat-alloc")
	b.ReportMetric(deep.alloc/float64(runs)/float64(len(deep.enc)), "deep-alloc/size")
	b.ReportMetric(flat.alloc/float64(runs)/float64(len(flat.enc)), "flat-alloc/size")
}
