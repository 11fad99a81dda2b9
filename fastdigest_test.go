package handoff

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestOfferFromJSONFast_Digests: the JSON fast path reads a grant or prev
// Digest from its tokens; for each of these payloads it either steps aside
// or returns what the full path returns, and it takes the plain ones.
func TestOfferFromJSONFast_Digests(t *testing.T) {
	const base = `{"v":1,"type":"offer","hop":"M55d1wxBmSQDoCOaPidOUg","dialog":"d","iss":"a","aud":"b","iat":1,"exp":2,"prev":%s}`
	val := `"zCBW4BSbF-4FGJQnm2iGg61NjY_wv7C81ke3dUpXbAY"`
	for _, tc := range []struct {
		prev string
		fast bool // the fast path takes it
	}{
		{`{"alg":"sha-256","val":` + val + `}`, true},
		{`{"val":` + val + `,"alg":"sha-256"}`, true},
		{` { "alg" : "sha-256" , "val" : ` + val + ` } `, true},
		{`{"\u0061lg":"sha-256","val":` + val + `}`, true},
		{`{"alg":"sha-256"}`, false},
		{`{"val":` + val + `}`, false},
		{`{}`, false},
		{`{"alg":"sha-256","val":` + val + `,"x":1}`, false},
		{`{"alg":"sha-256","val":` + val + `,"alg":"sha-256"}`, false},
		{`{"alg":1,"val":` + val + `}`, false},
		{`{"alg":"sha-256","val":null}`, false},
		{`{"alg":"sha-512","val":` + val + `}`, true}, // checked against its length later (HC-08)
		{`{"alg":"sha-256","val":"zCBW"}`, false},
		{`{"alg":"sha-256","val":` + val[:len(val)-2] + `Y="}`, false},
		{`{"alg":"sha-256","val":` + val + `,}`, false},
		{`["sha-256",` + val + `]`, false},
		{`"sha-256"`, false},
		{`{"alg":"sha-256","val":{"x":` + val + `}}`, false},
	} {
		payload := []byte(strings.Replace(base, "%s", tc.prev, 1))
		want, werr := fullOffer(payload, JSON, Limits{})
		got, ok := offerFromJSONFast(payload, Limits{})
		require.Equal(t, tc.fast, ok, "%s (full path: %v)", tc.prev, werr)
		if ok {
			require.NoError(t, werr, tc.prev)
			assertSameValue(t, want, got)
		}
		for _, field := range []string{"grant"} {
			p := []byte(strings.Replace(string(payload), `"prev":`, `"`+field+`":`, 1))
			want, werr := fullOffer(p, JSON, Limits{})
			got, ok := offerFromJSONFast(p, Limits{})
			require.Equal(t, tc.fast, ok, "%s %s (full path: %v)", field, tc.prev, werr)
			if ok {
				require.NoError(t, werr)
				assertSameValue(t, want, got)
			}
		}
	}
}
